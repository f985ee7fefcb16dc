"""Reshape views (D-LOW-RESHAPE) and the one view op (D-LOW-VIEW-OP):
`memref.collapse_shape` and `memref.expand_shape` are views of the same
bytes, so they become `nem_lowering.view`s of their source before the
conversion (`nem-rewrite-views`, `view_ops.py`), which lowers each to a new
`View` of the same NEM buffer (no task, no copy; `memref_views.lower_view_op`):

    %v = memref.collapse_shape %x [[0], [1, 2]] : memref<2x3x4xf32> into memref<2x12xf32>
    -> nem_lowering.view %x shape [2, 12] strides [12, 1]
    -> View(buffer of %x, shape (2, 12), strides (12, 1))

A collapsed group must be contiguous in its source (each dimension's stride
is the next one's stride times its size, unit dimensions aside): upstream's
verifier already demands it for identity and strided layouts it can prove,
and the check here turns what it cannot prove into a located diagnostic.
An expanded dimension of stride `s` split into sizes `(a, b, c)` gets
strides `(s*b*c, s*c, s)`: always a view.  The layouts are computed on the
source's static layout (`collapsed`, `expanded`), for the patterns.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from xdsl.ir import Operation

from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.views import row_major

Layout = tuple[tuple[int, ...], tuple[int, ...]]
"""(shape, element strides) of a view."""


def collapsed(op: Operation, src: Layout, groups: Sequence[Sequence[int]], what: str) -> Layout:
    """`src` with each group of dimensions merged into one (contiguous
    groups only; `what` names the source in the diagnostic)."""
    src_shape, src_strides = src
    shape, strides = [], []
    for g in groups:
        dims = [(src_shape[k], src_strides[k]) for k in g if src_shape[k] != 1]
        size = math.prod(src_shape[k] for k in g)
        for (_, outer), (n, inner) in itertools.pairwise(dims):
            if outer != inner * n:
                raise reject(
                    op,
                    f"collapsing dimensions {list(g)} of {what} that are not "
                    f"contiguous (strides {[src_strides[k] for k in g]})",
                    "copy the memref into a contiguous buffer first",
                )
        shape.append(size)
        strides.append(dims[-1][1] if dims else 1)
    return tuple(shape), tuple(strides)


def expanded(src: Layout, groups: Sequence[Sequence[int]], out_shape: Sequence[int]) -> Layout:
    """`src` with each dimension split into the sizes of its group."""
    strides: list[int] = [0] * len(out_shape)
    for d, g in enumerate(groups):
        inner = row_major([out_shape[k] for k in g])
        for k, s in zip(g, inner):
            strides[k] = src[1][d] * s
    return tuple(out_shape), tuple(strides)
