"""The happens-before model of NEM programs: which task instances are ordered.

The model shared by the hazard analysis (`nem.analysis.hazard_finder`,
`nem-check-hazards`), token liveness (`nem.analysis.token_liveness`,
`nem-check-tokens`, DEV-17) and `nem-synthesize-deps`.  Semantics are
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
iteration ordinals) costs O(loop depth).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import DenseArrayBase
from xdsl.ir import Block, Operation, SSAValue

from nem.analysis.ir_walk import block_ops
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.ops import ComputeOp, LoopOp, ProgramOp, RegionOp, TaskOp, WaitOp
from nem.dialect.per_class import first_base_table
from nem.dialect.semantics.streams import (
    complete_at_loop_end,
    complete_at_loop_end_set,
    window_orders,
    window_orders_set,
)

if TYPE_CHECKING:
    import islpy as isl

    from nem.analysis.presburger import InstanceSpace

# --------------------------------------------------------------------------
# static structure
# --------------------------------------------------------------------------


def enclosing_loops(op: Operation) -> tuple[LoopOp, ...]:
    """The loops holding `op`, outermost first."""
    out = []
    p = op.parent_op()
    while p is not None and not isinstance(p, ProgramOp):
        if isinstance(p, LoopOp):
            out.append(p)
        p = p.parent_op()
    return tuple(reversed(out))


def task_label(op: Operation) -> str:
    """How diagnostics name a task: `tB (transfer.async)` or `an unnamed gemm.async`."""
    kind = _kind(op)
    name = op.token_name() if isinstance(op, TaskOp) else None
    return f"{name} ({kind})" if name else f"an unnamed {kind}"


def _kind(op: Operation) -> str:
    base = (
        getattr(op, "KEYWORD", None) or getattr(op, "opcode", None) or op.name.removeprefix("nem.")
    )
    sync = isinstance(op, TaskOp) and op.is_sync
    return f"{base}.{'sync' if sync else 'async'}"


def task_operands(op: TaskOp) -> tuple[list[SSAValue], list[SSAValue], tuple[SSAValue, ...]]:
    """(read regions, written regions, dep tokens) of a task.

    Same as `operand_regions()` / `dep_values()`, read straight from the
    operand tuple: xDSL's segment-aware getters dominate the cost of the
    analysis on large programs otherwise."""
    vals = tuple(op.operands)  # then sliced by C (SSAValues' slicing is Python)
    if isinstance(op, ComputeOp):
        sizes = op.properties["operandSegmentSizes"]
        assert isinstance(sizes, DenseArrayBase)
        ni, no, nd = (int(x) for x in sizes.get_values()[:3])
        return list(vals[:ni]), list(vals[ni : ni + no]), tuple(vals[ni + no : ni + no + nd])
    # transfer / store: dst, src, deps...
    return [vals[1]], [vals[0]], tuple(vals[2:])


def region_parts(rop: RegionOp) -> tuple[SSAValue, SSAValue, SSAValue]:
    """(buffer, offset, extent) of a region op (its first three operands)."""
    vals = tuple(rop.operands)  # then indexed by C (SSAValues' indexing is Python)
    return vals[0], vals[1], vals[2]


_OTHER, _TASK, _LOOP, _WAIT = 1, 2, 3, 4
_KINDS = first_base_table(((TaskOp, _TASK), (LoopOp, _LOOP), (WaitOp, _WAIT)), _OTHER)
"""Op class -> what `Structure` does with its ops: an isinstance test per op
and kind was a sixth of building it on a lowered program (its index
constants and region ops are nine in ten of its ops, issue 30)."""


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


@dataclass
class Skeleton:
    """The statements `Structure` reads (tasks, loops, waits) of each block,
    with their positions, as of one build: while only deps, windows and the
    waits ending blocks change (the rounds of `nem-synthesize-deps`, which
    keeps it in its `RaceCache`), the next build replays it instead of
    listing every op of the program again (nine in ten are the regions'
    index constants: 0.3 to 0.4 s a build on DenseNet-121, six builds,
    issue 30)."""

    blocks: dict[Block, list[tuple[Operation, int, int, int]]] = field(default_factory=dict)
    """Per block, its statements' (op, kind, index in the block, position in
    the program not counting the blocks' trailing waits), up to its trailing waits."""
    deps_at: dict[Operation, tuple[int, int]] = field(default_factory=dict)
    """Per task, where its deps are among its operands: (first, operands
    after them); the other operand segments do not change (`TaskOp.set_deps`)."""
    ends: dict[Block, tuple[int, int]] = field(default_factory=dict)
    """Per block, (statements before its trailing waits, ops of the program
    before them, not counting trailing waits)."""


