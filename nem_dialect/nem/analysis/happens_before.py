"""Happens-before analysis of NEM programs: hazards and token liveness.

Shared by `nem-check-hazards`, `nem-check-tokens` and the device checks
(`max_live_tokens` against `SEQ.max_active_tokens`, DEV-17).  Semantics are
the decisions D-HAZ-* of docs/spec-decisions.md; in short:

* task A is *ordered before* task B when A's token reaches B through `deps`
  (transitively), or a barrier covering A is issued before B -- a barrier is
  a `wait` (covering its tokens and everything they depend on) or a `.sync`
  task (covering itself and its dependencies); a barrier blocks the later
  statements of its own block instance (loop iteration) and, through them,
  of the enclosing blocks (D-HAZ-WAIT);
* iterations `i` and `i+d` of a loop with `@max_in_flight(N)` (default 1, LOOP-02) are
  unordered for `1 <= d < N`; iteration `i+N` starts only after iteration
  `i` fully completed (every task and wait of it, LOOP-06, D-HAZ-PIPE);
* statements after `endloop` are issued after every iteration was issued and
  passed its waits, so the tasks of all but the last N iterations are
  complete there, and of the last N only the tasks their waits cover
  (D-HAZ-ENDLOOP).

The ordering relation is computed statically from the program's structure
(`Structure`), so that a query on two task *instances* (a task plus its
iteration ordinals) costs O(loop depth).  Hazards are found with shadow
memory (`_Shadow`): per buffer, a sorted map of byte segments to their last
writer and readers since that write; every access is compared only with the
accesses it overlaps, never with all earlier ones (D-HAZ-SCALE).  Loops are
unrolled (each iteration's offsets evaluated), except that a loop whose
accesses are proven periodic is replayed only until its shadow state
repeats, then moved to its last period (`steady_state`, D-HAZ-STEADY); up
to `MAX_TASK_INSTANCES` task instances, beyond that a loop is analyzed on
its first iterations only and a warning says so (D-HAZ-WINDOW).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from nem.analysis.shadow_memory import Access, Shadow
from nem.analysis.steady_state import LoopRun, regular_body
from nem.dialect.diagnostics import Diagnostic, SourceLoc
from nem.dialect.semantics import (
    Evaluator,
    ExprError,
    NotAnExpression,
    complete_at_loop_end,
    instance_index,
    loop_window,
    max_in_flight,
    run_compiled,
    static_windows,
    window_orders,
)
from nem.dialect.ops import BufferOp, ComputeOp, LoopOp, ProgramOp, RegionOp, TaskOp, WaitOp

MAX_TASK_INSTANCES = 1 << 20
"""Task instances (tasks x iterations) the hazard check enumerates (D-HAZ-WINDOW)."""
MIN_WINDOW_ITERATIONS = 16
"""A loop truncated by the budget still gets 2N + this many iterations."""


# --------------------------------------------------------------------------
# static structure
# --------------------------------------------------------------------------

def task_label(op: Operation) -> str:
    """How diagnostics name a task: `tB (transfer.async)` or `an unnamed gemm.async`."""
    kind = _kind(op)
    name = op.token_name() if isinstance(op, TaskOp) else None
    return f"{name} ({kind})" if name else f"an unnamed {kind}"


def _kind(op: Operation) -> str:
    base = getattr(op, "KEYWORD", None) or getattr(op, "opcode", None) or op.name.removeprefix("nem.")
    sync = isinstance(op, TaskOp) and op.is_sync
    return f"{base}.{'sync' if sync else 'async'}"


def task_operands(op: TaskOp) -> tuple[list[SSAValue], list[SSAValue], tuple[SSAValue, ...]]:
    """(read regions, written regions, dep tokens) of a task.

    Same as `operand_regions()` / `dep_values()`, read straight from the
    operand tuple: xDSL's segment-aware getters dominate the cost of the
    analysis on large programs otherwise."""
    vals = op._operands  # noqa: SLF001 - hot path
    if isinstance(op, ComputeOp):
        ni, no, nd = op.properties["operandSegmentSizes"].get_values()[:3]
        return list(vals[:ni]), list(vals[ni:ni + no]), tuple(vals[ni + no:ni + no + nd])
    # transfer / store: dst, src, deps...
    return [vals[1]], [vals[0]], tuple(vals[2:])


def region_parts(rop: RegionOp) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(buffer, offset, extent) of a region op (its first three operands)."""
    vals = rop._operands  # noqa: SLF001 - hot path
    return vals[0], vals[1], vals[2]


