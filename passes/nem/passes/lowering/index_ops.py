"""Handlers of index arithmetic: evaluated symbolically (D-LOW-AFFINE),
never lowered to statements.  Each binds its result to an `Aff` in the
context's index environment; NEM expressions are emitted only where a
statement uses the value (`emit.expr`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects import affine, arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation

from nem.frontends.upstream_dialects.affine_max import AffineMaxOp
from nem.passes.lowering.affine_algebra import INDEX_BINOPS, Aff, arith_value, pick_minmax
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.partial_tiles import minmax_map

if TYPE_CHECKING:
    from nem.passes.lowering.loops import MapEvaluator
    from nem.passes.lowering.state import BlockState, Handler, Lowering


def lower_constant(lw: Lowering, op: arith.ConstantOp, st: BlockState) -> None:
    """Index constants become affine constants; others (a float used by a
    nest) are taken by the kernels that use them."""
    if isinstance(op.result.type, IndexType):
        value = op.value
        assert isinstance(value, IntegerAttr)
        lw.ctx.env[op.result] = Aff.c(value.value.data)


LEFT_BY_THE_FOLD: tuple[type[Operation], ...] = tuple(
    o for o in INDEX_BINOPS if o not in (arith.AddiOp, arith.SubiOp)
)
"""The `arith` index ops the conversion takes (`lower_index_binop`): those
`nem-fold-index-arith` may leave where ops are lowered one by one.  Not
`addi`/`subi`, always affine, so always folded there (or one of their
operands' ops rejected first); a loop the fold leaves unmarked because its
copies disagree is a unit-step point nest, whose bodies lowered one by one
hold only applies, constants and loops (`tile_loops._point_nest`)
(D-LOW-AFFINE, session 34)."""


def lower_index_binop(lw: Lowering, op: Operation, st: BlockState) -> None:
    """`arith` integer arithmetic on `index` values (affine or rejected):
    what `nem-fold-index-arith` left (D-LOW-AFFINE): a product or division
    the loops' ranges (or a payload's value) make affine, or what is not
    affine."""
    if not isinstance(op.results[0].type, IndexType):
        raise reject(op, "unsupported operation")
    ctx = lw.ctx
    a, b = (ctx.index(v, op) for v in op.operands)
    ctx.env[op.results[0]] = index_binop(op, a, b)


def index_binop(op: Operation, a: Aff, b: Aff) -> Aff:
    """The value of `arith` index op `op` (one of `INDEX_BINOPS`) on operand
    values `a`, `b`; rejected at `op` when it is not affine there.  The
    conversion's handler, and `nem-mark-tile-loops`' walk ahead of it."""
    try:
        return arith_value(op, a, b)
    except ValueError as e:
        raise reject(op, str(e)) from None


def lower_apply(lw: Lowering, op: affine.ApplyOp, st: BlockState) -> None:
    lw.ctx.env[op.result] = lw.ctx.affine(op, op.map.data, tuple(op.mapOperands))[0]


def lower_minmax(lw: Lowering, op: Operation, st: BlockState) -> None:
    """`affine.min`/`max`: the candidate that wins for every value of the
    enclosing loop variables; a partial tile is peeled by the enclosing
    loop's handler (D-LOW-PEEL) before this is reached."""
    lw.ctx.env[op.results[0]] = minmax_value(op, lw.ctx.affine)


def minmax_value(op: Operation, evaluate: MapEvaluator) -> Aff:
    """The value of `affine.min`/`max` `op`, its candidates evaluated by
    `evaluate`; rejected at `op` when none wins for every value of the loop
    variables.  The conversion's handler, and `nem-mark-tile-loops`' walk
    ahead of it."""
    r = pick_minmax(evaluate(op, minmax_map(op), tuple(op.operands)), op.name == "affine.min")
    if r is None:
        raise reject(
            op,
            "the operands of this affine.min/max differ across iterations "
            "(a partial tile); NEM shapes are static",
            "choose tile sizes that divide the iteration space",
        )
    return r


HANDLERS: dict[type[Operation], Handler] = {
    arith.ConstantOp: lower_constant,
    **dict.fromkeys(LEFT_BY_THE_FOLD, lower_index_binop),
    affine.ApplyOp: lower_apply,
    affine.MinOp: lower_minmax,
    AffineMaxOp: lower_minmax,
}
