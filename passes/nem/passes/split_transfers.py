"""`nem-split-transfers`: a large transfer between L1 and a slower memory
becomes one transfer per DMA of its engine, each a slice of the box, and
one between DDR/L2 regions one per sDMA of the device
(decision D-NEM-SPLIT-TRANSFERS).

The lowering makes each staged tile one `transfer`, which the sequencer
gives one DMA of its engine while the others idle (the timed model puts a
ready task on its least busy candidate unit).  Here, on the ordered
program (after `nem-synthesize-deps` and `nem-share-buffers`, whose
analyses so run on one task per copy), such a transfer spanning at least
`min-bytes` (the bytes from its first element to its last on the wider
side: a size measure of the box, not its cost, D-RT-COST), and at least `min-moved` over
all its runs (times its loops' trip counts), or `min-once` on each run (in a
loop or not: such a copy costs its DMA as long as one made once, and there
are few), or in no loop `min-single` (a small layer's weights staged once
before its tile loop), or in loops run at most `few-runs` times in all
`min-few` (a small layer's row tiles, each copy on one DMA of four while
the others idled; made once, in no loop, too, where `min-few` is the
smaller: `split_rule.least_span`), becomes k transfers of
disjoint slices along the outermost dimension larger than 1 (k = min(DMAs
per engine, that dimension, span / `min-piece`), `even_parts`; a dimension
shorter than the DMAs first merged with the contiguous ones inside it,
`merge_rows`), each with the original's deps:

    t = transfer.async(dst=region(L1_0, o, 36864) elem=f32, shape=[3, 3, 32, 32], layout=NHWC,
                       src=region(w, 0, 36864) elem=f32, ..., deps=[a])
    ... deps=[t] ...          wait(t)
  ==>
    t_1 = transfer.async(dst=region(L1_0, o, 12288) elem=f32, shape=[1, 3, 32, 32], ..., deps=[a])
    t_2 = ...(o + 12288 ...)  t_3 = ...(o + 24576 ...)
    ... deps=[t_1, t_2, t_3] ...     wait(t_1, t_2, t_3)

Every consumer of the original token (a task's `deps`, a `wait`; tokens
are scoped to their block and its nested loop bodies, D-NAME-SCOPE, so
these are all its uses) takes the k tokens instead: what happened after
the transfer now happens after all its slices, and each slice starts after
what the transfer started after.  A slice moves a subset of the
transfer's elements (element i onto element i, D-SEM-TRANSFER), so every
ordering the analyses made for the transfer holds for each slice, and the
slices' destination byte ranges are disjoint (the outermost dimension's
stride is past the span of the dimensions inside it) and no slice writes
what another reads, so no two slices conflict: the result is the same bytes, and `nem-verify` (run on the
final program) checks it independently.

A `.sync` transfer becomes async slices followed by one `wait` on them
all: the stream blocks until every slice is done, as it blocked on the
transfer.  The lowering's copies between DDR buffers (a padded copy of a
convolution's input) are such statements, run by one sDMA while the
others idled; they are split from `min-bytes` on (a few per program).
A copy between L1 regions is one more of an engine's DMA copies (a stem's
input rows turned from NCHW to NHWC in L1: 4,708 cycles on one DMA in
ResNet-50's n0) and splits as those do, when its two sides share no byte
(`_apart`: a slice must not read what another writes).  A transfer stays
whole where this does not hold or does not pay: untyped or quantized
regions, shapes that differ or depend on a loop variable, destination
slices whose byte ranges would overlap (a transposed view: their writes
would conflict; source slices may interleave, they are only read), a token
used by anything but `deps` or `wait`.  The split adds live tokens (k instead of one, over the
original token's live interval, D-TOK-LIVE), and the program must stay
within the device's `SEQ.max_active_tokens` (DEV-17): `choose_splits`
budgets them, loop bodies first (they run many times; the program's own
transfers moving `min-once`, made once, hold their slices' tokens at each
loop they are live across first: a store a later block reads), then each block's
transfers share the tokens left, one slice at a time to the one whose
slices are the largest (`share`: fewer slices than the DMAs, or none), those
made once that split only from `min-few` last.
Before a block is budgeted, the tokens of compute tasks a loop of the block
consumes that one earlier compute task joins (a convolution's two NMU bands,
its bias add) are replaced by the join's in the loop's body (`join_held`,
session 42b), and its transfers whose tokens a loop of the
block consumes are waited for right before that loop (`retire_held`: all
of them by default, a layer's weights too, session 56): held, each counted
at every statement of the loop (D-TOK-LIVE), a padded input's border fills
took the slices of its consumer's tile copies and a layer's weights those
of the other engine parts' weights; those
under `min-piece` that two or more of its statements consume, right before
the first (`retire_shared`: the border strips that every engine part of a
convolution loads, held from the first part's load to the last); and after
the tokens are shared out, those the split left at the limit beside a copy
it left whole, where the wait holds back no copy behind it by the static
estimate of when tasks end (`retire_crowded`, `stalls`), the block then
shared again.  In the program's own block, after the retire rules and
before the sharing, a transfer's deps that another of its deps reaches
through deps are dropped (`drop_reached_deps`, session 43: the same
happens-before relation, the tokens dying at their earlier uses; a
layer's input loads named the earlier layer's stores that a later store
they name follows, 4 of 32 tokens held across a MaxPool whose engine 0
copies then ran whole); and after the sharing there, a store it left
whole is waited for where the static estimate has it done, dropped from
its consumers after the wait, and the block shared again (`retire_done`,
session 44: a store into a concatenation a later block reads, held across
the block); before that, the small transfers first consumed after a copy
the sharing left short, right before that copy (`retire_across_short`,
session 58: border strips held to the wait before a tile loop).  Slices
are not split again (`split_already`), and `retire_shared` asks the
counts before the split (`unsplit_counts`) and takes no wait the retire
rules added for a stretch of the stream (`stops_stream`): run on its own
output, the pass changes nothing on the tests' programs; on a compiled
model's, the waits it added cover more deps (`drop_covered_loop_deps`)
and free tokens for copies it left whole, which a second run splits
(session 41).  That choice is an analysis of its own (`choose_splits`);
the rewrite (`SplitTransfer`, applied by xDSL's walker to the blocks
holding a chosen transfer) only carries it out.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from itertools import count

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from nem.analysis.range_max import MaxTree
from nem.analysis.token_liveness import BlockLiveness, block_liveness, loop_copies
from nem.dialect.attributes import BITWIDTH, DYNAMIC, RegionType
from nem.dialect.builder import NemBuilder, Sym
from nem.dialect.builder_exprs import Expr
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.gc_pause import gc_paused
from nem.dialect.ops import (
    COMPUTE_OPS,
    LoopOp,
    ProgramOp,
    RegionOp,
    StoreOp,
    TransferOp,
    WaitOp,
    programs,
)
from nem.dialect.semantics.cost import UnitChars
from nem.passes.covered_deps import drop_covered_loop_deps, drop_reached_deps
from nem.passes.finish_times import FinishTimes
from nem.passes.forward_fills import declared_names
from nem.passes.split_retire import (
    join_held,
    join_named,
    moved_bytes,
    retire_across_short,
    retire_crowded,
    retire_done,
    retire_held,
    retire_shared,
    retoken,
    split_already,
    stalls,
    unsplit_counts,
)
from nem.passes.split_rule import (
    FEW_RUNS,
    MIN_BYTES,
    MIN_FEW,
    MIN_MOVED,
    MIN_ONCE,
    MIN_PIECE,
    MIN_SINGLE,
    RETIRE_BELOW,
    even_parts,
    least_span,
    slice_count,
)


def _elem_strides(t: RegionType, shape: Sequence[int]) -> tuple[int, ...] | None:
    """The element strides of a typed region: explicit, else row-major
    (a layout names dimensions, not an order, D-LAYOUT, D-SEM-TRANSFER)."""
    given = t.stride_values
    if given is not None:
        return None if DYNAMIC in given else given
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


@dataclass(frozen=True)
class Plan:
    """How one transfer splits: along `dim`, in `parts` (start, count), with
    the element strides of each side and the element's bytes."""

    dim: int
    parts: list[tuple[int, int]]
    strides: tuple[tuple[int, ...], tuple[int, ...]]  # dst's, src's
    elem_bytes: int
    shape: tuple[int, ...]
    """The box the slices are cut from: the transfer's, or with the
    dimensions from `dim` on merged into one where that gives the DMAs rows
    enough (`merge_rows`); `strides` are this box's."""


