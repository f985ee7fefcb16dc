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
from dataclasses import dataclass
from typing import Callable

import numpy as np

from nem.dialect.registry import OpcodeSpec, opcodes
from nem.runtime.numerics import (
    FLOAT_TYPES,
    INT_TYPES,
    KernelError,
    NotSupported,
    NumericError,
    div_rne_int,
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
from nem.runtime.quant import Quant, dequantize, expand, requantize, same

__all__ = ["KERNELS", "Kernel", "KernelError", "NotSupported", "NumericError", "Quant", "Tensor"]


@dataclass(frozen=True)
class Tensor:
    array: np.ndarray
    elem: str
    quant: Quant | None = None


Kernel = Callable[[list[Tensor], list[Tensor], dict[str, object]], list[np.ndarray]]



def _family_types(family: str) -> tuple[str, ...]:
    """The element types a one-parameter type family admits, read from the
    shipped catalog (devices/nem/devices/nem_baseline_1.0.nem)."""
    from nem.dialect.verifier import baseline_catalog

    (_, domain), = baseline_catalog().families[family].params
    return tuple(domain)


ELTWISE_T = _family_types("eltwise")
VIEW_T = _family_types("view")
REDUCE_T = _family_types("reduce")
POOL_T = _family_types("pool")
NORM_T = _family_types("norm")
SOFTMAX_T = _family_types("softmax")
ALL_T = INT_TYPES + FLOAT_TYPES
F64_EXACT = float(2 ** 53)


# --------------------------------------------------------------------------
# helpers

def _sig(ins: list[Tensor], outs: list[Tensor]) -> str:
    def one(t: Tensor) -> str:
        q = f"[{t.quant.kind}]" if t.quant is not None else ""
        return f"{t.elem}{q}{list(t.array.shape)}"
    return f"in {', '.join(one(t) for t in ins) or '-'} -> out {', '.join(one(t) for t in outs) or '-'}"


def _ns(op: str, ins: list[Tensor], outs: list[Tensor], why: str) -> NotSupported:
    return NotSupported(f"{op}: {why} ({_sig(ins, outs)})")


def _same_types(op: str, ins: list[Tensor], outs: list[Tensor], allowed: tuple[str, ...]) -> str:
    elems = {t.elem for t in (*ins, *outs)}
    if len(elems) != 1:
        raise _ns(op, ins, outs, "operands must share one element type (no implicit casts, TYPE-03)")
    (e,) = elems
    if e not in allowed:
        raise _ns(op, ins, outs, f"element type {e} is outside the opcode's family "
                  f"({', '.join(allowed)})")
    return e


def _count(op, ins, outs, n_in: tuple[int, int], n_out: tuple[int, int] = (1, 1)) -> None:
    if not (n_in[0] <= len(ins) <= n_in[1] and n_out[0] <= len(outs) <= n_out[1]):
        raise _ns(op, ins, outs, f"wrong operand count: {len(ins)} inputs, {len(outs)} outputs")


def _axis(op, ins, outs, axis, rank: int) -> int:
    if axis is None or axis == "last":
        return rank - 1
    if isinstance(axis, str) or not -rank <= int(axis) < rank:
        raise _ns(op, ins, outs, f"axis {axis!r} out of range for rank {rank}")
    return int(axis) % rank


def _shape_check(op, ins, outs, got: tuple[int, ...], out: Tensor) -> None:
    if tuple(got) != tuple(out.array.shape):
        raise _ns(op, ins, outs, f"result shape {list(got)} differs from the output region's "
                  f"shape {list(out.array.shape)}")


def _finish_int(v: np.ndarray, out: Tensor) -> np.ndarray:
    return saturate_int(v, out.elem)


def _requant_out(op, v: np.ndarray, out: Tensor) -> np.ndarray:
    """Real f64 values -> the output's stored integers (D-NUM-QELT)."""
    if np.isnan(v).any():
        raise NumericError(f"{op}: NaN result cannot be quantized to {out.elem}")
    return saturate_int(requantize(v, out.quant, out.array.shape, f"{op} output"), out.elem)


def _numeric(op: str, ins: list[Tensor], out: Tensor, fop, iop, *, allowed=ELTWISE_T,
             outs: list[Tensor] | None = None) -> np.ndarray:
    """Shared float / raw-integer / quantized-integer dispatch (D-NUM-FLOAT, D-NUM-INT,
    D-NUM-QELT).  fop works on f64 arrays, iop on int64 arrays (None: float-only op)."""
    outs = outs or [out]
    elem = _same_types(op, ins, outs, allowed)
    if is_float(elem):
        with np.errstate(all="ignore"):
            v = fop(*[t.array.astype(np.float64) for t in ins])
        return to_float_out(v, out.elem)
    quants = [t.quant for t in (*ins, *outs)]
    if all(q is None for q in quants):
        if iop is None:
            raise _ns(op, ins, outs, f"{op} is defined on float types and on quantized integers "
                      "only; this integer operand carries no quant descriptor")
        return _finish_int(iop(*[t.array.astype(np.int64) for t in ins]), out)
    if any(q is None for q in quants):
        raise _ns(op, ins, outs, "either every integer operand carries a quant descriptor or "
                  "none does (D-NUM-QELT)")
    real = [dequantize(t.array, t.quant, f"{op} input") for t in ins]
    with np.errstate(all="ignore"):
        v = fop(*real)
    return _requant_out(op, v, out)


# --------------------------------------------------------------------------
# elementwise (D-NUM-FLOAT, D-NUM-INT, D-NUM-QELT, D-NUM-GELU)

_GELU_C = math.sqrt(2.0 / math.pi)


def _f_relu(x):
    return np.where(x > 0, x, np.where(np.isnan(x), x, 0.0))


def _f_gelu(x):
    return 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + 0.044715 * (x * x * x))))


