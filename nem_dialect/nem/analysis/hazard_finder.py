"""The hazard analysis: HAZ-01 / HAZ-03 (LOOP-06) races of a program.

The program is replayed task instance by task instance (loops unrolled,
each iteration's offsets evaluated) against shadow memory
(`shadow_memory.Shadow`: per buffer, a sorted map of byte segments to their
last writer and readers since that write); every access is compared only
with the accesses it overlaps, never with all earlier ones (D-HAZ-SCALE),
and whether two instances are ordered is the happens-before model's
`ordered` (`nem.analysis.happens_before`, decisions D-HAZ-*).  A loop whose
accesses are proven periodic is replayed only until its shadow state
repeats, then moved to its last period (`steady_state`, D-HAZ-STEADY); up
to `MAX_TASK_INSTANCES` task instances, beyond that a loop is analyzed on
its first iterations only and a warning says so (D-HAZ-WINDOW).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from nem.analysis.happens_before import (
    Instance,
    Order,
    StaticTask,
    Structure,
    no_cyclic_gc,
    ordered,
    region_parts,
    task_label,
    task_operands,
)
from nem.analysis.shadow_memory import Access, Shadow
from nem.analysis.steady_state import LoopRun, regular_body
from nem.dialect.diagnostics import Diagnostic, SourceLoc
from nem.dialect.ops import BufferOp, LoopOp, ProgramOp, RegionOp, TaskOp
from nem.dialect.semantics import (
    Evaluator,
    ExprError,
    NotAnExpression,
    instance_index,
    max_in_flight,
    run_compiled,
    static_windows,
)

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
        self.found: dict[tuple, tuple[Access, Access, Order]] = {}
        self.warnings: list[Diagnostic] = []
        self.instances = 0
        self.work = 0
        """Segments visited plus ordering queries made: the analysis's cost,
        for callers that budget repeated scans."""
        self._budget_left = self.max_instances = max_instances
        self._ops_cache: dict[StaticTask, list[tuple]] = {}
        self._body_tasks: dict[LoopOp, int] = {}
        self._invariant: dict[LoopOp, bool] = {}
        self._buffer_windows: dict[SSAValue, tuple[int, ...]] = {}
        self._stopped = False
        for op in program.walk():
            if isinstance(op, LoopOp):
                self.depth_of[op.block.args[0]] = _loop_depth(op)
            elif isinstance(op, BufferOp):
                self._buffer_windows[op.result] = static_windows(_enclosing_loops(op), self.ev)

    # -- enumeration -----------------------------------------------------
    def run(self) -> list[Diagnostic]:
        self._block(self.program.block, (), (), ())
        return self.warnings + [self._diagnostic(*v) for v in self.found.values()]

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
        n_if = max_in_flight(loop)
        body_tasks = self._body_tasks.get(loop)
        if body_tasks is None:
            body_tasks = self._body_tasks[loop] = \
                sum(1 for o in loop.walk() if isinstance(o, TaskOp)) or 1
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
        run = self._steady_run(loop, ords, ivs, lo, trip)
        if run is None:
            if n < trip:
                self.warnings.append(self._window_warning(loop, lo, hi, n))
            self._budget_left -= n * body_tasks
            self._iterations(loop, n, ords, trips + (trip,), ivs, lo, hi)
            return
        warn_at = len(self.warnings)
        jumped, replayed = self._iterations(loop, n, ords, trips + (trip,), ivs, lo, hi, run)
        self._budget_left -= replayed * body_tasks
        if not jumped and n < trip:
            self.warnings.insert(warn_at, self._window_warning(loop, lo, hi, n))

    def _iterations(self, loop: LoopOp, count: int, ords, trips, ivs, lo: int, hi: int,
                    run: LoopRun | None = None) -> tuple[bool, int]:
        """Replay iterations 0..count-1 of `loop`.  With `run`, compare the
        effective state every period from iteration N on; once it repeats,
        jump to the loop's last period and replay to the loop's end
        (D-HAZ-STEADY).  (jumped, iterations replayed)."""
        trip = trips[-1]
        o, end, snap, jumped, replayed = 0, count, None, False, 0
        while o < end:
            if self.instances > 2 * self.max_instances:
                if not self._stopped:
                    self._stopped = True
                    self.warnings.append(self._window_warning(loop, lo, hi, o))
                break
            if run is not None and o >= run.n and (o - run.n) % run.reg.period == 0:
                state = run.canonical_state(self.shadows, o, (o - run.n) // run.reg.period)
                if state is not None and state == snap:
                    period = run.reg.period
                    # land before the last iteration: the entries dropped as
                    # dead (iteration o' - N) must be complete at endloop too
                    m = (trip - 1 - o) // period
                    moved = run.shifted(self.shadows, o, m) if m else None
                    run = None
                    if moved is not None:
                        self.shadows.update(moved)
                        o, end, jumped = o + m * period, trip, True
                        continue
                snap = state
                if state is None:
                    run = None
            self._block(loop.block, ords + (o,), trips, ivs + (lo + o,))
            replayed += 1
            o += 1
        return jumped, replayed

    def _steady_run(self, loop: LoopOp, ords, ivs, lo: int, trip: int) -> LoopRun | None:
        """The loop's steady-state description when its body (no nested loop)
        is proven periodic and every enclosing loop is @max_in_flight(1)."""
        chain = _enclosing_loops(loop)
        if any(max_in_flight(lp) != 1 for lp in chain) or \
                any(isinstance(op, LoopOp) for op in loop.block.ops):
            return None
        level = len(chain)
        accesses, windows = [], set()
        for op in loop.block.ops:
            if isinstance(op, TaskOp):
                for _, _, buffer, off, ext in self._operands(self.s.tasks[op]):
                    accesses.append((buffer, off, ext))
                    w = self._buffer_windows.get(buffer, ())
                    if len(w) > level:
                        windows.add(w[level])
        env = {lp.block.args[0]: v for lp, v in zip(chain, ivs)}
        reg = regular_body(self.ev, loop, accesses, env, lo, trip, sorted(windows))
        return None if reg is None else LoopRun(loop, chain, ords, max_in_flight(loop), reg)

    def _window_warning(self, loop: LoopOp, lo: int, hi: int, n: int) -> Diagnostic:
        return Diagnostic(
            "warning", f"hazard analysis of loop '{loop.iv_name.data}' examined "
            f"iterations {lo}..{lo + n - 1} of {lo}..{hi} only (more than "
            f"{self.max_instances} task instances)", SourceLoc.of(loop), "HAZ-03",
            "accesses of the remaining iterations are not checked (decision D-HAZ-WINDOW)")

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
                    ops.append((value, write, buf, off, ext))
            ops.sort(key=lambda x: x[1])
            self._ops_cache[task] = ops
        return ops

    def _task(self, inst: Instance) -> None:
        self.instances += 1
        for value, write, buffer, off, ext in self._operands(inst.task):
            try:
                o, e = self._value(off, inst.ivs), self._value(ext, inst.ivs)
            except ExprError:
                continue
            if o is None or e is None or e <= 0:
                continue
            windows = self._buffer_windows.get(buffer, ())
            slot = instance_index(inst.ords[:len(windows)], windows) if windows else 0
            self._access(Access(inst, value, o, o + e, write), (buffer, slot))

    def _access(self, acc: Access, buffer: tuple[SSAValue, int]) -> None:
        sh = self.shadows.get(buffer)
        if sh is None:
            sh = self.shadows[buffer] = Shadow()
        a, b = sh.segments(acc.lo, acc.hi)
        self.work += b - a
        checked: set[int] = set()
        superseded: dict[int, bool] = {}
        for k in range(a, b):
            st = sh.state[k]
            if st is None:
                if not acc.write:
                    sh.state[k] = (None, [acc])
                continue
            writer, readers = st
            if acc.write:
                if writer is not None:
                    self._check(writer, acc, checked)
                for r in readers:
                    self._check(r, acc, checked)
                continue
            kept = [r for r in readers if r.region is not acc.region
                    or not self._superseded(r, acc, superseded)]
            if writer is not None and len(kept) == len(readers):
                # else a dropped reader was compared with this writer: ordered
                # after it (so is acc) or a race with the same key was found
                self._check(writer, acc, checked)
            kept.append(acc)
            readers[:] = kept
        if acc.write:
            sh.write(acc, acc.lo, acc.hi)

    def _superseded(self, r: Access, acc: Access, memo: dict[int, bool]) -> bool:
        """Reader `r` can be forgotten once the read `acc` of the same task
        operand is ordered after it: a later write unordered with `r` is
        unordered with `acc` too (ordering is transitive), and the race it
        reports names the same tasks and operands; and `acc` need not be
        compared with the segment's writer, which `r` was (D-HAZ-SCALE).
        Without this, a buffer read whole by every iteration of a loop and
        rewritten piecewise keeps one reader per iteration and costs a query
        per writer (issue 11: a 3 KB input took 10 s)."""
        if r.inst.task is not acc.inst.task:
            return False
        hit = memo.get(id(r))
        if hit is None:
            self.work += 1
            hit = memo[id(r)] = r.inst is acc.inst or ordered(self.s, r.inst, acc.inst).ordered
        return hit

    def _check(self, prev: Access, acc: Access, checked: set[int]) -> None:
        if prev.inst is acc.inst or id(prev) in checked:
            return
        checked.add(id(prev))
        self.work += 1
        order = ordered(self.s, prev.inst, acc.inst)
        if order.ordered:
            return
        key = (prev.inst.task, acc.inst.task, prev.region, acc.region, prev.write, acc.write)
        self.found.setdefault(key, (prev, acc, order))

    # -- reporting ---------------------------------------------------------
    @staticmethod
    def _diagnostic(a: Access, b: Access, order: Order) -> Diagnostic:
        from nem.dialect.operand_binding import value_label

        kind = "write-after-write" if a.write and b.write else \
            ("read-after-write" if a.write else "write-after-read")
        owner = rop_buffer(b.region).owner
        assert isinstance(owner, BufferOp)
        buf = owner.buffer_name.data
        ta, tb = a.inst.task.op, b.inst.task.op
        la, lb = SourceLoc.of(ta), SourceLoc.of(tb)
        lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)

        def what(acc: Access) -> str:
            verb = "writes" if acc.write else "reads"
            return f"{verb} {value_label(acc.region)} bytes [{acc.lo}, {acc.hi}) of '{buf}'"

        name_a = task_label(ta)
        line_a = f" (line {la.line})" if la else ""
        a_tok = ta.token_name()
        if order.loop is not None:
            iv = order.loop.iv_name.data
            n = max_in_flight(order.loop)
            rule = "HAZ-03"
            msg = (f"{kind} hazard across iterations of loop '{iv}': {task_label(tb)} "
                   f"{what(b)} in iteration {iv}+{order.distance} while {name_a}{line_a} "
                   f"{what(a)} in iteration {iv}; @max_in_flight({n}) lets iterations at "
                   f"distance {order.distance} < {n} overlap and no token orders them")
            if (a.lo, a.hi) == (b.lo, b.hi):
                fix = (f"the same bytes are reused every iteration: give each of the {n} "
                       f"in-flight iterations its own slot ({'double' if n == 2 else 'multiple'} "
                       f"buffering: a buffer {n} times the size, the region at offset "
                       f"({iv} mod {n}) * size), move the access out of the loop (load once), or "
                       f"use @max_in_flight({order.distance})")
            else:
                fix = (f"give each of the {n} in-flight iterations its own slot (offset "
                       f"({iv} mod K) * size with K >= {n}), or use @max_in_flight({order.distance})")
            note = f"iterations {_ivs(order.loop, a)} and {_ivs(order.loop, b)} (distance " \
                   f"{order.distance}) touch bytes [{lo}, {hi}) of '{buf}'"
        elif order.after_loop is not None:
            iv = order.after_loop.iv_name.data
            rule = "HAZ-01"
            msg = (f"{kind} hazard: {task_label(tb)} {what(b)} after loop '{iv}', but "
                   f"{name_a}{line_a} {what(a)} in one of the loop's last "
                   f"{max_in_flight(order.after_loop)} iteration(s) and nothing waits for it")
            fix = f"wait({a_tok}) inside the loop" if a_tok else "name the task's token and wait for it inside the loop"
            fix += " (tasks of the last @max_in_flight iterations are not complete at endloop)"
            note = f"bytes [{lo}, {hi}) of '{buf}' overlap"
        else:
            rule = "HAZ-01"
            where = _where(a.inst)
            msg = (f"{kind} hazard: {task_label(tb)} {what(b)}{_where(b.inst)} but is not "
                   f"ordered after {name_a}{line_a}, which {what(a)}{where}")
            fix = (f"add {a_tok} to the deps of {tb.token_name() or 'the task'} "
                   f"(deps=[..., {a_tok}]) or wait({a_tok}) before it") if a_tok else \
                "name the earlier task's token and add it to this task's deps"
            note = f"bytes [{lo}, {hi}) of '{buf}' overlap; no deps, wait or .sync orders the two tasks"
        notes = [Diagnostic("note", f"conflicting access by {name_a}: {note}", la)]
        return Diagnostic("error", msg, lb, rule, fix, notes)


def _loop_depth(loop: LoopOp) -> int:
    """0-based nesting depth of a loop (its variable's index in `ivs`)."""
    return len(_enclosing_loops(loop))


def _enclosing_loops(op: Operation) -> tuple[LoopOp, ...]:
    out = []
    p = op.parent_op()
    while p is not None and not isinstance(p, ProgramOp):
        if isinstance(p, LoopOp):
            out.append(p)
        p = p.parent_op()
    return tuple(reversed(out))


def _ivs(loop: LoopOp, acc_or_inst) -> str:
    inst = acc_or_inst.inst if isinstance(acc_or_inst, Access) else acc_or_inst
    k = inst.task.loops.index(loop)
    return f"{loop.iv_name.data}={inst.ivs[k]}"


def _where(inst: Instance) -> str:
    if not inst.task.loops:
        return ""
    return " (at " + ", ".join(f"{lp.iv_name.data}={v}" for lp, v in
                               zip(inst.task.loops, inst.ivs)) + ")"


def rop_buffer(region: SSAValue) -> SSAValue:
    rop = region.owner
    assert isinstance(rop, RegionOp)
    return region_parts(rop)[0]


@dataclass(frozen=True)
class Race:
    """Two conflicting accesses (`earlier` first in program order) that the
    model does not order, and why (`order`: a loop window, an access after
    a loop, or neither)."""

    earlier: Access
    later: Access
    order: Order

    def diagnostic(self) -> Diagnostic:
        return HazardFinder._diagnostic(self.earlier, self.later, self.order)


@dataclass(frozen=True)
class RaceScan:
    """What `find_races` found, and the work it took."""

    races: list[Race]
    warnings: list[Diagnostic]
    work: int
    """Segments visited plus ordering queries: what a caller repeating the
    scan budgets."""


def find_races(program: ProgramOp, max_instances: int = MAX_TASK_INSTANCES) -> RaceScan:
    """The races `find_hazards` reports, as records (and its warnings):
    for passes that repair them (`nem-synthesize-deps`)."""
    with no_cyclic_gc():
        finder = HazardFinder(program, max_instances)
        finder.run()
        return RaceScan([Race(a, b, o) for a, b, o in finder.found.values()],
                        finder.warnings, finder.work)


def find_hazards(program: ProgramOp, max_instances: int = MAX_TASK_INSTANCES) -> list[Diagnostic]:
    """HAZ-01 / HAZ-03 (LOOP-06) diagnostics of a verified program."""
    with no_cyclic_gc():
        return HazardFinder(program, max_instances).run()