class Structure:
    """Static facts of one program: tasks, barriers, covers, loop parents.

    `order`, `pos` and `index` hold the tasks, loops and waits only (what
    the model reads); positions are those among all ops.  With `skeleton`
    (an earlier build's, `Skeleton`), the program is assumed changed since
    only in deps, windows and the waits that end its blocks: those are
    read again, the rest replayed."""

    def __init__(self, program: ProgramOp, skeleton: Skeleton | None = None):
        self.program = program
        self.tasks: dict[Operation, StaticTask] = {}
        self.order: list[Operation] = []
        self.pos: dict[Operation, int] = {}
        self.parent_loop: dict[Block, LoopOp | None] = {program.block: None}
        self.index: dict[Operation, int] = {}
        self._ev = Evaluator()
        self._completes: dict[LoopOp, bool] = {}
        self.window: dict[int, int] = {}
        """id(loop) -> its @max_in_flight N, read per pair of instances by `ordered`
        (parsing the decorators there was a fifth of a large analysis)."""
        self.skeleton = skeleton or Skeleton()
        self._replay = skeleton is not None
        self._static = 0  # ops before, not counting trailing waits (a first build)
        self._tails = 0  # trailing waits before
        self._collect(program.block, ())
        self._covers()
        self._reach: dict[StaticTask, int] | None = None
        """Per task, which of the `reach_window` tasks issued just before it
        its token transitively depends on (a bit set; see `dep_reaches`)."""
        self._rank: dict[StaticTask, int] = {}
        """Per task, its ordinal among the tasks in program order."""

    def _collect(self, block: Block, loops: tuple[LoopOp, ...]) -> None:
        mine: list[StaticTask] = []
        tail: list[Operation] = []
        if self._replay:
            for op, kind, k, p in self.skeleton.blocks[block]:
                self._enter(op, kind, k, p, block, loops, mine)
            last = block.last_op
            while last is not None and _KINDS[type(last)] == _WAIT:
                tail.append(last)
                last = last.prev_op
            tail.reverse()
        else:
            ops = block_ops(block)
            m = len(ops)
            while m and _KINDS[type(ops[m - 1])] == _WAIT:
                m -= 1
            entries = self.skeleton.blocks[block] = []
            for k in range(m):
                op = ops[k]
                p = self._static
                self._static += 1
                kind = _KINDS[type(op)]
                if kind != _OTHER:
                    entries.append((op, kind, k, p))
                    self._enter(op, kind, k, p, block, loops, mine)
            self.skeleton.ends[block] = (m, self._static)
            tail = ops[m:]
        n, before = self.skeleton.ends[block]
        for j, op in enumerate(tail):  # the trailing waits: read from the program
            self.index[op] = n + j
            self.pos[op] = before + self._tails
            self._tails += 1
            self.order.append(op)
        tasks, at = self.tasks, self.skeleton.deps_at
        for st in mine:
            vals = tuple(st.op.operands)
            deps: Sequence[SSAValue]
            if self._replay:
                start, rest = at[st.op]
                deps = vals[start : len(vals) - rest]
            else:
                reads, writes, deps = task_operands(st.op)
                start = len(reads) + len(writes)
                at[st.op] = (start, len(vals) - start - len(deps))
            st.deps = [
                tasks[v.owner] for v in deps if isinstance(v.owner, TaskOp) and v.owner in tasks
            ]

    def _enter(
        self,
        op: Operation,
        kind: int,
        k: int,
        p: int,
        block: Block,
        loops: tuple[LoopOp, ...],
        mine: list[StaticTask],
    ) -> None:
        """Statement `op` (`kind`) at index `k` of `block`, `p` ops before it
        not counting trailing waits."""
        self.index[op] = k
        p = self.pos[op] = p + self._tails
        self.order.append(op)
        if kind == _TASK:
            st = self.tasks[op] = StaticTask(op, block, k, p, loops)  # type: ignore[arg-type]
            mine.append(st)
        elif kind == _LOOP:
            assert isinstance(op, LoopOp)
            self.parent_loop[op.block] = op
            self.window[id(op)] = op.max_in_flight()
            self._collect(op.block, loops + (op,))

    def producer(self, token: SSAValue) -> StaticTask | None:
        owner = token.owner
        return self.tasks.get(owner) if isinstance(owner, Operation) else None

    def covered_before(self, producer: StaticTask, task: Operation) -> bool:
        """Whether a barrier covering `producer` (`cover`: a wait or `.sync`
        task, or a loop statement whose body holds one) is issued before
        `task`, in `task`'s block or an enclosing one up to `producer`'s:
        `producer` has then completed whenever `task` is issued
        (D-HAZ-ORDER), so a dep of `task` on it orders nothing more."""
        cur: Operation | None = task
        while cur is not None:
            block = cur.parent_block()
            if block is None:
                return False
            cover = producer.cover.get(block)
            if cover is not None and cover < self.index[cur]:
                return True
            if block is producer.block:
                return False
            cur = block.parent_op()
        return False

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
            parent = loop.parent_block()
            assert parent is not None
            block, index = parent, self.index[loop]

    def _covers(self) -> None:
        """Fill `cover` (barriers) and `used_in` (loop bodies ordered after a task)."""
        for op in self.order:
            kind = _KINDS[type(op)]
            if kind == _WAIT:
                assert isinstance(op, WaitOp)
                block = op.parent_block()
                assert block is not None
                roots = [t for t in (self.producer(v) for v in op.tokens) if t is not None]
                self._mark_cover(roots, block, self.index[op])
            elif kind == _TASK:
                st = self.tasks[op]
                if st.op.is_sync:
                    self._mark_cover([st], st.block, st.index)
                if st.loops:
                    self._mark_used(st.deps, st.block)

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
                loop = self.parent_loop[blk]
                assert loop is not None
                completes = completes or self._some_iteration_completes(loop)
            stack.extend(c.deps)

    def _some_iteration_completes(self, loop: LoopOp) -> bool:
        hit = self._completes.get(loop)
        if hit is None:
            try:
                lo, hi = self._ev.static(loop.lower), self._ev.static(loop.upper)
            except ExprError:
                lo = hi = None
            hit = (
                lo is not None
                and hi is not None
                and complete_at_loop_end(0, hi - lo + 1, loop.max_in_flight())
            )
            self._completes[loop] = hit
        return hit

    reach_window = 1024
    """How many of the tasks issued just before a task `dep_reaches` keeps
    the answer for, per task (bits)."""

    def _build_reach(self) -> dict[StaticTask, int]:
        """Bit `i` of `_reach[t]`: the task of rank `rank(t) - 1 - i` reaches
        `t` through deps, for `i < reach_window`.  Built in program order (a
        task's deps are issued before it); within the window it is exact: a
        dep `d` of `t` is later than `t`'s window start, so `d`'s own window
        covers what `t` needs of it."""
        rank = self._rank
        reach: dict[StaticTask, int] = {}
        w = self.reach_window
        mask = (1 << w) - 1
        for op in self.order:
            t = self.tasks.get(op)
            if t is None:
                continue
            k = len(rank)
            r = 0
            for d in t.deps:
                kd = rank.get(d)  # None: a forward (invalid) dep, it orders nothing here
                if kd is not None and k - kd <= w:
                    r |= ((reach[d] << 1) | 1) << (k - kd - 1)
            reach[t] = r & mask
            rank[t] = k
        self._reach = reach
        return reach

    def reached_deps(self, task: StaticTask) -> set[StaticTask]:
        """The deps of `task` that another of its deps reaches through deps
        (`dep_reaches`), among the `reach_window` tasks issued just before
        `task` (a farther dep is not reported): the union of its deps'
        windows, each shifted to `task`'s (bit `i`: the task of rank
        `rank(task) - 1 - i` reaches one of them), and one bit test per dep.
        O(deps) big-integer operations per task, no search."""
        reach = self._reach if self._reach is not None else self._build_reach()
        rank, w = self._rank, self.reach_window
        k = rank[task]
        near = [(d, rank[d]) for d in task.deps if 0 < k - rank.get(d, k) <= w]
        union = 0
        for d, kd in near:
            union |= reach[d] << (k - kd)
        return {d for d, kd in near if union >> (k - kd - 1) & 1}

    def dep_reaches(self, a: StaticTask, b: StaticTask) -> bool:
        """A's token reaches B through deps (transitively).  Within B's window
        (A among the `reach_window` tasks issued just before B) one bit test;
        farther, a backward search from B through deps that stops at tasks
        issued before A (they cannot reach A) and answers by a bit test at
        the first task whose window holds A.  Memory: `reach_window` bits per
        task, where a bit set of every earlier task grew quadratically with a
        chain of tasks (issue 30)."""
        reach = self._reach if self._reach is not None else self._build_reach()
        rank, w = self._rank, self.reach_window
        ka = rank[a]
        gap = rank[b] - ka
        if gap <= 0:
            return False
        if gap <= w:
            return bool(reach[b] >> (gap - 1) & 1)
        seen = {b}
        stack = [b]
        while stack:
            x = stack.pop()
            kx = rank[x]
            for d in x.deps:
                kd = rank[d]
                if kd >= kx or kd < ka:
                    continue  # a forward dep orders nothing; one before A cannot reach it
                if kd == ka:
                    return True
                if kd - ka <= w:
                    if reach[d] >> (kd - ka - 1) & 1:
                        return True
                elif d not in seen:
                    seen.add(d)
                    stack.append(d)
        return False


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
        return Order(window_orders(d, s.window[id(la[k])]), la[k], d)
    if len(la) > k:
        # a is inside loop statement la[k] of the common block; b follows it
        if a.task.block in a.task.cover:
            return Order(True)
        for m in range(len(la) - 1, k - 1, -1):
            if complete_at_loop_end(a.ords[m], a.trips[m], s.window[id(la[m])]):
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
        if window_orders(b.ords[m], s.window[id(lb[m])]) and body in a.task.used_in:
            return Order(True)
    return Order(False)