Found = tuple[TransferOp, tuple[int, int], Plan]
"""A transfer of a block that splits, its token's live interval there and its plan."""


def touches_l1(op: TransferOp) -> bool | None:
    """Whether a transfer moves between L1 and a slower memory (True: its
    engine's DMAs), or between DDR/L2 regions (False: the device's sDMAs,
    D-RT-STORE); None for an L1-to-L1 copy or untyped operands."""
    dt, st = op.dst.type, op.src.type
    if not (isinstance(dt, RegionType) and isinstance(st, RegionType)):
        return None
    l1 = (dt.level.kind == "L1", st.level.kind == "L1")
    return None if all(l1) else any(l1)


def stores(op: TransferOp) -> bool:
    """Whether a transfer moves from L1 to a slower memory (a layer's store)."""
    dt = op.dst.type
    return bool(touches_l1(op)) and isinstance(dt, RegionType) and dt.level.kind != "L1"


def _literal(region: SSAValue, what: str) -> int | None:
    """The value of a region's `offset` or `extent` when it is a literal."""
    rop = region.owner
    v = getattr(rop, what).owner if isinstance(rop, RegionOp) else None
    if isinstance(v, arith.ConstantOp) and isinstance(v.value, IntegerAttr):
        return v.value.value.data
    return None