@dataclass(eq=False)
class StaticTask:
    op: TaskOp
    block: Block
    index: int
    """Position of the task in its block."""
    pos: int
    """Global program-order position (preorder)."""
    loops: tuple[LoopOp, ...]
    deps: list[StaticTask] = field(default_factory=list)
    cover: dict[Block, int] = field(default_factory=dict)
    """Block -> index of the first statement of that block that is a barrier
    covering this task (a wait / .sync, or a loop statement containing one)."""
    used_in: set[Block] = field(default_factory=set)
    """Loop bodies holding (maybe nested) a task or wait ordered after this task."""


class Structure:
    """Static facts of one program: tasks, barriers, covers, loop parents."""

    def __init__(self, program: ProgramOp):
        self.program = program
        self.tasks: dict[Operation, StaticTask] = {}
        self.order: list[Operation] = []
        self.pos: dict[Operation, int] = {}
        self.parent_loop: dict[Block, LoopOp | None] = {program.block: None}
        self.index: dict[Operation, int] = {}
        self._ev = Evaluator()
        self._completes: dict[LoopOp, bool] = {}
        self._collect(program.block, ())
        self._covers()
        self._dep_memo: dict[tuple[StaticTask, StaticTask], bool] = {}

    def _collect(self, block: Block, loops: tuple[LoopOp, ...]) -> None:
        for k, op in enumerate(block.ops):
            self.index[op] = k
            self.pos[op] = len(self.order)
            self.order.append(op)
            if isinstance(op, TaskOp):
                self.tasks[op] = StaticTask(op, block, k, self.pos[op], loops)
            elif isinstance(op, LoopOp):
                self.parent_loop[op.block] = op
                self._collect(op.block, loops + (op,))
        for op in block.ops:
            if isinstance(op, TaskOp):
                st = self.tasks[op]
                st.deps = [self.tasks[v.owner] for v in task_operands(op)[2]
                           if isinstance(v.owner, TaskOp) and v.owner in self.tasks]

    def producer(self, token: SSAValue) -> StaticTask | None:
        owner = token.owner
        return self.tasks.get(owner) if isinstance(owner, Operation) else None

    def _chain(self, block: Block, index: int, stop: Block) -> Iterator[tuple[Block, int]]:
        """(block, index) from `block` up to `stop`: the statement containing
        position `index` of `block`, at every enclosing level."""
        while True:
            yield block, index
            if block is stop:
                return
            loop = self.parent_loop.get(block)
            if loop is None:
                return
            block, index = loop.parent_block(), self.index[loop]

    def _covers(self) -> None:
        """Fill `cover` (barriers) and `used_in` (loop bodies ordered after a task)."""
        for op in self.order:
            block = op.parent_block()
            k = self.index[op]
            if isinstance(op, WaitOp):
                roots = [t for t in (self.producer(v) for v in op.tokens) if t is not None]
                self._mark_cover(roots, block, k)
            elif isinstance(op, TaskOp):
                st = self.tasks[op]
                if op.is_sync:
                    self._mark_cover([st], block, k)
                if st.loops:
                    self._mark_used(st.deps, block)

    def _mark_cover(self, roots: list[StaticTask], block: Block, k: int) -> None:
        stack = list(roots)
        while stack:
            c = stack.pop()
            if block in c.cover:
                continue  # covered earlier in this block, and so are its deps
            for blk, idx in self._chain(block, k, c.block):
                c.cover.setdefault(blk, idx)
                if blk is not c.block:
                    c.used_in.add(blk)
            stack.extend(c.deps)

    def _mark_used(self, roots: list[StaticTask], block: Block) -> None:
        """A task of loop body `block` depends on `roots`: they are complete
        whenever that task's iteration is.  Some iteration of a loop completes
        before the loop ends when trip count > N at some level, so then the
        roots are also complete after the enclosing loop statement (cover)."""
        stack = list(roots)
        while stack:
            c = stack.pop()
            if block in c.used_in or block is c.block:
                continue
            completes = False
            for blk, idx in self._chain(block, 0, c.block):
                if blk is c.block:
                    if completes:
                        c.cover.setdefault(blk, idx)
                    break
                c.used_in.add(blk)
                completes = completes or self._some_iteration_completes(self.parent_loop[blk])
            stack.extend(c.deps)

    def _some_iteration_completes(self, loop: LoopOp) -> bool:
        hit = self._completes.get(loop)
        if hit is None:
            try:
                lo, hi = self._ev.static(loop.lower), self._ev.static(loop.upper)
            except ExprError:
                lo = hi = None
            hit = lo is not None and hi is not None and \
                complete_at_loop_end(0, hi - lo + 1, max_in_flight(loop))
            self._completes[loop] = hit
        return hit

    def dep_reaches(self, a: StaticTask, b: StaticTask) -> bool:
        """A's token reaches B through deps (transitively)."""
        key = (a, b)
        hit = self._dep_memo.get(key)
        if hit is None:
            seen: set[int] = set()
            stack = list(b.deps)
            hit = False
            while stack:
                c = stack.pop()
                if c is a:
                    hit = True
                    break
                if c.pos < a.pos or id(c) in seen:
                    continue
                seen.add(id(c))
                stack.extend(c.deps)
            self._dep_memo[key] = hit
        return hit


