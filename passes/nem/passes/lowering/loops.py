"""Handlers of `affine.for`: NEM loops (D-LOW-LOOP), peeled partial tiles
(D-LOW-PEEL), loops under a window (`nem.max_in_flight`, which
`nem-reroll-pipelines` gives the software pipelines it re-rolls, D-LOW-PIPE;
tile loops with `pipeline-tiles`, D-LOW-PIPE-BODY); loop-carried
tokens are gone before (D-LOW-ASYNC-INLINE).  A loop that moves data, allocates or holds async
work becomes a NEM loop; a loop over tiles of raisable point nests too
(D-LOW-TILES); any other nest is one compute task (`compute.lower_nest`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from xdsl.dialects import affine, scf
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineMap

from nem.dialect.builder import NemBuilder
from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.frontends.upstream_dialects.dma import (
    AffineDmaStartOp,
)
from nem.passes.lowering import compute, structure
from nem.passes.lowering.affine_algebra import Aff, Var, is_index_arith, pick_minmax
from nem.passes.lowering.context import pipelined_loop
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.partial_tiles import (
    MINMAX_OPS,
    PeelScope,
    check_narrowed,
    nonuniform_minmax,
    partial_tile_op,
)
from nem.passes.lowering.reroll import is_rerolled, last_iteration
from nem.passes.lowering.structure import WIDE, allocation, is_structural
from nem.passes.lowering.tile_loops import is_tile_loop

if TYPE_CHECKING:
    from nem.passes.lowering.state import BlockState, Handler, Lowering

MapEvaluator = Callable[[Operation, AffineMap, tuple[SSAValue, ...]], list[Aff]]
"""The results of an op's affine map on its operands (`LoweringContext.affine`)."""


def lower_for(lw: Lowering, op: affine.ForOp, st: BlockState) -> None:
    """A NEM loop (`lower_loop`) or one compute task (`compute.lower_nest`);
    the last iteration `nem-reroll-pipelines` put right after it, if any,
    is lowered with it (D-LOW-PIPE), not by the walk (D-LOW-WALK)."""
    tail = last_iteration(op)
    if tail is not None:
        st.skip.add(tail)
    if is_structural(op) or is_tile_loop(lw.ctx, op):
        lower_loop(lw, op, st)
    else:
        compute.lower_nest(lw, op, st)


def staged_tiles(lw: Lowering, op: affine.ForOp, st: BlockState) -> list[Operation]:
    """With `pipeline-tiles` (D-LOW-PIPE-BODY): the allocations of L1 buffers
    directly in the body of `op` (a tile loop whose tiles are staged in
    buffers of their own, as `transform.structured.promote` leaves them),
    when nothing else in the body is a loop and no pipelined loop holds the
    NEM block `st` fills (`pipelined_loop`): then two iterations may run at
    once, each in its own slot of the buffers.  Otherwise none."""
    if not lw.ctx.options.pipeline_tiles or pipelined_loop(st.block) is not None:
        return []
    ops = list(op.body.block.ops)
    if any(isinstance(o, affine.ForOp) and is_structural(o) for o in ops):
        return []
    allocs = [o for o in ops if allocation(o) is not None]
    fast = [
        a
        for a in allocs
        if isinstance(t := a.results[0].type, MemRefType) and lw.ctx.level(a, t).startswith("L1")
    ]
    return allocs if fast else []


