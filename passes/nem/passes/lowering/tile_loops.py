"""Tile loops (D-LOW-TILES): which `affine.for` loops the lowering keeps as
NEM loops around raised tiles, rather than one escape-hatch task for the whole
nest, as `affine-loop-tile` leaves them (a body of index arithmetic and loops
around point-loop nests that `match_nest` raises).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from xdsl.dialects import affine, arith, memref
from xdsl.ir import Block, Operation, SSAValue

from nem.dialect.kernel_op import KernelOp
from nem.passes.lowering.affine_algebra import IndexEnv, depends_on
from nem.passes.lowering.casts import CAST_OPS, cast_reason
from nem.passes.lowering.nest_analysis import (
    BINARY,
    SELECT_OPS,
    UNARY,
    NotRaisable,
    analyze,
    match_nest,
    only_loop,
)
from nem.passes.lowering.structure import TILE_LOOP

if TYPE_CHECKING:
    from nem.passes.lowering.context import LoweringContext

INDEX_OPS = (
    "affine.apply",
    "affine.min",
    "affine.max",
    "affine.yield",
    "arith.constant",
    "arith.addi",
    "arith.subi",
    "arith.muli",
)


def is_tile_loop(ctx: LoweringContext, loop: affine.ForOp) -> bool:
    """A loop over tiles as `affine-loop-tile` leaves it (a body of index
    arithmetic and loops) whose innermost nests are all point-loop nests
    that `match_nest` may raise: a loop with a non-unit step, or a unit-step
    one (after `-affine-loop-normalize`) whose body computes offsets or
    inner loop bounds from its variable and that is not raisable as one nest.
    It becomes a NEM loop, so each tile is one raised task (D-LOW-TILES); a
    tile loop around anything else stays one escape-hatch task for the
    whole nest.  A loop `nem-mark-tile-loops` marked is one: decided there,
    on the body as it was before `nem-fold-index-arith` rewrote it; a loop
    it left unmarked the conversion decides, on a body the fold left as it
    was (`LoweredOneByOne`)."""
    if TILE_LOOP in loop.attributes:
        return True
    return tile_loop(loop, ctx.env, lambda m, u: ctx.view(m, u).buffer)


def tile_loop(
    loop: affine.ForOp, env: IndexEnv, buffer_of: Callable[[SSAValue, Operation], Hashable]
) -> bool:
    """`is_tile_loop` on the index values `env` of the enclosing scopes, with
    `buffer_of` telling which buffer a memref is (the conversion's views, or
    `nem-outline-kernels`' roots: one answer, D-LOW-OUTLINE)."""
    if not may_be_tile_loop(loop):
        return False
    if loop.step.value.data != 1 or not _point_nest(loop):
        return True  # a unit-step loop around tile loops (a tile of size 1 of one dimension)
    iv = loop.body.block.args[0]
    offsets = [v for o in loop.body.block.ops if o.name in INDEX_OPS for v in o.results]
    offsets += [
        v
        for o in loop.body.walk()
        if isinstance(o, affine.ForOp) and o is not loop
        for v in (*o.lowerBoundOperands, *o.upperBoundOperands)
    ]
    if not any(depends_on(v, iv, lambda op: op.name in INDEX_OPS) for v in offsets):
        return False
    try:
        match_nest(analyze(loop, env), env, buffer_of)
    except (NotRaisable, ValueError):
        return True
    return False


def may_be_tile_loop(loop: affine.ForOp) -> bool:
    """Whether `is_tile_loop` may hold for `loop`, whatever the index values
    around it: the part of its answer read from the loop alone."""
    return not loop.results and _tiles_of_point_nests(loop.body.block)


def _tiles_of_point_nests(block: Block) -> bool:
    nests = 0
    for o in block.ops:
        if o.name in INDEX_OPS:
            continue
        if isinstance(o, KernelOp):
            # a point nest `nem-outline-kernels` outlined (D-LOW-OUTLINE): the
            # loop around it stays the tile loop it was when the pass decided
            nests += 1
            continue
        if not isinstance(o, affine.ForOp):
            return False
        # a unit-step loop is a point nest or, like `affine-loop-tile`'s loop of
        # tile size 1 over a dimension, a loop around tile loops
        if not ((o.step.value.data == 1 and _point_nest(o)) or _tiles_of_point_nests(o.body.block)):
            return False
        nests += 1
    return nests > 0


def _point_nest(loop: affine.ForOp) -> bool:
    """A unit-step chain of loops, perfect up to index arithmetic, around
    one store of loads combined by raisable ops (the shape `match_nest`
    accepts)."""
    while True:
        if loop.step.value.data != 1:
            return False
        body = [o for o in loop.body.block.ops if not isinstance(o, affine.YieldOp)]
        nested = only_loop(body)
        if nested is not None:
            loop = nested
            continue
        stores = [o for o in body if isinstance(o, affine.StoreOp | memref.StoreOp)]
        return len(stores) == 1 and all(
            isinstance(
                o,
                affine.StoreOp
                | memref.StoreOp
                | affine.LoadOp
                | memref.LoadOp
                | arith.ConstantOp
                | affine.ApplyOp,
            )
            or o.name in BINARY
            or o.name in UNARY
            or o.name in SELECT_OPS
            or (o.name in CAST_OPS and cast_reason(o) is None)
            for o in body
        )
