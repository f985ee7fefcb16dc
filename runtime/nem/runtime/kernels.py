"""Reference compute kernels: one vectorized numpy function per registry opcode.

The engine calls `KERNELS[opcode](inputs, outputs, attrs)`:

* `inputs` / `outputs` are `Tensor`s (array with the region's logical shape and
  dtype, the spec element name, the region's `Quant` or None); outputs carry
  their current contents (used for shape, dtype and quant only);
* `attrs` are Python values with the registry defaults applied (`axis` may be
  the string "last", `accum_type` may be None = the family's accum);
* the kernel returns one array per output, with the output's exact shape and
  dtype (i4 as int8 values in [-8, 7]).

Numeric semantics are decisions D-NUM-* in docs/spec-decisions.md ("Numeric
semantics"); each kernel names the ones it implements.  Anything outside
them raises `NotSupported` (naming the opcode and the operand types), and
data-dependent failures raise `NumericError`; both are `KernelError`s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np

from nem.dialect.registry import OpcodeSpec, opcodes
from nem.runtime.kernel_support import (
    ALL_T,
    ELTWISE_T,
    Attrs,
    BoundKernel,
    ElementOp,
    Kernel,
    Preparable,
    Tensor,
    check_count,
    check_shape,
    numeric_kernel,
    signature,
    unsupported,
)
from nem.runtime.kernels_linear import conv_kernel, gemm_kernel, pool_kernel
from nem.runtime.kernels_reduce import arg_kernel, norm_kernel, reduce_kernel, softmax_kernel
from nem.runtime.kernels_views import concat, gather, pad, reshape, slice_, split, transpose
from nem.runtime.numerics import (
    KernelError,
    NotSupported,
    NumericError,
    f64_to_float_exact,
    int_range,
    is_float,
    is_int,
    saturate_float,
    saturate_int,
    to_float_out,
    trunc_div_int,
    wrap_int,
)
from nem.runtime.quant import Quant, dequantize, requantize, same

__all__ = ["KERNELS", "Kernel", "KernelError", "NotSupported", "NumericError", "Quant", "Tensor"]


# --------------------------------------------------------------------------
# elementwise (D-NUM-FLOAT, D-NUM-INT, D-NUM-QELT, D-NUM-GELU)

_GELU_C = math.sqrt(2.0 / math.pi)


def _f_relu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.where(np.isnan(x), x, 0.0))


def _f_gelu(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + 0.044715 * (x * x * x))))
    return out


_ERF = np.vectorize(math.erf, otypes=[np.float64])  # numpy has no erf; libm's, per element


def _f_gelu_erf(x: np.ndarray) -> np.ndarray:
    """`gelu approximate="none"` (D-NUM-GELU-ERF): 0.5 x (1 + erf(x / sqrt 2))."""
    out: np.ndarray = 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)))
    return out


def _i_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if (y == 0).any():
        raise NumericError("div: integer division by zero")
    return trunc_div_int(x, y)


_UNARY: dict[str, tuple[ElementOp, ElementOp | None]] = {
    "relu": (_f_relu, lambda x: np.maximum(x, 0)),
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), None),
    "tanh": (np.tanh, None),
    "exp": (np.exp, None),
    "log": (np.log, None),
    "sqrt": (np.sqrt, None),
    "abs": (np.abs, np.abs),
    "neg": (np.negative, np.negative),
    "gelu": (_f_gelu, None),
    "silu": (lambda x: x / (1.0 + np.exp(-x)), None),
}

_BINARY: dict[str, tuple[ElementOp, ElementOp | None]] = {
    "add": (np.add, np.add),
    "sub": (np.subtract, np.subtract),
    "mul": (np.multiply, np.multiply),
    "div": (np.divide, _i_div),
    "min": (np.minimum, np.minimum),
    "max": (np.maximum, np.maximum),
    "pow": (np.power, None),
}


# Ops whose D-NUM-FLOAT result on f32 operands equals evaluating them in f32:
# + - * / sqrt are correctly rounded either way (f64 has 53 >= 2 * 24 + 2 bits,
# so rounding the f64 result to f32 is innocuous), max/min/relu/abs/neg are
# exact.  Unquantized all-f32 tasks of these ops skip the f64 round trip.
_EXACT_IN_F32 = frozenset({"add", "sub", "mul", "div", "sqrt", "min", "max", "relu", "abs", "neg"})


def _relu_f32_into(x: np.ndarray, out: np.ndarray) -> None:
    """relu in f32 into `out`: max(x, 0), then + 0 turns a -0 into +0; a NaN
    stays a NaN (quieted, as the f64 formula's round trip quiets it)."""
    np.maximum(x, np.float32(0), out=out)
    np.add(out, np.float32(0), out=out)


# the f32 form of each op of _EXACT_IN_F32 that writes into `out=` (D-RT-REPLAY)
_F32_INTO: dict[str, Callable[..., object]] = {
    "relu": _relu_f32_into,
    **{
        op: f
        for op, (f, _) in (*_UNARY.items(), *_BINARY.items())
        if op in _EXACT_IN_F32 and isinstance(f, np.ufunc)
    },
}


def _f32_into(into: Callable[..., object], arrays: list[np.ndarray], out: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        into(*arrays, out=out)


def _eltwise(op: str, fop: ElementOp, iop: ElementOp | None, arity: int) -> Kernel:
    into = _F32_INTO.get(op)

    def checked(ins: list[Tensor], outs: list[Tensor]) -> bool:
        """Check the operands; True when the f32 fast path applies."""
        check_count(op, ins, outs, (arity, arity))
        shapes = [t.array.shape for t in ins]
        try:
            shape = shapes[0] if shapes.count(shapes[0]) == arity else np.broadcast_shapes(*shapes)
        except ValueError:
            raise unsupported(op, ins, outs, "operand shapes do not broadcast") from None
        check_shape(op, ins, outs, shape, outs[0])
        return into is not None and all(t.elem == "f32" and t.quant is None for t in (*ins, *outs))

    def kernel(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
        if checked(ins, outs):
            assert into is not None  # `checked` is True only with an f32 form
            out = np.empty(outs[0].array.shape, np.float32)
            _f32_into(into, [t.array for t in ins], out)
            return [out]
        return [numeric_kernel(op, ins, outs[0], fop, iop)]

    def prepare(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> BoundKernel | None:
        if not checked(ins, outs):
            return None
        assert into is not None  # as in `kernel`
        return partial(_f32_into, into, [t.array for t in ins], outs[0].array)

    return Preparable(kernel, prepare)


def _leaky_relu(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    check_count("leaky_relu", ins, outs, (1, 1))
    check_shape("leaky_relu", ins, outs, ins[0].array.shape, outs[0])
    alpha = float(attrs.get("alpha", 0.01))
    return [
        numeric_kernel(
            "leaky_relu",
            ins,
            outs[0],
            lambda x: np.where(x < 0, alpha * x, x),
            lambda x: np.where(x < 0, np.rint(x * alpha), x),
        )
    ]


def _clamp_checked(
    ins: list[Tensor], outs: list[Tensor], attrs: Attrs
) -> tuple[np.number, np.number] | None:
    """Check a clamp's operands; its bounds as scalars of the operand's dtype
    when it is an unquantized f32 or integer clamp that numpy evaluates in the
    operand's own type with the formula's bits (max and min are exact in f32
    and rounding the bounds to f32 first is innocuous, rounding being monotone,
    D-NUM-FLOAT; integer bounds saturated to the type's range give the
    saturated int64 result, D-NUM-INT), else None (the general path)."""
    op = "clamp"
    check_count(op, ins, outs, (1, 1))
    check_shape(op, ins, outs, ins[0].array.shape, outs[0])
    lo, hi = attrs.get("min"), attrs.get("max")
    if lo is None or hi is None:
        raise unsupported(op, ins, outs, "clamp needs min and max")
    x, y = ins[0], outs[0]
    if x.elem != y.elem or x.quant is not None or y.quant is not None:
        return None
    if x.elem == "f32":
        with np.errstate(over="ignore"):
            return np.float32(float(lo)), np.float32(float(hi))
    if (
        not is_int(x.elem)
        or x.elem not in ELTWISE_T
        or not (math.isfinite(float(lo)) and math.isfinite(float(hi)))
        or float(lo) != int(lo)
        or float(hi) != int(hi)
    ):
        return None
    t_lo, t_hi = int_range(x.elem)
    sat = x.array.dtype.type
    return sat(min(max(int(lo), t_lo), t_hi)), sat(min(max(int(hi), t_lo), t_hi))


def _clamp_into(x: np.ndarray, lo: np.number, hi: np.number, out: np.ndarray) -> None:
    """min(max(x, lo), hi) into `out`, in x's dtype (bounds from _clamp_checked);
    on floats with errors ignored (IEEE results, D-NUM-FLOAT)."""
    if out.dtype.kind == "f":
        with np.errstate(all="ignore"):
            np.maximum(x, lo, out=out)
            np.minimum(out, hi, out=out)
            np.multiply(out, out.dtype.type(1), out=out)  # quiets a NaN as f64 does; exact
    elif lo >= hi:
        np.copyto(out, hi)  # every element: max(x, lo) >= lo >= hi
    else:
        np.clip(x, lo, hi, out=out)


def _clamp(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "clamp"
    fast = _clamp_checked(ins, outs, attrs)
    if fast is not None:
        out = np.empty_like(outs[0].array)
        _clamp_into(ins[0].array, *fast, out)
        return [out]
    lo, hi = attrs["min"], attrs["max"]  # present: `_clamp_checked` checked them

    def iop(x: np.ndarray) -> np.ndarray:
        if float(lo) != int(lo) or float(hi) != int(hi):
            raise unsupported(
                op,
                ins,
                outs,
                f"clamp bounds {lo}, {hi} on an unquantized integer type must be integers",
            )
        out: np.ndarray = np.minimum(np.maximum(x, int(lo)), int(hi))
        return out

    return [
        numeric_kernel(
            op, ins, outs[0], lambda x: np.minimum(np.maximum(x, float(lo)), float(hi)), iop
        )
    ]


def _prepare_clamp(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> BoundKernel | None:
    fast = _clamp_checked(ins, outs, attrs)
    if fast is None:
        return None
    return partial(_clamp_into, ins[0].array, *fast, outs[0].array)


# --------------------------------------------------------------------------
# conversions (D-NUM-CAST, D-NUM-QUANT)


def _cast(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "cast"
    check_count(op, ins, outs, (1, 1))
    s_t, d_t = ins[0], outs[0]
    if s_t.elem not in ALL_T or d_t.elem not in ALL_T:
        raise unsupported(op, ins, outs, "unknown element type")
    if not same(s_t.quant, d_t.quant):
        raise unsupported(
            op,
            ins,
            outs,
            "cast converts stored values and cannot change a quant "
            "descriptor; use quantize/dequantize",
        )
    check_shape(op, ins, outs, s_t.array.shape, d_t)
    sat = bool(int(attrs.get("saturate", 1)))
    src, dst = s_t.elem, d_t.elem
    if is_int(src):
        v = s_t.array.astype(np.int64)
        if is_int(dst):
            return [saturate_int(v, dst) if sat else wrap_int(v, dst)]
        r = f64_to_float_exact(v.astype(np.float64), dst)
        return [saturate_float(r, np.ones(v.shape, bool), dst) if sat else r]
    v = s_t.array.astype(np.float64)
    if is_float(dst):
        r = f64_to_float_exact(v, dst)
        return [saturate_float(r, np.isfinite(v), dst) if sat else r]
    if sat:
        r = np.rint(np.where(np.isnan(v), 0.0, v))
        return [saturate_int(np.clip(r, *int_range(dst)), dst)]
    if not np.isfinite(v).all():
        raise NumericError(f"cast: NaN or infinity cannot convert to {dst} with saturate=0")
    return [wrap_int(np.rint(v), dst)]


def _quantize(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "quantize"
    check_count(op, ins, outs, (1, 1))
    s_t, d_t = ins[0], outs[0]
    if s_t.elem not in ("f16", "f32") or d_t.elem != "i8":
        raise unsupported(op, ins, outs, "quantize is f16/f32 -> i8 (family quantize)")
    if d_t.quant is None or s_t.quant is not None:
        raise unsupported(op, ins, outs, "quantize needs a quant descriptor on dst only (QUANT-10)")
    check_shape(op, ins, outs, s_t.array.shape, d_t)
    v = s_t.array.astype(np.float64)
    if np.isnan(v).any():
        raise NumericError("quantize: NaN input cannot be quantized")
    return [saturate_int(requantize(v, d_t.quant, v.shape, op), "i8")]


def _dequantize(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    op = "dequantize"
    check_count(op, ins, outs, (1, 1))
    s_t, d_t = ins[0], outs[0]
    if s_t.elem != "i8" or d_t.elem not in ("f16", "f32"):
        raise unsupported(op, ins, outs, "dequantize is i8 -> f16/f32 (family dequantize)")
    if s_t.quant is None or d_t.quant is not None:
        raise unsupported(
            op, ins, outs, "dequantize needs a quant descriptor on src only (QUANT-10)"
        )
    check_shape(op, ins, outs, s_t.array.shape, d_t)
    return [to_float_out(dequantize(s_t.array, s_t.quant, op), d_t.elem)]


# --------------------------------------------------------------------------
# escape hatch (D-NUM-COMPUTE)


def _compute(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
    name, args = _compute_op(ins, outs, attrs)
    try:
        return KERNELS[name](ins, outs, args)
    except NotSupported as e:
        raise NotSupported(f"compute op={name}: {e}", e.fix) from None


def _compute_op(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> tuple[str, Attrs]:
    """The registry opcode a `compute op=NAME` task runs and its attributes
    (defaults filled in); NotSupported for a name or attribute the registry
    does not have."""
    name = attrs.get("op")
    if name == "mlir.kernel":  # the lowering's escape hatch (D-LOW-ESCAPE, D-RT-MLIR-KERNEL)
        raise NotSupported(
            "compute op=mlir.kernel: an escape-hatch kernel runs in an "
            "interpreter's escape hatch (NemInterpreter(...).escape_hatch), "
            "not through the registry's kernels"
        )
    spec = opcodes().get(name) if isinstance(name, str) else None
    if spec is None or not isinstance(name, str) or name == "compute":
        raise NotSupported(
            f"compute op={name}: not a registry opcode; the reference runtime "
            f"runs only registry opcodes through compute ({signature(ins, outs)})"
        )
    args: Attrs = {}
    for aname, a in spec.attributes.items():
        if aname in attrs:
            args[aname] = attrs[aname]
        elif a.required:
            raise NotSupported(f"compute op={name}: missing attribute '{aname}'")
        else:
            args[aname] = None if a.default == "family_accum" else a.default
    extra = sorted(set(attrs) - set(spec.attributes) - {"op"})
    if extra:
        raise NotSupported(f"compute op={name}: unknown attribute(s) {', '.join(extra)}")
    return name, args


def _prepare_compute(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> BoundKernel | None:
    _compute_op(ins, outs, attrs)  # a wrong name is found when the task is bound (D-RT-PREPARE)
    return None


# --------------------------------------------------------------------------


def _kernel_for(spec: OpcodeSpec) -> Kernel:
    """The kernel of one registry opcode, chosen by its registry category (and,
    where a category holds several formulas, by its name)."""
    name, cat = spec.name, spec.category
    if cat == "elementwise":
        if name in _SPECIAL_ELTWISE:
            return _SPECIAL_ELTWISE[name]
        fop, iop = (_UNARY if len(spec.inputs) == 1 else _BINARY)[name]
        return _eltwise(name, fop, iop, len(spec.inputs))
    if cat == "linear_algebra":
        return gemm_kernel(name)
    if cat == "convolution":
        assert spec.spatial_rank is not None, name  # the registry gives every convolution one
        return conv_kernel(name, spec.spatial_rank, depthwise=name.startswith("depthwise"))
    if cat == "pooling":
        return pool_kernel(name)
    if cat == "reduction":
        return arg_kernel(name) if not spec.families else reduce_kernel(name)
    if cat == "normalization":
        return norm_kernel(name)
    if cat == "softmax":
        return softmax_kernel(name)
    return _BY_NAME[name]  # view, conversion, generic: one function each


def _gelu_forms() -> Preparable:
    """`gelu` by its `approximate` attribute (D-NUM-GELU, D-NUM-GELU-ERF)."""
    forms = {
        "tanh": _eltwise("gelu", _f_gelu, None, 1),
        "none": _eltwise("gelu", _f_gelu_erf, None, 1),
    }

    def form(attrs: dict[str, object]) -> Preparable:
        k = forms[str(attrs.get("approximate", "tanh"))]
        assert isinstance(k, Preparable)  # what _eltwise builds
        return k

    return Preparable(
        lambda ins, outs, attrs: form(attrs).kernel(ins, outs, attrs),
        lambda ins, outs, attrs: form(attrs).prepare(ins, outs, attrs),
    )


_SPECIAL_ELTWISE: dict[str, Kernel] = {
    "leaky_relu": _leaky_relu,
    "clamp": Preparable(_clamp, _prepare_clamp),
    "gelu": _gelu_forms(),
}
_BY_NAME: dict[str, Kernel] = {
    "transpose": transpose,
    "reshape": reshape,
    "slice": slice_,
    "concat": concat,
    "split": split,
    "pad": pad,
    "gather": gather,
    "cast": _cast,
    "quantize": _quantize,
    "dequantize": _dequantize,
    "compute": Preparable(_compute, _prepare_compute),
}

KERNELS: dict[str, Kernel] = {name: _kernel_for(spec) for name, spec in opcodes().items()}
"""One kernel per registry opcode, derived from the registry (D-NUM-KERNEL)."""
