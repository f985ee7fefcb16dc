"""The enumerating hazard analysis nem-check-hazards used before D-HAZ-SYMBOLIC,
kept as a test oracle only: the program is replayed task instance by task
instance (loops unrolled, each iteration's offsets evaluated) against shadow
memory (per buffer, a sorted map of byte segments to their last writer and
readers since that write), and whether two instances are ordered is the
happens-before model's `ordered`.  Invariant loops are replayed for N
iterations; beyond `MAX_TASK_INSTANCES` a loop is cut short with a
warning (D-HAZ-WINDOW).  (Its steady-state jump, D-HAZ-STEADY, is gone with
it: the oracle replays every iteration.)  `test_hazard_oracle.py` compares
it with `nem.analysis.hazard_finder` on generated programs.
"""

from __future__ import annotations

from xdsl.ir import Block, BlockArgument, SSAValue

from nem.analysis.element_access import ElementPattern, element_pattern
from nem.analysis.happens_before import (
    Instance,
    StaticTask,
    Structure,
    enclosing_loops,
    region_parts,
    task_operands,
)
from nem.analysis.hazard_enum import Shadow, ShadowReplay, window_warning
from nem.analysis.hazard_report import Access, race_diagnostic
from nem.dialect.bounded_cache import BoundedCache
from nem.dialect.diagnostics import Diagnostic
from nem.dialect.expressions import Evaluator, ExprError, NotAnExpression, run_compiled
from nem.dialect.gc_pause import gc_paused
from nem.dialect.ops import BufferOp, LoopOp, ProgramOp, RegionOp, TaskOp
from nem.dialect.semantics.instances import instance_index, static_windows

MAX_TASK_INSTANCES = 1 << 20
"""Task instances (tasks x iterations) the hazard check enumerates (D-HAZ-WINDOW)."""
MIN_WINDOW_ITERATIONS = 16
"""A loop truncated by the budget still gets 2N + this many iterations."""