# --------------------------------------------------------------------------
# instances and the ordering oracle
# --------------------------------------------------------------------------

@dataclass(eq=False)
class Instance:
    """One execution of a task: ordinals (0-based) and trip counts of its loops."""

    task: StaticTask
    ords: tuple[int, ...]
    trips: tuple[int, ...]
    ivs: tuple[int, ...]
    """Loop-variable values (for messages)."""


@dataclass
class Order:
    ordered: bool
    loop: LoopOp | None = None
    distance: int | None = None
    """Iteration distance when the two instances are in different iterations of `loop`."""
    after_loop: LoopOp | None = None
    """Set when `a` is inside a loop that `b` follows and `a` is not complete there."""


def ordered(s: Structure, a: Instance, b: Instance) -> Order:
    """Is instance `a` (earlier in program order) complete before `b` starts?"""
    la, lb = a.task.loops, b.task.loops
    k = 0
    while k < len(la) and k < len(lb) and la[k] is lb[k] and a.ords[k] == b.ords[k]:
        k += 1
    if k < len(la) and k < len(lb) and la[k] is lb[k]:
        d = b.ords[k] - a.ords[k]
        return Order(window_orders(d, max_in_flight(la[k])), la[k], d)
    if len(la) > k:
        # a is inside loop statement la[k] of the common block; b follows it
        if a.task.block in a.task.cover:
            return Order(True)
        for m in range(len(la) - 1, k - 1, -1):
            if complete_at_loop_end(a.ords[m], a.trips[m], max_in_flight(la[m])):
                return Order(True)
        return Order(False, after_loop=la[k])
    # a is directly in the common block
    if s.dep_reaches(a.task, b.task):
        return Order(True)
    cover = a.task.cover
    d_block = a.task.block
    idx = s.index[lb[k]] if len(lb) > k else b.task.index
    c = cover.get(d_block)
    if c is not None and c < idx:
        return Order(True)
    for m in range(k, len(lb)):
        body = lb[m].block
        idx = s.index[lb[m + 1]] if m + 1 < len(lb) else b.task.index
        c = cover.get(body)
        if c is not None and c < idx:
            return Order(True)
        if window_orders(b.ords[m], max_in_flight(lb[m])) and body in a.task.used_in:
            return Order(True)
    return Order(False)


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
        checked: set[int] = set()
        for k in range(a, b):
            st = sh.state[k]
            if st is None:
                if not acc.write:
                    sh.state[k] = (None, [acc])
                continue
            writer, readers = st
            if writer is not None:
                self._check(writer, acc, checked)
            if acc.write:
                for r in readers:
                    self._check(r, acc, checked)
            else:
                readers.append(acc)
        if acc.write:
            sh.write(acc, acc.lo, acc.hi)

    def _check(self, prev: Access, acc: Access, checked: set[int]) -> None:
        if prev.inst is acc.inst or id(prev) in checked:
            return
        checked.add(id(prev))
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
        buf = rop_buffer(b.region).owner.buffer_name.data
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
                fix = (f"the same bytes are reused every iteration: move the access out of the "
                       f"loop (load once), or use @max_in_flight({order.distance})")
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
    return region_parts(region.owner)[0]


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The IR of a large program is millions of objects: keep the cyclic GC
    from rescanning all of them every few thousand allocations of the
    analysis (it made the analysis superlinear).  Nothing here makes cycles
    that outlive the call."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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


