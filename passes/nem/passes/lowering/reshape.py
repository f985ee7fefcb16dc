"""Reshape views (D-LOW-RESHAPE): `memref.collapse_shape` and
`memref.expand_shape` are views of the same bytes, so they lower to a new
`View` of the same NEM buffer (no task, no copy):

    %v = memref.collapse_shape %x [[0], [1, 2]] : memref<2x3x4xf32> into memref<2x12xf32>
    -> View(buffer of %x, shape (2, 12), strides (12, 1))

A collapsed group must be contiguous in its source (each dimension's stride
is the next one's stride times its size, unit dimensions aside): upstream's
verifier already demands it for identity and strided layouts it can prove,
and the check here turns what it cannot prove into a located diagnostic.
An expanded dimension of stride `s` split into sizes `(a, b, c)` gets
strides `(s*b*c, s*c, s)`: always a view.  The analysis is `reshape_view`;
the handlers only record the view.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from xdsl.dialects import memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType
from xdsl.ir import Operation

from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.views import View, row_major

if TYPE_CHECKING:
    from nem.passes.lowering.state import BlockState, Handler, Lowering


def _groups(op: memref.CollapseShapeOp | memref.ExpandShapeOp) -> list[list[int]]:
    return [[int(i.value.data) for i in g.data] for g in op.reassociation.data]


def collapsed(op: Operation, src: View, groups: Sequence[Sequence[int]]) -> View:
    """`src` with each group of dimensions merged into one (contiguous groups only)."""
    shape, strides = [], []
    for g in groups:
        dims = [(src.shape[k], src.strides[k]) for k in g if src.shape[k] != 1]
        size = math.prod(src.shape[k] for k in g)
        for (_, outer), (n, inner) in itertools.pairwise(dims):
            if outer != inner * n:
                raise reject(
                    op,
                    f"collapsing dimensions {list(g)} of {src.name} that are not "
                    f"contiguous (strides {[src.strides[k] for k in g]})",
                    "copy the memref into a contiguous buffer first",
                )
        shape.append(size)
        strides.append(dims[-1][1] if dims else 1)
    return View(src.buffer, src.level, src.elem, tuple(shape), tuple(strides), src.base, src.name)


def expanded(src: View, groups: Sequence[Sequence[int]], out_shape: Sequence[int]) -> View:
    """`src` with each dimension split into the sizes of its group."""
    strides: list[int] = [0] * len(out_shape)
    for d, g in enumerate(groups):
        inner = row_major([out_shape[k] for k in g])
        for k, s in zip(g, inner):
            strides[k] = src.strides[d] * s
    return View(
        src.buffer, src.level, src.elem, tuple(out_shape), tuple(strides), src.base, src.name
    )


def lower_collapse_shape(lw: Lowering, op: memref.CollapseShapeOp, st: BlockState) -> None:
    src = lw.ctx.view(op.src, op)
    lw.ctx.views[op.result] = collapsed(op, src, _groups(op))


def lower_expand_shape(lw: Lowering, op: memref.ExpandShapeOp, st: BlockState) -> None:
    rt = op.result.type
    assert isinstance(rt, MemRefType)
    shape = rt.get_shape()
    if list(op.output_shape) or DYNAMIC_INDEX in shape:
        raise reject(
            op,
            "memref.expand_shape with a dynamic output shape is not supported: "
            "NEM regions have static sizes",
            "tile with static sizes",
        )
    src = lw.ctx.view(op.src, op)
    lw.ctx.views[op.result] = expanded(src, _groups(op), shape)


HANDLERS: dict[type[Operation], Handler] = {
    memref.CollapseShapeOp: lower_collapse_shape,
    memref.ExpandShapeOp: lower_expand_shape,
}