def _apart(op: TransferOp) -> bool:
    """Whether a transfer's two sides share no byte of one buffer (its slices
    then read nothing another slice writes): different buffers, or literal
    byte ranges of one buffer that do not meet (an L1-to-L1 copy within an
    engine's arena)."""
    d, s = op.dst.owner, op.src.owner
    if not (isinstance(d, RegionOp) and isinstance(s, RegionOp)) or d.buffer != s.buffer:
        return isinstance(d, RegionOp) and isinstance(s, RegionOp)
    ends = [(_literal(r, "offset"), _literal(r, "extent")) for r in (op.dst, op.src)]
    if any(a is None or n is None for a, n in ends):
        return False
    (a, n), (b, m) = ends
    assert a is not None and n is not None and b is not None and m is not None
    return a + n <= b or b + m <= a


def plan_split(op: TransferOp, dmas: int, min_bytes: int, min_piece: int) -> Plan | None:
    """The slices `op` becomes over `dmas` units, or None where it stays
    whole (the module doc)."""
    dt, st = op.dst.type, op.src.type
    if dmas < 2 or not (isinstance(dt, RegionType) and isinstance(st, RegionType)):
        return None
    if touches_l1(op) is None and not _apart(op):
        return None  # an L1-to-L1 copy that may read bytes it writes
    if not (dt.typed and st.typed) or dt.quant_desc or st.quant_desc:
        return None
    shape = dt.shape_values
    bits = BITWIDTH.get(dt.elem_name or "")
    if shape is None or shape != st.shape_values or DYNAMIC in shape:
        return None
    if dt.elem_name != st.elem_name or not bits or bits % 8:
        return None
    eb = bits // 8
    dim = next((d for d, n in enumerate(shape) if n > 1), None)
    if dim is None:
        return None
    ds, ss = _elem_strides(dt, shape), _elem_strides(st, shape)
    if ds is None or ss is None:
        return None
    if shape[dim] < dmas:
        shape, ds, ss = merge_rows(shape, dim, ds, ss)
    span = 0  # the bytes a side spans, from its first element to its last
    for side, strides in enumerate((ds, ss)):
        inner = sum((n - 1) * s for n, s in zip(shape[dim + 1 :], strides[dim + 1 :]))
        if side == 0 and inner + 1 > strides[dim]:
            return None  # the slices' writes would share bytes: keep it whole
        span = max(span, ((shape[dim] - 1) * strides[dim] + inner + 1) * eb)
    k = int(slice_count(span, shape[dim], dmas, min_bytes, min_piece))
    return Plan(dim, even_parts(shape[dim], k), (ds, ss), eb, tuple(shape)) if k >= 2 else None


