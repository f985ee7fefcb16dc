"""The graph fuzzer's entries for TopK, GatherElements and Einsum
(docs/compile.md "Supported ONNX", D-COMPILE-TOPK, D-COMPILE-EINSUM,
D-COMPILE-SHAPES).

TopK orders its operand, a discontinuous choice, so it reads a graph input
(both sides read it bit for bit, as ArgMax's entry); its indices are Cast
to the float type.  GatherElements takes constant indices (negative ones
too) or indices computed at run time (the truncation of a positive input).
Einsum draws an equation that fits the value it picks: the matrix-product
forms (raised to NEM matmuls) and the others (one kernel).
"""

from __future__ import annotations

import math

from graph_gen import Builder, Skip
from graph_operands import axis, op
from graph_ops_data import constant_indices
from onnx import TensorProto


@op("TopK")
def topk(b: Builder) -> None:
    """k up to 5 along one axis, largest or smallest."""
    x = b.pick_input(b.shape)
    if x.rank == 0:
        raise Skip
    a = axis(b, x.rank)
    k = b.rng.randint(1, min(x.shape[a], 5))
    attrs: dict[str, object] = {"axis": a}
    if b.rng.random() < 0.4:
        attrs["largest"] = 0
    _, idx = b.add("TopK", [x.name, b.ints([k])], n_out=2, **attrs)
    b.add("Cast", [idx.name], to=b.elem)


@op("GatherElements")
def gather_elements(b: Builder) -> None:
    """Indices of the data's rank, a size along the axis of their own."""
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    a = axis(b, x.rank)
    d = x.shape[a]
    shape = tuple(b.size(1, 6) if k == a % x.rank else s for k, s in enumerate(x.shape))
    if b.rng.random() < 0.2 and d >= 2:
        u = b.new_input(shape, pos=True)
        (idx,) = b.add("Cast", [u.name], to=TensorProto.INT64)
        index = idx.name
    else:
        index = constant_indices(b, shape, d)
    b.add("GatherElements", [x.name, index], pos=x.pos, axis=a)


@op("Einsum")
def einsum(b: Builder) -> None:
    """A product with a weight or a value of the right shape, a transpose,
    a sum, a diagonal or a batched product, as the picked value's rank allows."""
    x = b.pick_or_new(
        lambda v: 2 <= v.rank <= 3 and v.shape[-1] <= 64, lambda: b.shape(b.rng.choice((2, 3)))
    )
    *batch, m, k = x.shape
    n = b.size(1, 17)
    if x.rank == 3:
        forms = [("bij,bjk->bik", (*batch, k, n)), ("...ij->...ji", None)]
        if m == k:
            forms.append(("bii->bi", None))
    else:
        forms = [
            ("ij,jk->ik", (k, n)),
            ("ik,jk->ij", (n, k)),
            ("ij,jk->ki", (k, n)),
            ("ij,j->j", (k,)),
            ("ij->ji", None),
            ("ij->i", None),
        ]
    equation, shape = b.rng.choice(forms)
    ins = [x.name]
    if shape is not None:
        ins.append(b.weight(shape, scale=1 / math.sqrt(k)).name)
    b.add("Einsum", ins, equation=equation)