def find_races(program: ProgramOp,
               max_instances: int = MAX_TASK_INSTANCES) -> tuple[list[Race], list[Diagnostic]]:
    """The races `find_hazards` reports, as records (and its warnings):
    for passes that repair them (`nem-synthesize-deps`)."""
    with _no_cyclic_gc():
        finder = HazardFinder(program, max_instances)
        finder.run()
        return [Race(a, b, o) for a, b, o in finder.found.values()], finder.warnings


def find_hazards(program: ProgramOp, max_instances: int = MAX_TASK_INSTANCES) -> list[Diagnostic]:
    """HAZ-01 / HAZ-03 (LOOP-06) diagnostics of a verified program."""
    with _no_cyclic_gc():
        return HazardFinder(program, max_instances).run()


# --------------------------------------------------------------------------
# tokens
# --------------------------------------------------------------------------

def max_live_tokens(program: ProgramOp) -> int:
    """The maximum number of simultaneously live synchronization tokens (DEV-17).

    A token is *live* from the issue of the task that produces it until the
    last statement that consumes it (a `deps` entry or a `wait`) has been
    issued -- after that the sequencer no longer needs to track it; a token
    nobody consumes stays live until the end of its block (the program's end,
    or the end of its loop iteration).  A `.sync` task's token is live only at
    its own statement.  A loop statement contributes the maximum live count of
    its body times the number of iterations that may be in flight
    (min(N, trip count) for `@max_in_flight(N)`), on top of the enclosing
    block's tokens live across the loop (decision D-TOK-LIVE).  This is an
    upper bound over every schedule the program allows.
    """
    return live_token_peak(program)[0]


def live_token_peak(program: ProgramOp) -> tuple[int, Operation | None]:
    """`max_live_tokens` and the statement (task or loop) where the peak is
    reached, so a DEV-17 diagnostic can point at it."""
    with _no_cyclic_gc():
        return _block_live(program.block, Evaluator())


@dataclass
class BlockLiveness:
    """Token liveness in one block (D-TOK-LIVE): the statements, the live
    interval `[first, last]` (statement indices) of each task's token, and
    what each loop statement adds (its body's peak times the iterations in
    flight)."""

    ops: list[Operation]
    intervals: dict[TaskOp, tuple[int, int]]
    nested: list[int]

    def counts(self) -> list[int]:
        """Live tokens at each statement (this block's and its loops')."""
        n = len(self.ops)
        delta = [0] * (n + 2)
        for first, last in self.intervals.values():
            delta[first] += 1
            delta[last + 1] -= 1
        out, live = [], 0
        for k in range(n):
            live += delta[k]
            out.append(live + self.nested[k])
        return out

    def peak(self) -> tuple[int, Operation | None]:
        best, where = 0, None
        for k, c in enumerate(self.counts()):
            if c > best:
                best, where = c, self.ops[k]
        return best, where