def merge_rows(
    shape: Sequence[int], dim: int, *strides: tuple[int, ...]
) -> tuple[tuple[int, ...], ...]:
    """`shape` with dimension `dim` and those inside it merged into one for
    as long as every side in `strides` is contiguous across them (each
    dimension's stride the next one's extent times its stride), and those
    strides so merged: a box with fewer rows than the DMAs (a 3x3 kernel's
    `[3, 3, 128, 32]` weights: 3 slices of 49 KB, the fourth DMA idle,
    session 26) is then cut into as many slices as the DMAs, of one size
    (9,216 elements each).  Element i of a merged slice is element i of the
    box it is cut from (row-major on both sides), so each slice moves the
    same elements as before onto the same bytes."""
    end = dim
    while end + 1 < len(shape) and all(s[end] == shape[end + 1] * s[end + 1] for s in strides):
        end += 1
    merged = (*shape[:dim], math.prod(shape[dim : end + 1]), *shape[end + 1 :])
    return (merged, *((*s[:dim], s[end], *s[end + 1 :]) for s in strides))


def _slice(b: NemBuilder, region: SSAValue, plan: Plan, side: int, at: int, m: int) -> SSAValue:
    """The inline region of rows `[at, at + m)` along `plan.dim` of `region`."""
    rop = region.owner
    assert isinstance(rop, RegionOp)
    t = region.type
    assert isinstance(t, RegionType) and t.shape_values is not None
    strides = plan.strides[side]
    shape = list(plan.shape)
    shape[plan.dim] = m
    # a merged box (`merge_rows`) has fewer dimensions than the layout
    # names: its strides say where its elements are
    layout = t.layout_name if len(shape) == len(t.shape_values) else None
    last = sum((n - 1) * s for n, s in zip(shape, strides))
    delta = at * strides[plan.dim] * plan.elem_bytes
    base = rop.offset.owner
    if isinstance(base, arith.ConstantOp) and isinstance(base.value, IntegerAttr):
        offset: Expr | int = base.value.value.data + delta  # a literal stays one
    else:
        offset = Sym(rop.offset) + delta if delta else Sym(rop.offset)
    return b.region(
        None,
        rop.buffer,
        offset,
        (last + 1) * plan.elem_bytes,
        elem=t.elem,
        shape=shape,
        layout=layout,
        strides=list(strides) if t.stride_values is not None or layout is None else None,
        decorators=rop.decorator_list(),
    )


