"""Reference kernels of the view opcodes (D-NUM-VIEW): transpose, reshape,
slice, concat, split, pad, gather -- data movement without arithmetic.
"""

from __future__ import annotations

import numpy as np

from nem.runtime.kernel_support import (
    VIEW_T,
    Attrs,
    Tensor,
    check_count,
    check_shape,
    resolve_axis,
    same_types,
    unsupported,
)
from nem.runtime.numerics import (
    NumericError,
    int_range,
    is_float,
    saturate_int,
    to_float_out,
)
from nem.runtime.quant import requantize


def _view_quant(op: str, ins: list[Tensor], outs: list[Tensor]) -> None:
    qs = [t.quant for t in (*ins, *outs)]
    present = [q for q in qs if q is not None]
    if not present:
        return
    if len(present) != len(qs):
        raise unsupported(
            op,
            ins,
            outs,
            "a view moves stored values: every operand must carry the same "
            "quant descriptor, or none",
        )
    q0 = present[0]
    for q in present[1:]:
        if (
            q.kind != q0.kind
            or q.group_size != q0.group_size
            or not np.array_equal(q.scales, q0.scales)
            or not np.array_equal(q.zero_points, q0.zero_points)
        ):
            raise unsupported(op, ins, outs, "a view cannot change the quant descriptor (QUANT-11)")


def _view(op: str, data_ins: list[Tensor], outs: list[Tensor]) -> None:
    same_types(op, data_ins, outs, VIEW_T)
    _view_quant(op, data_ins, outs)


def _out(
    op: str, ins: list[Tensor], outs: list[Tensor], arr: np.ndarray, out: Tensor
) -> np.ndarray:
    check_shape(op, ins, outs, arr.shape, out)
    return np.ascontiguousarray(arr).astype(out.array.dtype, copy=True)


def transpose(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "transpose"
    check_count(op, ins, outs, (1, 1))
    _view(op, ins, outs)
    perm = list(attrs.get("perm") or [])
    if sorted(perm) != list(range(ins[0].array.ndim)):
        raise unsupported(op, ins, outs, f"perm {perm} is not a permutation of the axes")
    return [_out(op, ins, outs, np.transpose(ins[0].array, perm), outs[0])]


def reshape(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "reshape"
    check_count(op, ins, outs, (1, 1))
    _view(op, ins, outs)
    if ins[0].array.size != outs[0].array.size:
        raise unsupported(op, ins, outs, "reshape must keep the element count (FAM-16)")
    return [_out(op, ins, outs, ins[0].array.reshape(outs[0].array.shape), outs[0])]


def slice_(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "slice"
    check_count(op, ins, outs, (1, 1))
    _view(op, ins, outs)
    x = ins[0].array
    starts, ends = list(attrs.get("starts") or []), list(attrs.get("ends") or [])
    if len(starts) != len(ends) or len(starts) > x.ndim:
        raise unsupported(op, ins, outs, f"starts {starts} / ends {ends} do not fit rank {x.ndim}")
    sl = tuple(slice(s, e) for s, e in zip(starts, ends))
    return [_out(op, ins, outs, x[sl], outs[0])]


def concat(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "concat"
    check_count(op, ins, outs, (1, 1 << 30))
    _view(op, ins, outs)
    ax = resolve_axis(op, ins, outs, attrs.get("axis"), ins[0].array.ndim)
    try:
        r = np.concatenate([t.array for t in ins], axis=ax)
    except ValueError as e:
        raise unsupported(op, ins, outs, f"shapes do not concatenate: {e}") from None
    return [_out(op, ins, outs, r, outs[0])]


def split(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "split"
    check_count(op, ins, outs, (1, 1), (1, 1 << 30))
    _view(op, ins, outs)
    x = ins[0].array
    ax = resolve_axis(op, ins, outs, attrs.get("axis"), x.ndim)
    sizes = [o.array.shape[ax] if o.array.ndim == x.ndim else -1 for o in outs]
    if -1 in sizes or sum(sizes) != x.shape[ax]:
        raise unsupported(
            op, ins, outs, f"output sizes along axis {ax} must add up to {x.shape[ax]}"
        )
    parts = np.split(x, np.cumsum(sizes)[:-1], axis=ax)
    return [_out(op, ins, outs, p, o) for p, o in zip(parts, outs)]


def pad(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "pad"
    check_count(op, ins, outs, (1, 1))
    _view(op, ins, outs)
    x_t = ins[0]
    x = x_t.array
    pads = list(attrs.get("pads") or [])
    if len(pads) != 2 * x.ndim or min(pads, default=0) < 0:
        raise unsupported(
            op,
            ins,
            outs,
            f"pads {pads} must be {2 * x.ndim} non-negative values (begins then ends, D-PADS)",
        )
    value = attrs.get("value", 0) or 0
    fill: np.ndarray | int
    if is_float(x_t.elem):
        fill = to_float_out(np.float64(value), x_t.elem)
    elif x_t.quant is not None:
        if x_t.quant.kind != "per_tensor":
            raise unsupported(
                op, ins, outs, "pad of a quantized tensor needs a per_tensor descriptor"
            )
        fill = saturate_int(requantize(np.float64(value), x_t.quant, (), op), x_t.elem)
    else:
        lo, hi = int_range(x_t.elem)
        if float(value) != int(value) or not lo <= int(value) <= hi:
            raise unsupported(op, ins, outs, f"pad value {value} is not a {x_t.elem} value")
        fill = int(value)
    padw = [(pads[i], pads[x.ndim + i]) for i in range(x.ndim)]
    return [_out(op, ins, outs, np.pad(x, padw, constant_values=fill), outs[0])]


def gather(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "gather"
    check_count(op, ins, outs, (2, 2))
    x_t, idx_t = ins
    _view(op, [x_t], outs)
    if idx_t.elem not in ("i32", "i16", "i8", "u8", "u16", "u32") or idx_t.quant is not None:
        raise unsupported(op, ins, outs, "indices must be unquantized i8/i16/i32/u8/u16/u32")
    ax = resolve_axis(op, ins, outs, attrs.get("axis"), x_t.array.ndim)
    idx = idx_t.array.astype(np.int64)
    dim = x_t.array.shape[ax]
    if idx.size and (idx.min() < 0 or idx.max() >= dim):
        raise NumericError(f"gather: index out of range [0, {dim}) (got {idx.min()}..{idx.max()})")
    return [_out(op, ins, outs, np.take(x_t.array, idx, axis=ax), outs[0])]
