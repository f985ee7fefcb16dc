"""`scf.for` as the lowering takes it (D-LOW-SCF): what transform-dialect
tiling (`transform.structured.tile_using_for`) and `-convert-linalg-to-loops`
emit.  An `scf.for` over `index` with a constant step is an `affine.for`
whose bounds are its bound values (`affine.for %i = max(%lb) to min(%ub)`,
one symbol each, a constant folded into the map), so it is rewritten into one
before the conversion (`nem-raise-scf-for`,
`nem.passes.lowering.prepare`) and then lowered like any `affine.for`: a NEM loop
when its trip count is static (D-LOW-LOOP), a compute task when it is a
pure nest.  The bounds need not be constants: a bound that is an affine
value of outer loop variables (a tile offset) works when the trip count
does not depend on them, else the `affine.for` diagnostics apply.  An
`scf.for` left where the conversion lowers ops one by one is rejected by
`nem-check-task-control-flow` (D-LOW-TASK-CF).
"""

from __future__ import annotations

from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import AffineMapAttr, IndexType, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from nem.dialect.per_class import subclass_table
from nem.dialect.view_op import REPLACES


def _constant(v: SSAValue) -> int | None:
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _bound(v: SSAValue) -> tuple[AffineMapAttr, list[SSAValue]]:
    """The affine bound of value `v`: a constant map, else `()[s0] -> (s0)` on `v`."""
    c = _constant(v)
    if c is not None:
        return AffineMapAttr(AffineMap(0, 0, (AffineExpr.constant(c),))), []
    return AffineMapAttr(AffineMap(0, 1, (AffineExpr.symbol(0),))), [v]


class ScfForToAffine(RewritePattern):
    """`scf.for` over index with a constant positive step -> `affine.for`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: scf.ForOp, rewriter: PatternRewriter) -> None:
        step = _constant(op.step)
        if not isinstance(op.lb.type, IndexType) or step is None or step <= 0:
            return
        block = op.body.block
        term = block.last_op
        if isinstance(term, scf.YieldOp):
            rewriter.replace_op(term, affine.YieldOp.get(*term.operands))
        (lb_map, lb_ops), (ub_map, ub_ops) = _bound(op.lb), _bound(op.ub)
        region = rewriter.move_region_contents_to_new_regions(op.body)
        new = affine.ForOp.from_region(
            lb_ops,
            ub_ops,
            list(op.iter_args),
            [r.type for r in op.res],
            lb_map,
            ub_map,
            region,
            step,
        )
        new.location = op.location
        new.attributes.update(op.attributes)  # the tile stage's marks (`structure.WIDE`)
        new.attributes[REPLACES] = StringAttr(op.name)  # messages name what the user wrote
        rewriter.replace_matched_op(new)


def has_scf_for(module: ModuleOp) -> bool:
    """Whether an op of `module` is an `scf.for` (or a subclass of it, as the
    rewriter matches); `nem-raise-scf-for` rewrites only when one is.  One
    `issubclass` per op class, not per op (xDSL's op classes are ABCs, whose
    `isinstance` runs Python code)."""
    is_for = subclass_table(scf.ForOp)
    return any(is_for[type(op)] for op in module.walk())