def _i_div(x, y):
    if (y == 0).any():
        raise NumericError("div: integer division by zero")
    return trunc_div_int(x, y)


_UNARY: dict[str, tuple] = {
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

_BINARY: dict[str, tuple] = {
    "add": (np.add, np.add),
    "sub": (np.subtract, np.subtract),
    "mul": (np.multiply, np.multiply),
    "div": (np.divide, _i_div),
    "min": (np.minimum, np.minimum),
    "max": (np.maximum, np.maximum),
    "pow": (np.power, None),
}


def _eltwise(op: str, fop, iop, arity: int) -> Kernel:
    def kernel(ins, outs, attrs):
        _count(op, ins, outs, (arity, arity))
        try:
            shape = np.broadcast_shapes(*[t.array.shape for t in ins])
        except ValueError:
            raise _ns(op, ins, outs, "operand shapes do not broadcast") from None
        _shape_check(op, ins, outs, shape, outs[0])
        return [_numeric(op, ins, outs[0], fop, iop)]
    return kernel


def _leaky_relu(ins, outs, attrs):
    _count("leaky_relu", ins, outs, (1, 1))
    _shape_check("leaky_relu", ins, outs, ins[0].array.shape, outs[0])
    alpha = float(attrs.get("alpha", 0.01))
    return [_numeric("leaky_relu", ins, outs[0], lambda x: np.where(x < 0, alpha * x, x),
                     lambda x: np.where(x < 0, np.rint(x * alpha), x))]


def _clamp(ins, outs, attrs):
    op = "clamp"
    _count(op, ins, outs, (1, 1))
    _shape_check(op, ins, outs, ins[0].array.shape, outs[0])
    lo, hi = attrs.get("min"), attrs.get("max")
    if lo is None or hi is None:
        raise _ns(op, ins, outs, "clamp needs min and max")

    def iop(x):
        if float(lo) != int(lo) or float(hi) != int(hi):
            raise _ns(op, ins, outs, f"clamp bounds {lo}, {hi} on an unquantized integer type "
                      "must be integers")
        return np.minimum(np.maximum(x, int(lo)), int(hi))

    return [_numeric(op, ins, outs[0],
                     lambda x: np.minimum(np.maximum(x, float(lo)), float(hi)), iop)]


# --------------------------------------------------------------------------
# gemm / conv (D-NUM-LINEAR-FLOAT, D-NUM-LINEAR-INT, D-NUM-INT4)

def _family(op, ins, outs) -> str:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    y = outs[0]
    if x.elem in FLOAT_TYPES and w.elem == x.elem and y.elem == x.elem and \
            (b is None or b.elem == x.elem):
        if any(t.quant is not None for t in (*ins, *outs)):
            raise _ns(op, ins, outs, "float families carry no quant descriptor (QUANT-09)")
        return "float"
    if x.elem == "i8" and w.elem in ("i8", "i4") and (b is None or b.elem == "i32"):
        if (w.elem == "i8" and y.elem in ("i8", "i16")) or (w.elem == "i4" and y.elem == "i8"):
            return "int8" if w.elem == "i8" else "int4"
    raise _ns(op, ins, outs, "no type family matches (float: X, W, Y, B all f16/bf16/f32; "
              "int8: i8 x i8 -> i8/i16 + i32 bias; int4: i8 x i4 -> i8 + i32 bias)")


def _check_accum(op, ins, outs, fam: str, accum) -> None:
    want = "f32" if fam == "float" else "i32"
    if accum not in (None, want):
        raise _ns(op, ins, outs, f"accum_type={accum} is not supported; the {fam} family "
                  f"accumulates in {want}")


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact int64 matmul: through f64 BLAS when every partial sum is below 2^53."""
    bound = (float(np.abs(a).max(initial=0)) * float(np.abs(b).max(initial=0))
             * max(a.shape[-1], 1))
    if bound < F64_EXACT:
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    return np.matmul(a, b)


def _int_linear(op, ins, outs, xc, wc, groups, prod, y_shape):
    """Integer path shared by gemm and conv.

    xc, wc: zero-point-centred int64 operands; groups: list of (reduction slice or None,
    weight scale broadcastable to Y); prod(xc, wc, sl) -> exact int64 accumulator."""
    x, y = ins[0], outs[0]
    bias = ins[2] if len(ins) > 2 else None
    sx, _ = expand(x.quant, x.array.shape, f"{op} input")
    i32lo, i32hi = int_range("i32")
    if bias is not None and bias.quant is None and len(groups) != 1:
        raise _ns(op, ins, outs, "with per-group weights the i32 bias needs its own quant "
                  "descriptor (there is no single weight scale to share)")
    accs = []
    for sl, sw in groups:
        acc = prod(xc, wc, sl)
        if bias is not None and bias.quant is None:
            acc = acc + bias.array.astype(np.int64)
        if acc.size and (acc.min() < i32lo or acc.max() > i32hi):
            raise NumericError(f"{op}: i32 accumulator overflow (range [{acc.min()}, {acc.max()}]"
                               f"; {_sig(ins, outs)})")
        accs.append((acc, sw))
    _shape_check(op, ins, outs, accs[0][0].shape, y)
    if y.quant is None:
        if len(groups) != 1 or (bias is not None and bias.quant is not None):
            raise _ns(op, ins, outs, "the output needs a quant descriptor here (per-group "
                      "weights or a quantized bias)")
        return [saturate_int(accs[0][0], y.elem)]
    sy, zy = expand(y.quant, y_shape, f"{op} output")
    v = np.zeros(y_shape, dtype=np.float64)
    for acc, sw in accs:
        v = v + acc.astype(np.float64) * ((sx * sw) / sy)
    if bias is not None and bias.quant is not None:
        v = v + dequantize(bias.array, bias.quant, f"{op} bias") / sy
    return [saturate_int(np.rint(v) + zy.astype(np.float64), y.elem)]


def _weight_groups(op, ins, outs, w: Tensor, red_axis: int, out_axis: int,
                   to_out_vec) -> tuple[np.ndarray, list]:
    """Centre the weights and split them into reduction groups (D-NUM-INT4).

    Returns (wc in the stored layout, [(slice along red_axis or None, scale)])."""
    q = w.quant
    shape = w.array.shape
    sw, zw = expand(q, shape, f"{op} weight")
    wc = w.array.astype(np.int64) - zw
    if q.kind == "per_tensor":
        return wc, [(None, sw)]
    if q.axis == out_axis:
        return wc, [(None, to_out_vec(np.broadcast_to(sw, shape)))]
    if q.axis == red_axis:
        size = 1 if q.kind == "per_channel" else q.group_size
        scales = np.asarray(q.scales, dtype=np.float64)
        dim = shape[red_axis]
        return wc, [(slice(g * size, min((g + 1) * size, dim)), scales[g])
                    for g in range(scales.size)]
    raise _ns(op, ins, outs, f"weight quant along axis {q.axis} is not supported (use the "
              f"output-channel axis {out_axis} or the reduction axis {red_axis})")


def _check_x_quant(op, ins, outs):
    q = ins[0].quant
    if q is None or ins[1].quant is None:
        raise _ns(op, ins, outs, "integer families need quant descriptors on the input and the "
                  "weight (QUANT-07/08)")
    if q.kind != "per_tensor":
        raise _ns(op, ins, outs, "the activation must be quantized per_tensor")


def _gemm_kernel(op: str) -> Kernel:
    def kernel(ins, outs, attrs):
        _count(op, ins, outs, (2, 3))
        fam = _family(op, ins, outs)
        _check_accum(op, ins, outs, fam, attrs.get("accum_type"))
        a_t, b_t = ins[0], ins[1]
        if a_t.array.ndim < 2 or b_t.array.ndim < 2:
            raise _ns(op, ins, outs, "gemm operands need rank >= 2")
        ta, tb = int(attrs.get("trans_a", 0) or 0), int(attrs.get("trans_b", 0) or 0)
        a = np.swapaxes(a_t.array, -1, -2) if ta else a_t.array
        y = outs[0]
        if a.shape[-1] != (b_t.array.shape[-1] if tb else b_t.array.shape[-2]):
            raise _ns(op, ins, outs, "inner dimensions differ")
        if fam == "float":
            b = np.swapaxes(b_t.array, -1, -2) if tb else b_t.array
            acc = np.matmul(a.astype(np.float64), b.astype(np.float64))
            if len(ins) > 2:
                acc = acc + ins[2].array.astype(np.float64)
            _shape_check(op, ins, outs, acc.shape, y)
            return [to_float_out(acc, y.elem)]
        _check_x_quant(op, ins, outs)
        _, zx = expand(a_t.quant, a_t.array.shape, f"{op} input")
        xc = (a_t.array.astype(np.int64) - zx)
        xc = np.swapaxes(xc, -1, -2) if ta else xc
        rb = b_t.array.ndim
        red_axis, out_axis = (rb - 1, rb - 2) if tb else (rb - 2, rb - 1)
        wc, groups = _weight_groups(op, ins, outs, b_t, red_axis, out_axis,
                                    lambda s: (np.swapaxes(s, -1, -2) if tb else s)[..., :1, :]
                                    .reshape(s.shape[:-2] + (1, -1)))
        wc = np.swapaxes(wc, -1, -2) if tb else wc

        def prod(xc, wc, sl):
            if sl is None:
                return _dot(xc, wc)
            return _dot(xc[..., sl], wc[..., sl, :])

        return _int_linear(op, ins, outs, xc, wc, groups, prod, y.array.shape)
    return kernel


def _conv_spatial(op, ins, outs, x_shape, k_shape, attrs, nsp):
    pads = list(attrs.get("pads") or [0] * 2 * nsp)
    strides = list(attrs.get("strides") or [1] * nsp)
    dil = list(attrs.get("dilations") or [1] * nsp)
    if len(pads) != 2 * nsp or len(strides) != nsp or len(dil) != nsp:
        raise _ns(op, ins, outs, f"needs {2 * nsp} pads, {nsp} strides, {nsp} dilations; got "
                  f"pads={pads} strides={strides} dilations={dil}")
    if min(pads, default=0) < 0 or min(strides) < 1 or min(dil) < 1:
        raise _ns(op, ins, outs, "pads must be >= 0, strides and dilations >= 1")
    out_sp = []
    for i in range(nsp):
        span = x_shape[1 + i] + pads[i] + pads[nsp + i] - (dil[i] * (k_shape[i] - 1) + 1)
        if span < 0:
            raise _ns(op, ins, outs, "the window does not fit the padded input")
        out_sp.append(span // strides[i] + 1)
    return pads, strides, dil, out_sp


def _windows(xp: np.ndarray, k_shape, strides, dil, out_sp):
    """Yield (kernel offset, strided view [N, *out_sp, C]) for every kernel position."""
    nsp = len(out_sp)
    for offs in np.ndindex(*k_shape):
        sl = [slice(None)]
        for i in range(nsp):
            start = offs[i] * dil[i]
            sl.append(slice(start, start + strides[i] * (out_sp[i] - 1) + 1, strides[i]))
        sl.append(slice(None))
        yield offs, xp[tuple(sl)]


def _conv_sum(xp, w, strides, dil, out_sp, groups, dot):
    """sum over kernel offsets of window @ w[offset] with channel groups; w is
    [*K, cin_g, Cout], xp is padded [N, *S, Cin]."""
    k_shape = w.shape[:-2]
    cin_g, cout = w.shape[-2], w.shape[-1]
    cout_g = cout // groups
    acc = None
    for offs, win in _windows(xp, k_shape, strides, dil, out_sp):
        wk = w[offs]
        if groups == 1:
            part = dot(win, wk)
        else:
            lead = win.shape[:-1]
            pg = win.reshape(-1, groups, cin_g).transpose(1, 0, 2)
            wg = wk.reshape(cin_g, groups, cout_g).transpose(1, 0, 2)
            part = dot(pg, wg).transpose(1, 0, 2).reshape(lead + (cout,))
        acc = part if acc is None else acc + part
    return acc


def _conv_kernel(op: str, nsp: int, depthwise: bool = False) -> Kernel:
    def kernel(ins, outs, attrs):
        _count(op, ins, outs, (2, 3))
        fam = _family(op, ins, outs)
        _check_accum(op, ins, outs, fam, attrs.get("accum_type"))
        x_t, w_t, y = ins[0], ins[1], outs[0]
        rank = nsp + 2
        if x_t.array.ndim != rank or w_t.array.ndim != rank:
            raise _ns(op, ins, outs, f"input and weight must have rank {rank} (N{'S' * nsp}C / "
                      f"{'K' * nsp}IO, D-CONV-LAYOUT)")
        cin = x_t.array.shape[-1]
        k_shape = w_t.array.shape[:nsp]
        groups = int(attrs.get("groups", 1) or 1)
        if depthwise:
            if w_t.array.shape[-2] != cin or groups not in (1, cin):
                raise _ns(op, ins, outs, "depthwise weights are [Kh, Kw, C, multiplier] with C "
                          "the input channels; groups must be 1 or C")
            groups = cin
            cout = cin * w_t.array.shape[-1]
            def to_grouped(w: np.ndarray) -> np.ndarray:
                return w.reshape(k_shape + (1, cout))   # channel c*mult + m
        else:
            if groups < 1 or cin != w_t.array.shape[-2] * groups or w_t.array.shape[-1] % groups:
                raise _ns(op, ins, outs, f"Cin={cin} must equal weight I x groups={groups} and "
                          "Cout must divide by groups")
            cout = w_t.array.shape[-1]
            def to_grouped(w: np.ndarray) -> np.ndarray:
                return w
        pads, strides, dil, out_sp = _conv_spatial(op, ins, outs, x_t.array.shape, k_shape,
                                                   attrs, nsp)
        y_shape = (x_t.array.shape[0], *out_sp, cout)
        _shape_check(op, ins, outs, y_shape, y)
        padw = [(0, 0)] + [(pads[i], pads[nsp + i]) for i in range(nsp)] + [(0, 0)]
        if fam == "float":
            xp = np.pad(x_t.array.astype(np.float64), padw)
            w = to_grouped(w_t.array.astype(np.float64))
            acc = _conv_sum(xp, w, strides, dil, out_sp, groups, np.matmul)
            if len(ins) > 2:
                acc = acc + ins[2].array.astype(np.float64)
            return [to_float_out(acc, y.elem)]
        _check_x_quant(op, ins, outs)
        _, zx = expand(x_t.quant, x_t.array.shape, f"{op} input")
        xc = np.pad(x_t.array.astype(np.int64) - zx, padw)       # pads hold real zero
        if depthwise:
            # the weight's last two axes (C, multiplier) are both output-channel axes
            wq = w_t.quant
            sw, zw = expand(wq, w_t.array.shape, f"{op} weight")
            wc = w_t.array.astype(np.int64) - zw
            if wq.kind != "per_tensor" and wq.axis not in (rank - 2, rank - 1):
                raise _ns(op, ins, outs, f"depthwise weight quant along axis {wq.axis} is not "
                          "supported (use the C or multiplier axis)")
            sw_vec = sw if wq.kind == "per_tensor" else to_grouped(np.ascontiguousarray(
                np.broadcast_to(sw, w_t.array.shape)))[(0,) * nsp + (0,)]
            wgroups = [(None, sw_vec)]
        else:
            wc, wgroups = _weight_groups(
                op, ins, outs, w_t, rank - 2, rank - 1,
                lambda s: np.ascontiguousarray(s)[(0,) * nsp + (0,)])
        wc = to_grouped(wc)

        def prod(xc, wc, sl):
            if sl is not None:
                mask = np.zeros(wc.shape[-2], dtype=np.int64)
                mask[sl] = 1
                wc = wc * mask[:, None]
            return _conv_sum(xc, wc, strides, dil, out_sp, groups, _dot)

        return _int_linear(op, ins, outs, xc, wc, wgroups, prod, y_shape)
    return kernel


# --------------------------------------------------------------------------
# pooling (D-NUM-POOL)

def _pool_kernel(op: str) -> Kernel:
    def kernel(ins, outs, attrs):
        _count(op, ins, outs, (1, 1))
        x_t, y = ins[0], outs[0]
        elem = _same_types(op, ins, outs, POOL_T)
        ks = list(attrs.get("kernel_shape") or [])
        nsp = len(ks)
        if nsp == 0 or x_t.array.ndim != nsp + 2 or min(ks) < 1:
            raise _ns(op, ins, outs, f"kernel_shape {ks} does not fit a rank-{x_t.array.ndim} "
                      "N...C input")
        attrs2 = dict(attrs, dilations=[1] * nsp)
        pads, strides, _, out_sp = _conv_spatial(op, ins, outs, x_t.array.shape, ks, attrs2, nsp)
        _shape_check(op, ins, outs, (x_t.array.shape[0], *out_sp, x_t.array.shape[-1]), y)
        padw = [(0, 0)] + [(pads[i], pads[nsp + i]) for i in range(nsp)] + [(0, 0)]
        one = [1] * nsp
        valid = np.pad(np.ones(x_t.array.shape, dtype=np.int64), padw)
        count = sum(win for _, win in _windows(valid, ks, strides, one, out_sp))
        if (count == 0).any():
            raise _ns(op, ins, outs, "a pooling window lies entirely in the padding")

        def pool(x, fill):
            xp = np.pad(x, padw, constant_values=fill)
            wins = [win for _, win in _windows(xp, ks, strides, one, out_sp)]
            if op == "maxpool":
                return np.maximum.reduce(wins) if len(wins) > 1 else wins[0].copy()
            return sum(wins)

        def fop(x):
            r = pool(x, -np.inf if op == "maxpool" else 0.0)
            return r if op == "maxpool" else r / count

        def iop(x):
            r = pool(x, np.iinfo(np.int64).min if op == "maxpool" else 0)
            return r if op == "maxpool" else div_rne_int(r, count)

        if is_int(elem) and x_t.quant is not None and same(x_t.quant, y.quant) and \
                x_t.quant.kind == "per_tensor":
            # identical per-tensor descriptors: the integer path equals the real-domain one
            return [saturate_int(iop(x_t.array.astype(np.int64)), y.elem)]
        return [_numeric(op, ins, y, fop, iop, allowed=POOL_T)]
    return kernel


# --------------------------------------------------------------------------
# views (D-NUM-VIEW)

def _view_quant(op, ins, outs) -> None:
    qs = [t.quant for t in (*ins, *outs)]
    if all(q is None for q in qs):
        return
    if any(q is None for q in qs):
        raise _ns(op, ins, outs, "a view moves stored values: every operand must carry the same "
                  "quant descriptor, or none")
    q0 = qs[0]
    for q in qs[1:]:
        if q.kind != q0.kind or q.group_size != q0.group_size or \
                not np.array_equal(q.scales, q0.scales) or \
                not np.array_equal(q.zero_points, q0.zero_points):
            raise _ns(op, ins, outs, "a view cannot change the quant descriptor (QUANT-11)")


def _view(op, data_ins, outs):
    _same_types(op, data_ins, outs, VIEW_T)
    _view_quant(op, data_ins, outs)


def _out(op, ins, outs, arr: np.ndarray, out: Tensor) -> np.ndarray:
    _shape_check(op, ins, outs, arr.shape, out)
    return np.ascontiguousarray(arr).astype(out.array.dtype, copy=True)


def _transpose(ins, outs, attrs):
    op = "transpose"
    _count(op, ins, outs, (1, 1))
    _view(op, ins, outs)
    perm = list(attrs.get("perm") or [])
    if sorted(perm) != list(range(ins[0].array.ndim)):
        raise _ns(op, ins, outs, f"perm {perm} is not a permutation of the axes")
    return [_out(op, ins, outs, np.transpose(ins[0].array, perm), outs[0])]


def _reshape(ins, outs, attrs):
    op = "reshape"
    _count(op, ins, outs, (1, 1))
    _view(op, ins, outs)
    if ins[0].array.size != outs[0].array.size:
        raise _ns(op, ins, outs, "reshape must keep the element count (FAM-16)")
    return [_out(op, ins, outs, ins[0].array.reshape(outs[0].array.shape), outs[0])]


def _slice(ins, outs, attrs):
    op = "slice"
    _count(op, ins, outs, (1, 1))
    _view(op, ins, outs)
    x = ins[0].array
    starts, ends = list(attrs.get("starts") or []), list(attrs.get("ends") or [])
    if len(starts) != len(ends) or len(starts) > x.ndim:
        raise _ns(op, ins, outs, f"starts {starts} / ends {ends} do not fit rank {x.ndim}")
    sl = tuple(slice(s, e) for s, e in zip(starts, ends))
    return [_out(op, ins, outs, x[sl], outs[0])]


def _concat(ins, outs, attrs):
    op = "concat"
    _count(op, ins, outs, (1, 1 << 30))
    _view(op, ins, outs)
    ax = _axis(op, ins, outs, attrs.get("axis"), ins[0].array.ndim)
    try:
        r = np.concatenate([t.array for t in ins], axis=ax)
    except ValueError as e:
        raise _ns(op, ins, outs, f"shapes do not concatenate: {e}") from None
    return [_out(op, ins, outs, r, outs[0])]


def _split(ins, outs, attrs):
    op = "split"
    _count(op, ins, outs, (1, 1), (1, 1 << 30))
    _view(op, ins, outs)
    x = ins[0].array
    ax = _axis(op, ins, outs, attrs.get("axis"), x.ndim)
    sizes = [o.array.shape[ax] if o.array.ndim == x.ndim else -1 for o in outs]
    if -1 in sizes or sum(sizes) != x.shape[ax]:
        raise _ns(op, ins, outs, f"output sizes along axis {ax} must add up to {x.shape[ax]}")
    parts = np.split(x, np.cumsum(sizes)[:-1], axis=ax)
    return [_out(op, ins, outs, p, o) for p, o in zip(parts, outs)]


def _pad(ins, outs, attrs):
    op = "pad"
    _count(op, ins, outs, (1, 1))
    _view(op, ins, outs)
    x_t = ins[0]
    x = x_t.array
    pads = list(attrs.get("pads") or [])
    if len(pads) != 2 * x.ndim or min(pads, default=0) < 0:
        raise _ns(op, ins, outs, f"pads {pads} must be {2 * x.ndim} non-negative values "
                  "(begins then ends, D-PADS)")
    value = attrs.get("value", 0) or 0
    if is_float(x_t.elem):
        fill = to_float_out(np.float64(value), x_t.elem)
    elif x_t.quant is not None:
        if x_t.quant.kind != "per_tensor":
            raise _ns(op, ins, outs, "pad of a quantized tensor needs a per_tensor descriptor")
        fill = saturate_int(requantize(np.float64(value), x_t.quant, (), op), x_t.elem)
    else:
        lo, hi = int_range(x_t.elem)
        if float(value) != int(value) or not lo <= int(value) <= hi:
            raise _ns(op, ins, outs, f"pad value {value} is not a {x_t.elem} value")
        fill = int(value)
    padw = [(pads[i], pads[x.ndim + i]) for i in range(x.ndim)]
    return [_out(op, ins, outs, np.pad(x, padw, constant_values=fill), outs[0])]


def _gather(ins, outs, attrs):
    op = "gather"
    _count(op, ins, outs, (2, 2))
    x_t, idx_t = ins
    _view(op, [x_t], outs)
    if idx_t.elem not in ("i32", "i16", "i8", "u8", "u16", "u32") or idx_t.quant is not None:
        raise _ns(op, ins, outs, "indices must be unquantized i8/i16/i32/u8/u16/u32")
    ax = _axis(op, ins, outs, attrs.get("axis"), x_t.array.ndim)
    idx = idx_t.array.astype(np.int64)
    dim = x_t.array.shape[ax]
    if idx.size and (idx.min() < 0 or idx.max() >= dim):
        raise NumericError(f"gather: index out of range [0, {dim}) (got {idx.min()}..{idx.max()})")
    return [_out(op, ins, outs, np.take(x_t.array, idx, axis=ax), outs[0])]


# --------------------------------------------------------------------------
# reductions (D-NUM-REDUCE, D-ARGMAX-INDEX)

def _reduce_kernel(op: str) -> Kernel:
    fn = {"reduce_sum": np.sum, "reduce_max": np.max, "reduce_min": np.min}[op]

    def kernel(ins, outs, attrs):
        _count(op, ins, outs, (1, 1))
        x = ins[0].array
        axes = attrs.get("axes")
        axes = list(range(x.ndim)) if axes is None else list(axes)
        axes = tuple(sorted({_axis(op, ins, outs, a, x.ndim) for a in axes}))
        keep = bool(int(attrs.get("keepdims", 1)))
        if x.size == 0:
            raise _ns(op, ins, outs, "reduction of an empty tensor")
        shape = np.sum(np.zeros(x.shape, np.int8), axis=axes, keepdims=keep).shape
        y = outs[0]
        if tuple(y.array.shape) != tuple(shape) and not (shape == () and y.array.shape == (1,)):
            _shape_check(op, ins, outs, shape, y)

        def f(a):
            return fn(a, axis=axes, keepdims=keep).reshape(y.array.shape)

        return [_numeric(op, ins, y, f, f, allowed=REDUCE_T)]
    return kernel


def _arg_kernel(op: str) -> Kernel:
    fn = np.argmax if op == "argmax" else np.argmin

    def kernel(ins, outs, attrs):
        _count(op, ins, outs, (1, 1))
        x_t, y = ins[0], outs[0]
        if y.elem != "i32" or y.quant is not None:
            raise _ns(op, ins, outs, "indices are unquantized i32 (D-ARGMAX-INDEX)")
        if x_t.elem not in ALL_T:
            raise _ns(op, ins, outs, f"unknown element type {x_t.elem}")
        ax = _axis(op, ins, outs, attrs.get("axis"), x_t.array.ndim)
        if x_t.array.shape[ax] == 0:
            raise _ns(op, ins, outs, "argmax over an empty axis")
        if x_t.quant is not None:
            vals = dequantize(x_t.array, x_t.quant, op)
        elif is_float(x_t.elem):
            vals = x_t.array.astype(np.float64)
        else:
            vals = x_t.array.astype(np.int64)
        r = fn(vals, axis=ax, keepdims=bool(int(attrs.get("keepdims", 1))))
        if r.size != y.array.size:
            _shape_check(op, ins, outs, r.shape, y)
        return [r.reshape(y.array.shape).astype(np.int32)]
    return kernel


# --------------------------------------------------------------------------
# norms and softmax (D-NUM-NORM, D-NUM-SOFTMAX)

def _norm_kernel(op: str) -> Kernel:
    def kernel(ins, outs, attrs):
        _count(op, ins, outs, (1, 3))
        _same_types(op, ins, outs, NORM_T)
        if any(t.quant is not None for t in (*ins, *outs)):
            raise _ns(op, ins, outs, "norm operands carry no quant descriptor")
        x = ins[0].array.astype(np.float64)
        _shape_check(op, ins, outs, x.shape, outs[0])
        ax = _axis(op, ins, outs, attrs.get("axis", "last"), x.ndim)
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
                raise _ns(op, ins, outs, f"scale/bias must broadcast to x.shape[{ax}:]") from None
        _shape_check(op, ins, outs, v.shape, outs[0])
        return [to_float_out(v, outs[0].elem)]
    return kernel


def _softmax_kernel(op: str) -> Kernel:
    def kernel(ins, outs, attrs):
        _count(op, ins, outs, (1, 1))
        _same_types(op, ins, outs, SOFTMAX_T)
        if ins[0].quant is not None or outs[0].quant is not None:
            raise _ns(op, ins, outs, "softmax operands carry no quant descriptor")
        x = ins[0].array.astype(np.float64)
        _shape_check(op, ins, outs, x.shape, outs[0])
        ax = _axis(op, ins, outs, attrs.get("axis", "last"), x.ndim)
        with np.errstate(all="ignore"):
            d = x - np.max(x, axis=ax, keepdims=True)
            e = np.exp(d)
            s = np.sum(e, axis=ax, keepdims=True)
            v = e / s if op == "softmax" else d - np.log(s)
        return [to_float_out(v, outs[0].elem)]
    return kernel


# --------------------------------------------------------------------------
# conversions (D-NUM-CAST, D-NUM-QUANT)

def _cast(ins, outs, attrs):
    op = "cast"
    _count(op, ins, outs, (1, 1))
    s_t, d_t = ins[0], outs[0]
    if s_t.elem not in ALL_T or d_t.elem not in ALL_T:
        raise _ns(op, ins, outs, "unknown element type")
    if not same(s_t.quant, d_t.quant):
        raise _ns(op, ins, outs, "cast converts stored values and cannot change a quant "
                  "descriptor; use quantize/dequantize")
    _shape_check(op, ins, outs, s_t.array.shape, d_t)
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


def _quantize(ins, outs, attrs):
    op = "quantize"
    _count(op, ins, outs, (1, 1))
    s_t, d_t = ins[0], outs[0]
    if s_t.elem not in ("f16", "f32") or d_t.elem != "i8":
        raise _ns(op, ins, outs, "quantize is f16/f32 -> i8 (family quantize)")
    if d_t.quant is None or s_t.quant is not None:
        raise _ns(op, ins, outs, "quantize needs a quant descriptor on dst only (QUANT-10)")
    _shape_check(op, ins, outs, s_t.array.shape, d_t)
    v = s_t.array.astype(np.float64)
    if np.isnan(v).any():
        raise NumericError("quantize: NaN input cannot be quantized")
    return [saturate_int(requantize(v, d_t.quant, v.shape, op), "i8")]


def _dequantize(ins, outs, attrs):
    op = "dequantize"
    _count(op, ins, outs, (1, 1))
    s_t, d_t = ins[0], outs[0]
    if s_t.elem != "i8" or d_t.elem not in ("f16", "f32"):
        raise _ns(op, ins, outs, "dequantize is i8 -> f16/f32 (family dequantize)")
    if s_t.quant is None or d_t.quant is not None:
        raise _ns(op, ins, outs, "dequantize needs a quant descriptor on src only (QUANT-10)")
    _shape_check(op, ins, outs, s_t.array.shape, d_t)
    return [to_float_out(dequantize(s_t.array, s_t.quant, op), d_t.elem)]


# --------------------------------------------------------------------------
# escape hatch (D-NUM-COMPUTE)

def _compute(ins, outs, attrs):
    name = attrs.get("op")
    if name == "mlir.kernel":   # the lowering's escape hatch (D-LOW-ESCAPE, D-RT-MLIR-KERNEL)
        from nem.runtime.escape_hatch import run_mlir_kernel
        return run_mlir_kernel(ins, outs, attrs)
    spec = opcodes().get(name) if isinstance(name, str) else None
    if spec is None or name == "compute":
        raise NotSupported(f"compute op={name}: not a registry opcode; the reference runtime "
                           f"runs only registry opcodes through compute ({_sig(ins, outs)})")
    args = {}
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
    try:
        return KERNELS[name](ins, outs, args)
    except NotSupported as e:
        raise NotSupported(f"compute op={name}: {e}") from None


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
        return _gemm_kernel(name)
    if cat == "convolution":
        return _conv_kernel(name, spec.spatial_rank, depthwise=name.startswith("depthwise"))
    if cat == "pooling":
        return _pool_kernel(name)
    if cat == "reduction":
        return _arg_kernel(name) if not spec.families else _reduce_kernel(name)
    if cat == "normalization":
        return _norm_kernel(name)
    if cat == "softmax":
        return _softmax_kernel(name)
    return _BY_NAME[name]    # view, conversion, generic: one function each


_SPECIAL_ELTWISE: dict[str, Kernel] = {"leaky_relu": _leaky_relu, "clamp": _clamp}
_BY_NAME: dict[str, Kernel] = {
    "transpose": _transpose, "reshape": _reshape, "slice": _slice, "concat": _concat,
    "split": _split, "pad": _pad, "gather": _gather,
    "cast": _cast, "quantize": _quantize, "dequantize": _dequantize, "compute": _compute,
}

KERNELS: dict[str, Kernel] = {name: _kernel_for(spec) for name, spec in opcodes().items()}
"""One kernel per registry opcode, derived from the registry (D-NUM-KERNEL)."""