class HazardFinder:
    def __init__(self, program: ProgramOp, max_instances: int = MAX_TASK_INSTANCES):
        self.program = program
        self.s = Structure(program)
        self.ev = Evaluator()
        self.depth_of: dict[BlockArgument, int] = {}
        self.shadows: dict[tuple[SSAValue, int], Shadow] = {}
        self.replay = ShadowReplay(self.s)
        self.found = self.replay.found
        self.warnings: list[Diagnostic] = []
        self.instances = 0
        self._budget_left = self.max_instances = max_instances
        self._ops_cache: dict[StaticTask, list[tuple]] = {}
        self._body_tasks: dict[LoopOp, int] = {}
        self._invariant: dict[LoopOp, bool] = {}
        self._buffer_windows: dict[SSAValue, tuple[int, ...]] = {}
        self._stopped = False
        self.patterns: BoundedCache[ElementPattern, ElementPattern] = BoundedCache(1 << 16)
        for op in program.walk():
            if isinstance(op, LoopOp):
                self.depth_of[op.block.args[0]] = _loop_depth(op)
            elif isinstance(op, BufferOp):
                self._buffer_windows[op.result] = static_windows(enclosing_loops(op), self.ev)

    # -- enumeration -----------------------------------------------------
    def run(self) -> list[Diagnostic]:
        self._block(self.program.block, (), (), ())
        return self.warnings + [race_diagnostic(*v) for v in self.found.values()]

    def _block(self, block: Block, ords, trips, ivs) -> None:
        for op in block.ops:
            if isinstance(op, TaskOp):
                self._task(Instance(self.s.tasks[op], ords, trips, ivs))
            elif isinstance(op, LoopOp):
                self._loop(op, ords, trips, ivs)

    def _value(self, value: SSAValue, ivs) -> int | None:
        """`value` at loop-variable vector `ivs` (None: not an integer expression)."""
        try:
            return run_compiled(self.ev.compile(value, self.depth_of), ivs)
        except NotAnExpression:
            return None

    def _loop(self, loop: LoopOp, ords, trips, ivs) -> None:
        try:
            lo, hi = self._value(loop.lower, ivs), self._value(loop.upper, ivs)
        except ExprError:
            return
        if lo is None or hi is None or hi < lo:
            return
        trip = hi - lo + 1
        n_if = loop.max_in_flight()
        body_tasks = self._body_tasks.get(loop)
        if body_tasks is None:
            body_tasks = self._body_tasks[loop] = (
                sum(1 for o in loop.walk() if isinstance(o, TaskOp)) or 1
            )
        if self._is_invariant(loop) and trip > n_if:
            # D-HAZ-WINDOW: every iteration touches the same bytes, so N
            # iterations stand for all: they are at every distance < N from each
            # other, as unordered with what precedes the loop as its first N and
            # with what follows it as its last N (so they are examined as the
            # whole loop, trip = N); buffer instances repeat with period <= N
            self._budget_left -= n_if * body_tasks
            self._iterations(loop, n_if, ords, trips + (n_if,), ivs, lo, hi)
            return
        n = trip
        if trip * body_tasks > self._budget_left:
            n = min(trip, max(self._budget_left // body_tasks, 2 * n_if + MIN_WINDOW_ITERATIONS))
        if n < trip:
            self.warnings.append(self._window_warning(loop, lo, hi, n))
        self._budget_left -= n * body_tasks
        self._iterations(loop, n, ords, trips + (trip,), ivs, lo, hi)

    def _iterations(self, loop: LoopOp, count: int, ords, trips, ivs, lo: int, hi: int) -> None:
        """Replay iterations 0..count-1 of `loop`."""
        for o in range(count):
            if self.instances > 2 * self.max_instances:
                if not self._stopped:
                    self._stopped = True
                    self.warnings.append(self._window_warning(loop, lo, hi, o))
                return
            self._block(loop.block, ords + (o,), trips, ivs + (lo + o,))

    def _window_warning(self, loop: LoopOp, lo: int, hi: int, n: int) -> Diagnostic:
        return window_warning(loop, lo, hi, n, self.max_instances)

    def _is_invariant(self, loop: LoopOp) -> bool:
        """No access, nested loop bound or region of the body depends on the loop
        variable: every iteration repeats the same accesses."""
        hit = self._invariant.get(loop)
        if hit is None:
            iv = loop.block.args[0]
            hit = True
            for op in loop.walk():
                vals: tuple[SSAValue, ...] = ()
                if isinstance(op, RegionOp):
                    vals = region_parts(op)[1:]
                elif isinstance(op, LoopOp) and op is not loop:
                    vals = (op.lower, op.upper)
                if any(iv in self.ev.free_loop_args(v) for v in vals):
                    hit = False
                    break
            self._invariant[loop] = hit
        return hit

    def _operands(self, task: StaticTask) -> list[tuple]:
        """(region, is_write, buffer, offset, extent) of a task, reads first."""
        ops = self._ops_cache.get(task)
        if ops is None:
            ops = []
            reads, writes, _ = task_operands(task.op)
            for value, write in [(v, False) for v in reads] + [(v, True) for v in writes]:
                rop = value.owner
                if isinstance(rop, RegionOp):
                    buf, off, ext = region_parts(rop)
                    ops.append(
                        (value, write, buf, off, ext, element_pattern(rop, self.ev, self.patterns))
                    )
            ops.sort(key=lambda x: x[1])
            self._ops_cache[task] = ops
        return ops

    def _task(self, inst: Instance) -> None:
        self.instances += 1
        for value, write, buffer, off, ext, pattern in self._operands(inst.task):
            try:
                o, e = self._value(off, inst.ivs), self._value(ext, inst.ivs)
            except ExprError:
                continue
            if o is None or e is None or e <= 0:
                continue
            windows = self._buffer_windows.get(buffer, ())
            slot = instance_index(inst.ords[: len(windows)], windows) if windows else 0
            sh = self.shadows.get((buffer, slot))
            if sh is None:
                sh = self.shadows[(buffer, slot)] = Shadow()
            runs = None if pattern is None else [(o + a, o + b) for a, b in pattern.runs(e)]
            self.replay.access(Access(inst, value, o, o + e, write), sh, runs)


def _loop_depth(loop: LoopOp) -> int:
    """0-based nesting depth of a loop (its variable's index in `ivs`)."""
    return len(enclosing_loops(loop))


def find_races(program: ProgramOp, max_instances: int = MAX_TASK_INSTANCES) -> list[tuple]:
    """The races `find_hazards` reports, as (earlier, later, order) records."""
    with gc_paused():
        finder = HazardFinder(program, max_instances)
        finder.run()
        return [(a, b, o) for a, b, o in finder.found.values()]


def find_hazards(program: ProgramOp, max_instances: int = MAX_TASK_INSTANCES) -> list[Diagnostic]:
    """HAZ-01 / HAZ-03 (LOOP-06) diagnostics of a verified program."""
    with gc_paused():
        return HazardFinder(program, max_instances).run()