def issue_key(s: Structure, inst: Instance) -> tuple[int, ...]:
    """Where `inst` is issued in the program's sequential order: per enclosing
    loop, the loop statement's index in its block then the iteration ordinal,
    then the task's index; tuples compare in issue order."""
    key: list[int] = []
    for lp, o in zip(inst.task.loops, inst.ords):
        key += (s.index[lp], o)
    key.append(inst.task.index)
    return tuple(key)


def issued_before(s: Structure, a: Instance, b: Instance) -> bool:
    """Is instance `a` issued before instance `b`?"""
    return issue_key(s, a) < issue_key(s, b)


# --------------------------------------------------------------------------
# the same facts over sets of instances (D-HAZ-SYMBOLIC)
# --------------------------------------------------------------------------


def common_loops(a: StaticTask, b: StaticTask) -> int:
    """Number of loops enclosing both tasks."""
    c = 0
    while c < len(a.loops) and c < len(b.loops) and a.loops[c] is b.loops[c]:
        c += 1
    return c


def _same_iteration_facts(
    s: Structure, a: StaticTask, b: StaticTask
) -> bool | list[tuple[str, int]]:
    """What `ordered` decides for instances of `a` and `b` in the same
    iteration of every common loop, `a` issued first: True (always ordered)
    or the conditions of which any one orders them: ("end", m) when a's
    iteration of its loop m is complete at endloop, ("window", m) when b's
    ordinal in its loop m is >= N (an iteration of that body, which is ordered
    after `a`, completed)."""
    c = common_loops(a, b)
    la, lb = a.loops, b.loops
    if len(la) > c:
        if a.block in a.cover:
            return True
        return [("end", m) for m in range(c, len(la))]
    cover = a.cover
    idx = s.index[lb[c]] if len(lb) > c else b.index
    hit = cover.get(a.block)
    if (hit is not None and hit < idx) or s.dep_reaches(a, b):
        return True
    out = []
    for m in range(c, len(lb)):
        body = lb[m].block
        idx = s.index[lb[m + 1]] if m + 1 < len(lb) else b.index
        hit = cover.get(body)
        if hit is not None and hit < idx:
            return True
        if body in a.used_in:
            out.append(("window", m))
    return out