@dataclass
class Choice:
    """Which transfers of a program split and how (`choose_splits`)."""

    dmas: int
    """DMAs per engine (transfers touching L1)."""
    sdmas: int
    """The units of the device's DDR/L2-to-DDR/L2 transfers: its sDMAs, else
    an engine's DMAs (D-RT-STORE)."""
    min_bytes: int
    min_moved: int
    min_once: int
    min_piece: int
    limit: int | None
    min_single: int = MIN_SINGLE
    retire_below: int = RETIRE_BELOW
    few_runs: int = FEW_RUNS
    min_few: int = MIN_FEW
    unit_chars: UnitChars = field(default_factory=dict)
    """The device's unit characteristics, which D-RT-COST's durations read
    (`stalls`' estimate)."""
    plans: dict[TransferOp, Plan] = field(default_factory=dict)
    ev: Evaluator = field(default_factory=Evaluator)

    def block(self, block: Block, budget: int | None, runs: int = 1) -> int:
        """Choose the splits of `block` and its loops so that at most `budget`
        tokens are live at any of its statements (None: no limit), the
        loops' bodies first (they run many times); returns the block's
        peak (D-TOK-LIVE, as `token_liveness.block_liveness` counts it)."""
        live = block_liveness(block, self.ev, bodies=False)
        # the bands a loop holds, as their join's one token (session 42b)
        if budget is not None and join_held(live):
            live = block_liveness(block, self.ev, bodies=False)
        # a transfer a loop consumes, waited for before it (`retire-below`)
        if retire_held(live, self.retire_below):
            live = block_liveness(block, self.ev, bodies=False)
        if retire_shared(
            live, min(self.retire_below, self.min_piece), self.at_limit(block, budget)
        ):
            live = block_liveness(block, self.ev, bodies=False)
        # in the program's own block, after the retire rules: a transfer's
        # bands as their join where another dep ends later (session 43c),
        # then its deps that another of its deps reaches (session 43)
        program = block.parent_op()
        if budget is not None and isinstance(program, ProgramOp):
            tokens = MaxTree(unsplit_counts(block, self.ev))
            if join_named(live, FinishTimes(self.unit_chars, self.ev), tokens, budget):
                live = block_liveness(block, self.ev, bodies=False)
            if drop_reached_deps(program):
                live = block_liveness(block, self.ev, bodies=False)
        counts = live.counts()  # the block's own tokens; its loops' added below
        least = int(
            least_span(
                runs,
                self.min_bytes,
                self.min_moved,
                self.min_once,
                self.min_single,
                self.few_runs,
                self.min_few,
            )
        )
        found = self._found(live, least)
        # the program's own transfers moving `min-once` (made once, live
        # across a loop that does not consume them: the weights a loop reads
        # were waited for above) keep their slices' tokens from its loops;
        # the smaller ones (`min-single`) take what
        # the loops leave, as the loops' own copies of that size do.  Moved,
        # not spanned (session 34): a store into a concatenation's channel
        # slice spans the rows of the wider tensor (SqueezeNet's fire8
        # expand1x1: 344 KB spanned, 43 KB moved) and held 12 tokens of 32
        # across the next layer's tile loop, whose weight copies then ran
        # whole on one DMA
        held = (
            reserved(
                [
                    f
                    for f in found
                    if self._plan(f[0], self.min_once) and moved_bytes(f[0]) >= self.min_once
                ],
                len(counts),
            )
            if runs == 1
            else None
        )
        loops: dict[Operation, int] = {}  # each loop's tokens, as its body is budgeted
        for k, op in enumerate(live.ops):
            if type(op) is LoopOp:
                copies = loop_copies(op, self.ev)
                if copies == 0:
                    continue
                own = counts[k]
                kept = own + (held[k] if held else 0)
                inner = None if budget is None else max(0, budget - kept) // copies
                trips = loop_trips(op, self.ev)
                loops[op] = self.block(op.block, inner, runs * trips) * copies
                counts[k] = own + loops[op]
        if not found:
            return max(counts, default=0)
        tree = MaxTree(counts)
        once = self._once_only(found, runs)
        slices = share(found, tree, budget, once)

        def reshare() -> tuple[BlockLiveness, list[Found], list[int], MaxTree, list[int]]:
            """The block shared again after a rule below added waits (fewer
            tokens at its statements; the loops keep their budgets)."""
            live = block_liveness(block, self.ev, bodies=False)
            found = self._found(live, least)
            counts = [c + loops.get(op, 0) for c, op in zip(live.counts(), live.ops)]
            tree = MaxTree(counts)
            return live, found, counts, tree, share(found, tree, budget, once)

        # the small transfers `retire_shared` left, where the split took the
        # last tokens (session 40)
        if budget is not None and retire_crowded(
            live,
            min(self.retire_below, self.min_piece),
            # the copies the split left whole that their plans would split
            [span for (_, span, plan), k in zip(found, slices) if k == 1 < len(plan.parts)],
            lambda first, last: tree.max(first, last) >= budget,
            self._stalls(live),
        ):
            live, found, counts, tree, slices = reshare()
        # the small transfers live across a copy left short, whose first
        # consumer comes after it (session 58; the program's own block: a
        # wait in a loop body holds the next iteration's copies)
        if (
            budget is not None
            and isinstance(program, ProgramOp)
            and retire_across_short(
                live,
                min(self.retire_below, self.min_piece),
                [(op, span) for (op, span, plan), k in zip(found, slices) if k < len(plan.parts)],
                lambda first, last: tree.max(first, last) >= budget,
                self._stalls(live),
            )
        ):
            live, found, counts, tree, slices = reshare()
        # the copies left whole whose tokens a wait can retire once they are done
        if budget is not None and isinstance(program, ProgramOp):
            left = [
                (op, first, last)
                for (op, (first, last), plan), k in zip(found, slices)
                if k == 1 < len(plan.parts) and stores(op)
            ]
            if retire_done(
                live,
                left,
                lambda first, last: tree.max(first, last) < budget,
                FinishTimes(self.unit_chars, self.ev),
            ):
                live, found, counts, tree, slices = reshare()
        for (op, _, plan), k in zip(found, slices):
            if k >= 2:
                self.plans[op] = replace(plan, parts=even_parts(sum(m for _, m in plan.parts), k))
        return tree.max(0, len(counts) - 1)

    def _found(self, live: BlockLiveness, least: int) -> list[Found]:
        """The block's transfers that split from `least` bytes (not the
        slices of an earlier split), with their live intervals and plans."""
        sliced = split_already(op for op in live.intervals if type(op) is TransferOp)
        return [
            (op, span, plan)
            for op, span in live.intervals.items()
            if type(op) is TransferOp
            and op not in sliced
            and (plan := self._plan(op, least)) is not None
            # a use this pass cannot rewrite: the transfer stays whole
            and all(type(u.operation) in _CONSUMERS for u in op.result.uses)
        ]

    def _once_only(self, found: Sequence[Found], runs: int) -> frozenset[TransferOp]:
        """Those of `found` made once that split only because a copy made
        once splits from `min-few` (`least_span`): they take the tokens
        the others leave (`share`).  Sharing them alike, DenseNet-121's 3x3
        128 -> 32 convolution at 14x14 split its last part's 14 KB layout
        copies and left its third part's 28 KB input copy 3 slices of 4:
        4,187 -> 4,806 cycles (session 49); ranked, 4,166."""
        if runs > 1:
            return frozenset()
        least = int(
            least_span(runs, self.min_bytes, self.min_moved, self.min_once, self.min_single)
        )
        return frozenset(op for op, _, _ in found if self._plan(op, least) is None)

    def _stalls(self, live: BlockLiveness) -> Callable[[TransferOp, int, int], bool]:
        """`stalls` over `live`'s block, the estimate made at the first
        question (most blocks ask none)."""
        made: list[Callable[[TransferOp, int, int], bool]] = []

        def holds(op: TransferOp, first: int, last: int) -> bool:
            if not made:
                times = FinishTimes(self.unit_chars, self.ev)
                made.append(stalls(live, self.min_piece, times))
            return made[0](op, first, last)

        return holds

    def at_limit(self, block: Block, budget: int | None) -> Callable[[int, int], bool]:
        """Whether the block's live tokens, its loops' included, reach
        `budget` at some statement from the first to the last given, the
        slices of an earlier split counted as one (`unsplit_counts`): the
        counts and their `MaxTree` made at the first question (most blocks
        ask none), each question O(log n)."""
        tree: list[MaxTree] = []

        def ask(first: int, last: int) -> bool:
            if budget is None:
                return False
            if not tree:
                tree.append(MaxTree(unsplit_counts(block, self.ev)))
            return tree[0].max(first, last) >= budget

        return ask

    def _plan(self, op: TransferOp, least: int) -> Plan | None:
        """`op`'s slices: over its engine's DMAs from `least` bytes, or, between
        DDR/L2 regions, over the sDMAs from `min-bytes` (a handful of such
        copies per program: their slices cost the analyses little)."""
        if touches_l1(op) is not False:  # L1 on a side: the engine's DMAs
            return plan_split(op, self.dmas, least, self.min_piece)
        return plan_split(op, self.sdmas, self.min_bytes, self.min_piece)