def loop_bounds(op: affine.ForOp, evaluate: MapEvaluator) -> tuple[Aff, int, int]:
    """(lower bound, step, trip count), the bound maps evaluated by
    `evaluate` (the conversion's `LoweringContext.affine`, or
    `nem-outline-kernels`' on its own index values); a max/min bound is
    taken when one candidate wins for every value of the enclosing loop
    variables (e.g. in a peeled loop, D-LOW-PEEL)."""
    lb = pick_minmax(evaluate(op, op.lowerBoundMap.data, tuple(op.lowerBoundOperands)), False)
    ub = pick_minmax(evaluate(op, op.upperBoundMap.data, tuple(op.upperBoundOperands)), True)
    if lb is None or ub is None:
        raise reject(
            op,
            "max/min loop bounds (partial tiles) are not supported: NEM loop "
            "trip counts are static",
            "choose tile sizes that divide the iteration space",
        )
    step = op.step.value.data
    if step <= 0:
        raise reject(
            op,
            f"the loop step is {step}; affine.for needs a positive step",
            "give the loop a step of at least 1",
        )
    diff = ub - lb
    if not diff.is_const():
        raise reject(
            op, "the trip count of this loop depends on outer loops; NEM loops need it static"
        )
    return lb, step, max(0, -(-diff.const // step))


@contextmanager
def nem_loop(
    lw: Lowering, op: affine.ForOp, trip: int, st: BlockState, max_in_flight: int | None = None
) -> Iterator[tuple[NemBuilder, Var]]:
    """`loop v in [0..trip-1]` at the end of the block; yields a builder
    for its body and its variable."""
    ctx = lw.ctx
    name = ctx.names.fresh(op.body.block.args[0].name_hint, "i")
    with st.builder.loop(name, 0, trip - 1, max_in_flight=max_in_flight, loc=op.location) as iv:
        arg = iv.value
        assert isinstance(arg, BlockArgument)
        yield NemBuilder.at_end(arg.block, op.location), ctx.new_var(arg, name, trip)


def marked_window(op: affine.ForOp) -> int | None:
    """The iterations in flight the tile stage gave tile loop `op`
    (`structure.WIDE`: D-COMPILE-TILE-TIME), None where it is unmarked.  A
    mark may exceed the loop's trips (one window for all of an op's tile
    loops, so that the engine parts' loops jam, D-NEM-JAM-ENGINES) but not
    `structure.ALL_IN_FLIGHT`, the most the tile stage writes; any other
    mark is rejected at the loop (its buffers get that many slots)."""
    mark, most = op.attributes.get(WIDE), structure.ALL_IN_FLIGHT
    if mark is None:
        return None
    if not (isinstance(mark, IntegerAttr) and 2 <= mark.value.data <= most):
        raise reject(
            op,
            f"{WIDE} = {mark} must be an integer from 2 to {most}: the "
            "iterations in flight, each with its own slot of the body's buffers "
            "(D-LOW-PIPE-BODY)",
            f"remove it (two iterations in flight) or write {WIDE} = {most} : i64",
        )
    return mark.value.data


def lower_loop(lw: Lowering, op: affine.ForOp, st: BlockState) -> None:
    ctx = lw.ctx
    lb, step, trip = loop_bounds(op, ctx.affine)
    carried_values(op)
    rerolled = is_rerolled(op)
    tail = last_iteration(op) if rerolled else None
    if trip == 0 and tail is None:
        return
    iv = op.body.block.args[0]
    partial = partial_of(op, lb, step, trip, ctx.affine, ctx.env)
    window = 2 if rerolled or staged_tiles(lw, op, st) else None
    if window and not rerolled:
        window = marked_window(op) or window

    def tiles(n: int) -> None:
        # the body's buffers in `window` slots (D-LOW-PIPE, D-LOW-PIPE-BODY):
        # the loop's `@max_in_flight` says so (`context.pipelined_loop`)
        with nem_loop(lw, op, n, st, max_in_flight=window) as (body, var):
            ctx.env[iv] = lb + Aff.atom(var).scale(step)
            lw.lower_block(op.body.block, body)
        if rerolled:
            ctx.summary.notes.append(
                f"pipelined loop at {SourceLoc.of(op)} -> ping-pong slots under @max_in_flight(2)"
            )
        elif window:
            ctx.summary.notes.append(
                f"tile loop at {SourceLoc.of(op)} -> its L1 buffers in "
                f"{window} slots under @max_in_flight({window})"
            )

    if partial is None:
        tiles(trip)
        return

    # D-LOW-PEEL: a NEM loop over the full tiles, then the last (partial)
    # iteration as straight-line tasks with its own static shapes
    def full_tiles() -> None:
        if full := full_tile_count(trip, partial, tail):
            tiles(full)

    def last_tile() -> None:
        if tail is not None:  # its ops but the scf.yield
            lw.lower_block(tail.region.block, st.builder)
            return
        ctx.env[iv] = lb + Aff.c((trip - 1) * step)
        lw.lower_block(op.body.block, st.builder)

    peeled(lw, op, partial, full_tiles, last_tile, () if tail is None else (tail,))


def partial_of(
    op: affine.ForOp,
    lb: Aff,
    step: int,
    trip: int,
    evaluate: MapEvaluator,
    env: Mapping[SSAValue, Aff],
) -> Operation | None:
    """The op that makes the last iteration of NEM loop `op` a copy of its
    own (D-LOW-PEEL), where a failure to lower it is reported, else None:
    a re-rolled loop's last iteration after it (`reroll.last_iteration`,
    D-LOW-PIPE), else the min/max that makes the last tile partial.  On the
    index values `env` of the scopes around `op` (the conversion's, or the
    marks' walk's, `ConversionWalk`), `evaluate` its `MapEvaluator`."""
    rerolled = is_rerolled(op)
    tail = last_iteration(op) if rerolled else None
    if tail is not None:
        return tail_partial(tail)
    if rerolled:
        # upstream rounds a pipelined loop's upper bound up to whole steps:
        # only the min/max bounds of its body tell a partial last tile
        return nonuniform_minmax(op, lb, step, trip, env)
    ub = pick_minmax(evaluate(op, op.upperBoundMap.data, tuple(op.upperBoundOperands)), True)
    return partial_tile_op(op, lb, ub, step, trip, env)


def tail_partial(tail: scf.ExecuteRegionOp) -> Operation:
    """The op of a re-rolled loop's last iteration `tail` where a failure to
    lower it is reported: its first op past `%last` and the stage-0 starts
    on it, else `tail`."""
    last = tail.region.block.first_op
    assert last is not None
    return next(
        (
            o
            for o in tail.region.block.ops
            if not is_index_arith(o)
            and not (isinstance(o, AffineDmaStartOp) and last.results[0] in o.operands)
        ),
        tail,
    )


def full_tile_count(trip: int, partial: Operation | None, tail: Operation | None) -> int:
    """The iterations of a NEM loop of `trip` whose body is lowered with
    the loop's variable: all without a `partial` last one (`partial_of`);
    all before a re-rolled loop's last iteration (`tail`, lowered after
    them); all but the peeled last one otherwise."""
    return trip if partial is None or tail is not None else max(trip - 1, 0)


def carried_values(op: affine.ForOp) -> None:
    """NEM loops carry no values: a loop-carried value (`iter_args`) in a
    loop that moves data is rejected.  The `!async.token`s such a loop
    carried, which stand for completed work, are gone before the
    conversion (`nem-inline-async-executes`, D-LOW-ASYNC-INLINE); one left
    is in a loop rejected for another value."""
    for arg in op.body.block.args[1:]:
        if not isinstance(arg.type, asy.TokenType):
            raise reject(
                op,
                f"not supported: a loop-carried value of type {arg.type} in a "
                "loop that moves data (NEM loops carry no values)",
                "carry only !async.token, or keep the reduction inside a compute loop nest",
            )


def peeled(
    lw: Lowering,
    op: affine.ForOp,
    partial: Operation,
    full_tiles: Callable[[], None],
    last_tile: Callable[[], None],
    owners: tuple[Operation, ...] = (),
) -> None:
    """Lower a loop with a partial last tile: `full_tiles()` emits the loop
    over the others, `last_tile()` the peeled iteration, whose narrowed
    DMAs are then checked (D-LOW-PEEL).  `owners`: the ops besides the
    loop that belong to it (a re-rolled loop's last iteration after it), so
    a buffer used only by them is private to the loop.  A failure is
    reported at the first min/max of the body, with the inner reason."""
    try:
        full_tiles()
        with lw.ctx.in_scope(PeelScope(op, (op, *owners))) as scope:
            last_tile()
            check_narrowed(scope)
    except NemDiagnosticError as e:
        failure = peel_failure(op, partial, e)
        if failure is e:
            raise
        raise failure from None
    lw.ctx.summary.notes.append(f"loop at {SourceLoc.of(op)}: partial last tile peeled")


def peel_failure(op: affine.ForOp, partial: Operation, e: NemDiagnosticError) -> NemDiagnosticError:
    """The error of loop `op`, peeled at `partial` (`partial_of`), whose
    copies failed to lower with `e`: at `partial`, with the inner reason;
    `e` itself when an inner peeled loop already explains it."""
    if any("peeling the last iteration" in d.message for d in e.diagnostics):
        return e
    why = "; ".join(d.message.removeprefix("cannot lower ") for d in e.diagnostics)
    head = (
        "the operands of this affine.min/max differ across iterations (a partial tile)"
        if partial.name in MINMAX_OPS
        else "max/min loop bounds (partial tiles) are not supported"
        if isinstance(partial, affine.ForOp)
        else "the epilogue of a pipelined loop that differs from its body (its last "
        "iteration) is lowered on its own"
    )
    return reject(
        partial,
        f"{head}: peeling the last iteration of the loop at {SourceLoc.of(op)} fails: {why}",
        "choose tile sizes that divide the iteration space",
    )


HANDLERS: dict[type[Operation], Handler] = {affine.ForOp: lower_for}
