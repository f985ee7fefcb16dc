"""`linalg.generic` ops as NEM plans (D-LOW-RAISE, D-LOW-BCAST-OPERAND,
D-LOW-GENERIC-OUTS, D-LOW-GENERIC-COPY): a pure analysis, beside
`nest_analysis`'s for loop nests and sharing its trees.

`generic_accesses` turns the indexing maps into nest accesses over the
generic's loops (identity, broadcast or, for copies, transposing maps);
`generic_copy` recognizes a body that only yields an input or a constant;
`generic_trees` turns the body into one elementwise tree per output.
Anything else raises `NotRaisable` with the reason the remark reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith, linalg
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr

from nem.passes.lowering.affine_algebra import Aff, is_identity
from nem.passes.lowering.nest_analysis import (
    Access,
    EltOp,
    Load,
    NotRaisable,
    check_raisable_size,
    elt_tree,
    is_broadcast_of,
)

NOT_ELTWISE_GENERIC = "not an all-parallel linalg.generic with identity or broadcast maps"


ShapeOf = Callable[[SSAValue], Sequence[int]]
"""The static shape of a memref operand where the op is lowered (the
lowering's view of it: an operand typed `memref<?x?xf32>` by promote's
unfolded `memref.view`s has constant sizes there, D-LOW-VIEW)."""


def generic_accesses(
    op: linalg.GenericOp, shape_of: ShapeOf, transposes: bool = False
) -> tuple[list[Access], dict[int, int]]:
    """Each operand of an all-parallel `linalg.generic` (ins, then outs) as
    a nest access over the generic's loops, and the loops' extents: an
    output's map is the identity, an input's the identity or a broadcast
    (D-LOW-BCAST-OPERAND): its results are loop dimensions in loop order,
    or `0` on a dimension of size 1 (`(d0, d1) -> (d1)`, `(d0, d1) -> (0,
    d1)`), or with `transposes` in any order (a copy, D-LOW-BCAST).  Loops
    of one iteration are no dimension, as in a nest (D-LOW-TILES), but the
    innermost of a generic of one point."""
    maps = [m.data for m in op.indexing_maps.data]
    if any(str(it.data).split(".")[-1].lower() != "parallel" for it in op.iterator_types.data):
        raise NotRaisable(NOT_ELTWISE_GENERIC)
    operands = [*op.inputs, *op.outputs]
    if len(op.outputs) > 1 and len(set(operands)) < len(operands):
        raise NotRaisable("a linalg.generic with several outputs and an operand passed twice")
    n_in = len(op.inputs)
    if not all(is_identity(m) for m in maps[n_in:]):
        raise NotRaisable(NOT_ELTWISE_GENERIC)
    loops = list(range(maps[-1].num_dims))
    accesses = []
    for k, (m, v) in enumerate(zip(maps, [*op.inputs, *op.outputs])):
        shape = shape_of(v) if isinstance(v.type, MemRefType) else ()
        if m.num_symbols or len(m.results) != len(shape):
            raise NotRaisable(NOT_ELTWISE_GENERIC)
        index: list[tuple[int | None, Aff]] = []
        for e, size in zip(m.results, shape):
            if isinstance(e, AffineDimExpr):
                index.append((e.position, Aff.c(0)))
            elif isinstance(e, AffineConstantExpr) and e.value == 0 and size == 1:
                index.append((None, Aff.c(0)))
            else:
                raise NotRaisable(NOT_ELTWISE_GENERIC)
        acc = Access(v, tuple(index))
        if len(set(acc.dims)) < len(acc.dims):
            raise NotRaisable(NOT_ELTWISE_GENERIC)
        if k < n_in and not transposes and not is_broadcast_of(acc.dims, loops):
            raise NotRaisable("operands are indexed in different orders (transpose)")
        accesses.append(acc)
    extents = dict(enumerate(shape_of(accesses[-1].memref)))
    unit = {d for d, e in extents.items() if e == 1}
    if len(unit) == len(extents):  # one point: keep a dimension for its region
        unit.discard(len(extents) - 1)
    accesses = [
        Access(a.memref, tuple((None if d in unit else d, rest) for d, rest in a.index))
        for a in accesses
    ]
    return accesses, {d: e for d, e in extents.items() if d not in unit}


def generic_copy(
    op: linalg.GenericOp, shape_of: ShapeOf
) -> tuple[Access | Attribute, Access, dict[int, int]] | None:
    """A `linalg.generic` of one output whose body only yields an input (a
    copy that may transpose or broadcast, D-LOW-BCAST: what transform
    tiling leaves of a layout change or a bias broadcast) or a constant (a
    fill, D-LOW-FILL) as (the input's access or the constant, the output's
    access, the loops' extents); None for any other body."""
    block = op.regions[0].block
    last = block.last_op
    if (
        len(op.outputs) != 1
        or last is None
        or len(last.operands) != 1
        or any(o is not last and not isinstance(o, arith.ConstantOp) for o in block.ops)
    ):
        return None
    v = last.operands[0]
    if isinstance(v, BlockArgument) and v.block is block:
        if v.index >= len(op.inputs):
            return None
        accesses, exts = generic_accesses(op, shape_of, transposes=True)
        return accesses[v.index], accesses[-1], exts
    if isinstance(v.owner, arith.ConstantOp):
        accesses, exts = generic_accesses(op, shape_of)
        return v.owner.value, accesses[-1], exts
    return None


def generic_trees(op: linalg.GenericOp, shape_of: ShapeOf) -> list[EltOp]:
    """The elementwise trees of an all-parallel `linalg.generic` over
    memrefs whose maps `generic_accesses` takes, one per output (what it
    yields), computed in output order (`nest_analysis.elt_tree`, the walk
    loop-nest bodies use): a tree's leaves are loads of the ins or of its
    own output (read before it is written); a tree reading another output
    is not raised (that output's tasks may have written it)."""
    accesses, _ = generic_accesses(op, shape_of)
    block = op.regions[0].block
    n_in = len(op.inputs)
    last = block.last_op
    assert last is not None
    roots = []
    for own, v in enumerate(last.operands, start=n_in):

        def leaf(x: SSAValue, own: int = own) -> Load | None:
            if isinstance(x, BlockArgument) and x.block is block:
                if x.index >= n_in and x.index != own:
                    raise NotRaisable("an output computed from another output's value")
                return Load(accesses[x.index])
            if not (
                isinstance(x.owner, Operation) and x.owner.parent_block() is block
            ) and not isinstance(x.owner, arith.ConstantOp):
                raise NotRaisable("a value defined outside the linalg.generic")
            return None

        check_raisable_size(v, lambda o: o.parent_block() is block)
        root = elt_tree(v, leaf, "linalg.generic", NO_OPCODE)
        if not isinstance(root, EltOp):
            raise NotRaisable(NO_OPCODE)
        roots.append(root)
    return roots


NO_OPCODE = "no NEM opcode for this linalg op"