def share(
    found: Sequence[Found],
    tree: MaxTree,
    budget: int | None,
    later: Collection[TransferOp] = frozenset(),
) -> list[int]:
    """How many slices each of `found` gets within `budget` live tokens at
    every statement (`tree`: the block's counts, to which the slices' extra
    tokens are added): one slice at a time to the transfer whose slices are
    the largest (its moved bytes over its slices; ties in program order),
    while each statement of its live interval has a token left, up to its
    plan's slices.  So transfers live at once share the tokens left (an
    engine part's weight copy each, not all slices to the first parts and
    the last copy whole), and a copy much larger than the others (a padded
    input between DDR buffers) is still split first.  Those in `later` get
    slices only once no other can (`Choice._once_only`).  Each step is one
    heap operation and one tree query: O(slices log n)."""
    slices = [1] * len(found)
    heap = [(op in later, -float(moved_bytes(op)), i) for i, (op, _, _) in enumerate(found)]
    heapq.heapify(heap)
    while heap:
        rank, _, i = heapq.heappop(heap)
        op, (first, last), plan = found[i]
        if slices[i] >= len(plan.parts):
            continue
        if budget is not None and tree.max(first, last) >= budget:
            continue  # no token left at some statement of its interval: it stays
        tree.add(first, last, 1)
        slices[i] += 1
        heapq.heappush(heap, (rank, -moved_bytes(op) / slices[i], i))
    return slices