PairFacts = tuple[tuple[int, ...], "bool | tuple[tuple[str, int], ...] | None"]
"""(windows of the common loops, `_same_iteration_facts` or None when `a` is
not issued before `b` within an iteration): all the structure says of a
pair of tasks, what the ordering sets are built from."""


def pair_facts(s: Structure, a: StaticTask, b: StaticTask) -> PairFacts:
    c = common_loops(a, b)
    wins = tuple(s.window[id(lp)] for lp in a.loops[:c])
    if a.pos >= b.pos:
        return wins, None
    same = _same_iteration_facts(s, a, b)
    return wins, same if isinstance(same, bool) else tuple(same)


def ordered_always(
    s: Structure, a: StaticTask, b: StaticTask, facts: PairFacts | None = None
) -> bool:
    """Does `ordered` hold for every pair of instances of `a` and `b`, `a`'s
    issued first?  (No loop window lets two iterations overlap, and the
    same-iteration case is ordered by the structure alone.)"""
    wins, same = facts or pair_facts(s, a, b)
    return all(window_orders(1, n) for n in wins) and (same is None or same is True)


def issued_before_set(
    s: Structure,
    a: StaticTask,
    oa: Sequence[isl.PwAff],
    b: StaticTask,
    ob: Sequence[isl.PwAff],
    sp: InstanceSpace,
) -> isl.Set:
    """Symbolic twin of `issued_before`: the ordinal vectors (`oa` of `a`,
    `ob` of `b`) where a's instance is issued first."""
    c = common_loops(a, b)

    def build() -> isl.Set:
        out = sp.equal(oa, ob, c) if a.pos < b.pos else sp.empty
        for k in range(c):
            out = out | (sp.equal(oa, ob, k) & (ob[k] - oa[k]).pos_set())
        return out

    # it depends on the loops' nesting only: one set per shape of a space
    return sp.memo(("issued", tuple(map(id, oa)), tuple(map(id, ob)), c, a.pos < b.pos), build)


