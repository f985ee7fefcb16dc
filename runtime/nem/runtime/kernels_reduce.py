"""Reference kernels of the reducing opcodes: reductions and arg-reductions
(D-NUM-REDUCE, D-ARGMAX-INDEX), normalizations and softmax (D-NUM-NORM,
D-NUM-SOFTMAX).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nem.runtime.kernel_support import (
    ALL_T,
    NORM_T,
    REDUCE_T,
    SOFTMAX_T,
    Attrs,
    Kernel,
    Tensor,
    check_count,
    check_shape,
    numeric_kernel,
    resolve_axis,
    same_types,
    unsupported,
)
from nem.runtime.numerics import (
    is_float,
    to_float_out,
)
from nem.runtime.quant import dequantize


def reduce_kernel(op: str) -> Kernel:
    fns: dict[str, Callable[..., np.ndarray]] = {
        "reduce_sum": np.sum,
        "reduce_max": np.max,
        "reduce_min": np.min,
    }
    fn = fns[op]

    def kernel(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
        check_count(op, ins, outs, (1, 1))
        x = ins[0].array
        axes = attrs.get("axes")
        axes = list(range(x.ndim)) if axes is None else list(axes)
        axes = tuple(sorted({resolve_axis(op, ins, outs, a, x.ndim) for a in axes}))
        keep = bool(int(attrs.get("keepdims", 1)))
        if x.size == 0:
            raise unsupported(op, ins, outs, "reduction of an empty tensor")
        shape = np.sum(np.zeros(x.shape, np.int8), axis=axes, keepdims=keep).shape
        y = outs[0]
        if tuple(y.array.shape) != tuple(shape) and not (shape == () and y.array.shape == (1,)):
            check_shape(op, ins, outs, shape, y)

        def f(a: np.ndarray) -> np.ndarray:
            return fn(a, axis=axes, keepdims=keep).reshape(y.array.shape)

        return [numeric_kernel(op, ins, y, f, f, allowed=REDUCE_T)]

    return kernel


def arg_kernel(op: str) -> Kernel:
    fn = np.argmax if op == "argmax" else np.argmin

    def kernel(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
        check_count(op, ins, outs, (1, 1))
        x_t, y = ins[0], outs[0]
        if y.elem != "i32" or y.quant is not None:
            raise unsupported(op, ins, outs, "indices are unquantized i32 (D-ARGMAX-INDEX)")
        if x_t.elem not in ALL_T:
            raise unsupported(op, ins, outs, f"unknown element type {x_t.elem}")
        ax = resolve_axis(op, ins, outs, attrs.get("axis"), x_t.array.ndim)
        if x_t.array.shape[ax] == 0:
            raise unsupported(op, ins, outs, "argmax over an empty axis")
        if x_t.quant is not None:
            vals = dequantize(x_t.array, x_t.quant, op)
        elif is_float(x_t.elem):
            vals = x_t.array.astype(np.float64)
        else:
            vals = x_t.array.astype(np.int64)
        r = fn(vals, axis=ax, keepdims=bool(int(attrs.get("keepdims", 1))))
        if r.size != y.array.size:
            check_shape(op, ins, outs, r.shape, y)
        return [r.reshape(y.array.shape).astype(np.int32)]

    return kernel


# --------------------------------------------------------------------------
# norms and softmax (D-NUM-NORM, D-NUM-SOFTMAX)


def norm_kernel(op: str) -> Kernel:
    def kernel(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
        check_count(op, ins, outs, (1, 3))
        same_types(op, ins, outs, NORM_T)
        if any(t.quant is not None for t in (*ins, *outs)):
            raise unsupported(op, ins, outs, "norm operands carry no quant descriptor")
        x = ins[0].array.astype(np.float64)
        check_shape(op, ins, outs, x.shape, outs[0])
        ax = resolve_axis(op, ins, outs, attrs.get("axis", "last"), x.ndim)
        axes = tuple(range(ax, x.ndim))
        eps = float(attrs.get("epsilon", 1e-5))
        with np.errstate(all="ignore"):
            if op == "layernorm":
                mean = np.mean(x, axis=axes, keepdims=True)
                d = x - mean
                var = np.mean(d * d, axis=axes, keepdims=True)
                v = d / np.sqrt(var + eps)
            else:
                ms = np.mean(x * x, axis=axes, keepdims=True)
                v = x / np.sqrt(ms + eps)
            try:
                if len(ins) > 1:
                    v = v * ins[1].array.astype(np.float64)
                if len(ins) > 2:
                    v = v + ins[2].array.astype(np.float64)
            except ValueError:
                raise unsupported(
                    op, ins, outs, f"scale/bias must broadcast to x.shape[{ax}:]"
                ) from None
        check_shape(op, ins, outs, v.shape, outs[0])
        return [to_float_out(v, outs[0].elem)]

    return kernel


def softmax_kernel(op: str) -> Kernel:
    def kernel(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
        check_count(op, ins, outs, (1, 1))
        same_types(op, ins, outs, SOFTMAX_T)
        if ins[0].quant is not None or outs[0].quant is not None:
            raise unsupported(op, ins, outs, "softmax operands carry no quant descriptor")
        x = ins[0].array.astype(np.float64)
        check_shape(op, ins, outs, x.shape, outs[0])
        ax = resolve_axis(op, ins, outs, attrs.get("axis", "last"), x.ndim)
        with np.errstate(all="ignore"):
            d = x - np.max(x, axis=ax, keepdims=True)
            e = np.exp(d)
            s = np.sum(e, axis=ax, keepdims=True)
            v = e / s if op == "softmax" else d - np.log(s)
        return [to_float_out(v, outs[0].elem)]

    return kernel