def block_liveness(block: Block, ev: Evaluator | None = None) -> BlockLiveness:
    """The liveness of `block`'s tokens (D-TOK-LIVE); loop bodies count
    through their peak."""
    ev = ev or Evaluator()
    ops = list(block.ops)
    idx = {op: k for k, op in enumerate(ops)}
    n = len(ops)
    nested = [0] * n
    intervals: dict[TaskOp, tuple[int, int]] = {}
    for k, op in enumerate(ops):
        if isinstance(op, LoopOp):
            body, _ = _block_live(op.block, ev)
            try:
                lo, hi = ev.static(op.lower), ev.static(op.upper)
            except ExprError:
                lo = hi = None
            trip = hi - lo + 1 if lo is not None and hi is not None else None
            copies = 0 if trip is not None and trip <= 0 else loop_window(max_in_flight(op), trip)
            nested[k] = body * copies
        if not isinstance(op, TaskOp):
            continue
        if op.is_sync:
            last = k
        else:
            last = n  # unconsumed: until the end of the block
            uses = [idx.get(_ancestor_in(u.operation, block)) for u in op.results[0].uses]
            uses = [u for u in uses if u is not None]
            if uses:
                last = max(uses)
        intervals[op] = (k, last)
    return BlockLiveness(ops, intervals, nested)


def _block_live(block: Block, ev: Evaluator) -> tuple[int, Operation | None]:
    return block_liveness(block, ev).peak()


def _ancestor_in(op: Operation, block: Block) -> Operation | None:
    while op is not None and op.parent_block() is not block:
        op = op.parent_op()
    return op


def check_tokens(program: ProgramOp) -> list[Diagnostic]:
    """Token diagnostics: unconsumed tokens (warning, D-TOK-UNUSED), waits that
    can never complete (error, D-TOK-DEADLOCK).  `@max_in_flight(N < 1)` is the
    static verifier's LOOP-03 (`semantics.window_error`)."""
    with _no_cyclic_gc():
        return _check_tokens(program)


def _check_tokens(program: ProgramOp) -> list[Diagnostic]:
    s = Structure(program)
    diags: list[Diagnostic] = []
    maxpos: dict[StaticTask, int] = {}

    def reach(t: StaticTask) -> int:
        """The latest program position among t and everything it depends on."""
        stack = [(t, False)]
        expanded: set[int] = set()  # guards against dependency cycles in hand-written IR
        while stack:
            c, done = stack.pop()
            if c in maxpos:
                continue
            if done:
                maxpos[c] = max([c.pos] + [maxpos.get(d, d.pos) for d in c.deps])
                continue
            if id(c) in expanded:
                continue
            expanded.add(id(c))
            stack.append((c, True))
            stack.extend((d, False) for d in c.deps if d not in maxpos)
        return maxpos[t]

    for op in s.order:
        if isinstance(op, TaskOp):
            st = s.tasks[op]
            if op.is_sync:
                blockers = [st]
            else:
                blockers = []
                if not op.results[0].uses:
                    diags.append(Diagnostic(
                        "warning", f"the token of {task_label(op)} is never consumed: no deps "
                        "or wait refers to it", SourceLoc.of(op), "TASK-01",
                        (f"wait({op.token_name()}) before it matters, or use the .sync form"
                         if op.token_name() else "name the token and wait for it, or use .sync")
                        + " (decision D-TOK-UNUSED)"))
            for t in blockers:
                if reach(t) > s.pos[op]:
                    diags.append(_deadlock(s, op, t))
        elif isinstance(op, WaitOp):
            for v in op.tokens:
                t = s.producer(v)
                if t is not None and reach(t) > s.pos[op]:
                    diags.append(_deadlock(s, op, t))
    return diags


def _deadlock(s: Structure, op: Operation, t: StaticTask) -> Diagnostic:
    late = max((c for c in _closure(t)), key=lambda c: c.pos)
    what = "waits for" if isinstance(op, WaitOp) else "is .sync and needs"
    return Diagnostic(
        "error", f"deadlock: this {'wait' if isinstance(op, WaitOp) else 'task'} {what} "
        f"{task_label(t.op)}, which can only become ready after {task_label(late.op)}, "
        "a task issued after this statement", SourceLoc.of(op), "TASK-03",
        "a wait blocks the statements after it: produce every awaited token, and "
        "everything it depends on, before the wait (decision D-TOK-DEADLOCK)",
        [Diagnostic("note", f"{task_label(late.op)} is issued here", SourceLoc.of(late.op))])


def _closure(t: StaticTask) -> Iterator[StaticTask]:
    seen: set[int] = set()
    stack = [t]
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        yield c
        stack.extend(c.deps)