def ordered_set(
    s: Structure,
    a: StaticTask,
    oa: Sequence[isl.PwAff],
    ta: Sequence[isl.PwAff],
    b: StaticTask,
    ob: Sequence[isl.PwAff],
    sp: InstanceSpace,
) -> isl.Set:
    """Symbolic twin of `ordered`: where it says a's instance (ordinals `oa`,
    trip counts `ta` of its loops) is complete before b's (`ob`) starts,
    among the pairs issued a first."""
    c = common_loops(a, b)
    wins = tuple(s.window[id(lp)] for lp in a.loops[:c])
    facts = _same_iteration_facts(s, a, b) if a.pos < b.pos else False

    def build() -> isl.Set:
        out = sp.empty
        for k in range(c):
            d = ob[k] - oa[k]
            out = out | (sp.equal(oa, ob, k) & window_orders_set(d, wins[k]))
        if facts is False:
            return out
        same = sp.equal(oa, ob, c)
        if facts is True:
            return out | same
        for kind, m in facts:
            if kind == "end":
                out = out | (
                    same & complete_at_loop_end_set(oa[m], ta[m], s.window[id(a.loops[m])])
                )
            else:
                out = out | (same & window_orders_set(ob[m], s.window[id(b.loops[m])]))
        return out

    if not isinstance(facts, bool) and any(kind == "end" for kind, _ in facts):
        return build()  # a's trip counts: a's own
    # else what it depends on: the loops' nesting and windows, the structure's facts
    key = (
        "ordered",
        tuple(map(id, oa)),
        tuple(map(id, ob)),
        wins,
        facts
        if isinstance(facts, bool)
        else tuple((m, s.window[id(b.loops[m])]) for _, m in facts),
    )
    return sp.memo(key, build)


def unordered_pieces(
    s: Structure,
    a: StaticTask,
    oa: Sequence[isl.PwAff],
    ta: Sequence[isl.PwAff],
    b: StaticTask,
    ob: Sequence[isl.PwAff],
    sp: InstanceSpace,
) -> list[isl.Set]:
    """`issued_before_set` minus `ordered_set`, as conjunctions (one per loop
    where two iterations can overlap, one for the same iteration of every
    common loop): what the hazard analysis intersects with a conflict, each
    piece a cheap query (a union with a difference is not)."""
    c = common_loops(a, b)
    out = []
    for k in range(c):
        n = s.window[id(a.loops[k])]
        if window_orders(1, n):
            continue  # a window of 1: every later iteration is ordered
        d = ob[k] - oa[k]
        out.append(
            sp.memo(
                ("overlap", tuple(map(id, oa)), tuple(map(id, ob)), k, n),
                lambda: (
                    sp.equal(oa, ob, k)
                    & d.pos_set()
                    & sp.universe.subtract(window_orders_set(d, n))
                ),
            )
        )
    facts = _same_iteration_facts(s, a, b) if a.pos < b.pos else True
    if isinstance(facts, bool):
        return out
    piece = sp.equal(oa, ob, c)
    for kind, m in facts:
        if kind == "end":
            done = complete_at_loop_end_set(oa[m], ta[m], s.window[id(a.loops[m])])
        else:
            done = window_orders_set(ob[m], s.window[id(b.loops[m])])
        piece = piece & sp.universe.subtract(done)
    out.append(piece)
    return out