def reserved(found: Sequence[Found], n: int) -> list[int]:
    """The tokens the slices of `found` add at each of a block's `n`
    statements (its extra `k - 1` over its live interval), in one pass of
    prefix sums."""
    diff = [0] * (n + 1)
    for _, (first, last), plan in found:
        diff[first] += len(plan.parts) - 1
        diff[last + 1] -= len(plan.parts) - 1
    out, acc = [], 0
    for d in diff[:n]:
        acc += d
        out.append(acc)
    return out


_CONSUMERS = (*COMPUTE_OPS.values(), TransferOp, StoreOp, WaitOp)
"""The ops that may consume a token: tasks (`deps`) and waits."""


def choose_splits(
    program: ProgramOp,
    dmas: int,
    sdmas: int,
    min_bytes: int,
    min_moved: int,
    min_piece: int,
    limit: int | None,
    min_once: int = MIN_ONCE,
    min_single: int = MIN_SINGLE,
    retire_below: int = RETIRE_BELOW,
    few_runs: int = FEW_RUNS,
    min_few: int = MIN_FEW,
    unit_chars: UnitChars | None = None,
) -> dict[TransferOp, Plan]:
    """The transfers of `program` to split, with their plans: as many of the
    splittable ones (`plan_split`) as keep its live tokens within `limit`
    (`SEQ.max_active_tokens`, DEV-17), each with fewer slices where all
    would not fit; first, the deps a barrier already covers that hold a
    token across loops are dropped (`drop_covered_loop_deps`, session 40)."""
    choice = Choice(
        dmas,
        sdmas,
        min_bytes,
        min_moved,
        min_once,
        min_piece,
        limit,
        min_single,
        retire_below,
        few_runs,
        min_few,
        unit_chars or {},
    )
    with gc_paused():
        if limit is not None:
            drop_covered_loop_deps(program)
        choice.block(program.block, limit)
    return choice.plans


def loop_trips(op: LoopOp, ev: Evaluator) -> int:
    """How many iterations `op` runs (1 where its bounds are not constants)."""
    try:
        lo, hi = ev.static(op.lower), ev.static(op.upper)
    except ExprError:
        return 1
    return max(1, hi - lo + 1) if lo is not None and hi is not None else 1


class SplitTransfer(RewritePattern):
    """A transfer `plans` names -> its slices, its token's consumers taking
    all of theirs (the module doc)."""

    def __init__(self, plans: dict[TransferOp, Plan], names: Names):
        self.plans, self.names = plans, names

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: TransferOp, rewriter: PatternRewriter) -> None:
        plan = self.plans.pop(op, None)
        if plan is None:
            return
        b = NemBuilder.before(op, op.location)
        base = op.token_name() or "copy"
        tokens = []
        for at, m in plan.parts:
            dst = _slice(b, op.dst, plan, 0, at, m)
            src = _slice(b, op.src, plan, 1, at, m)
            new = TransferOp(
                dst,
                src,
                list(op.dep_values()),
                False,  # a .sync transfer's slices: async, then one wait for all
                self.names.fresh(base),
                list(op.decorator_list()),
                [list(op.operand_decos(0)), list(op.operand_decos(1))],
            )
            new.location = op.location
            rewriter.insert(new, InsertPoint.before(op))
            tokens.append(new.result)
        if op.is_sync:
            wait = WaitOp(tokens, [])
            wait.location = op.location
            rewriter.insert(wait, InsertPoint.before(op))
        for user in {u.operation for u in op.result.uses}:
            retoken(user, op.result, tokens)
        regions = [v.owner for v in (op.dst, op.src)]
        rewriter.erase(op)
        # the original's inline regions, and their index arithmetic, once unused
        todo: list[Operation] = [
            r for r in regions if isinstance(r, RegionOp) and r.binding.data == "inline"
        ]
        while todo:
            o = todo.pop()
            if o.parent is None or any(r.uses for r in o.results):
                continue
            operands = [v.owner for v in o.operands]
            rewriter.erase(o)
            todo += [
                p for p in operands if isinstance(p, Operation) and p.name.startswith("arith.")
            ]


class Names:
    """Fresh token names `STEM_1`, `STEM_2`, ...: none that a statement of
    the program declares (NAME-02), each given once.  The program is
    walked for its names at the first split, not at all without one."""

    def __init__(self, program: ProgramOp):
        self.program = program
        self.taken: set[str] | None = None

    def fresh(self, stem: str) -> str:
        if self.taken is None:
            self.taken = declared_names(self.program)
        name = next(n for k in count(1) if (n := f"{stem}_{k}") not in self.taken)
        self.taken.add(name)
        return name


@dataclass(frozen=True)
class SplitTransfersPass(ModulePass):
    """Split each large transfer between L1 and a slower memory over the engine's DMAs (D-NEM-SPLIT-TRANSFERS).

    Options:
      device: the target whose DMAs per engine bound the slices (default: --device, else the program's directive)
      min-bytes: transfers spanning fewer bytes stay whole
      min-moved: the same for the bytes over all its runs (span times its loops' trip counts)
      min-once: transfers spanning this split whatever they move over their runs
      min-single: transfers that run once (in no loop) split from this span on (or min-few, the smaller, when few-runs > 1)
      few-runs: transfers in loops run at most this many times (their loops' trip counts multiplied)
      min-few: split from this span on, whatever they move
      retire-below: a transfer moving fewer bytes whose token a loop consumes is waited for before it, one under min-piece two statements consume before the first (0: none)
      min-piece: no slice smaller than this (bytes)
      max-tokens: the live-token limit (overrides the device's SEQ.max_active_tokens)
      include-dirs: directories where device=NAME's file is found first (nem-opt -I adds its own)
    """

    name = "nem-split-transfers"

    device: str | None = None
    min_bytes: int = MIN_BYTES
    min_moved: int = MIN_MOVED
    min_once: int = MIN_ONCE
    min_single: int = MIN_SINGLE
    retire_below: int = RETIRE_BELOW
    few_runs: int = FEW_RUNS
    min_few: int = MIN_FEW
    min_piece: int = MIN_PIECE
    max_tokens: int | None = None
    include_dirs: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from nem.passes.device import target_device

        for prog in list(programs(op)):
            device = target_device(ctx, prog, self.device, self.include_dirs)
            if device is None:
                continue  # no DMA count: nothing to split over
            plans = choose_splits(
                prog,
                device.units("DMA"),
                device.units("sDMA") or device.units("DMA"),
                self.min_bytes,
                self.min_moved,
                self.min_piece,
                device.max_active_tokens if self.max_tokens is None else self.max_tokens,
                self.min_once,
                self.min_single,
                self.retire_below,
                self.few_runs,
                self.min_few,
                device.unit_characteristics,
            )
            walker = PatternRewriteWalker(
                SplitTransfer(plans, Names(prog)), apply_recursively=False
            )
            # the blocks that hold a transfer to split, not the whole program
            # (a region walked twice, nested in another, has nothing left)
            for region in dict.fromkeys(t.parent_region() for t in list(plans)):
                if region is not None:
                    walker.rewrite_region(region)
