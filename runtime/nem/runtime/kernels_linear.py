"""Reference kernels of the linear opcodes: gemm/matmul, convolutions and
pooling (D-NUM-LINEAR-FLOAT, D-NUM-LINEAR-INT, D-NUM-INT4, D-NUM-POOL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple, cast

import numpy as np

from nem.runtime.kernel_support import (
    F64_EXACT,
    POOL_T,
    Attrs,
    BoundKernel,
    Kernel,
    Preparable,
    Tensor,
    check_count,
    check_shape,
    numeric_kernel,
    same_types,
    signature,
    unsupported,
)
from nem.runtime.numerics import (
    FLOAT_TYPES,
    NumericError,
    div_rne_int,
    int_range,
    is_int,
    saturate_int,
    to_float_out,
)
from nem.runtime.quant import Quant, dequantize, expand, same

WeightGroup = tuple[slice | None, np.ndarray]
"""A reduction group of the weights: its slice along the reduction axis (None:
all of it) and its scale, broadcastable to the output."""

Product = Callable[[np.ndarray, np.ndarray, slice | None], np.ndarray]
"""prod(xc, wc, sl): the exact int64 accumulator of one reduction group."""


def _family(op: str, ins: list[Tensor], outs: list[Tensor]) -> str:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    y = outs[0]
    if (
        x.elem in FLOAT_TYPES
        and w.elem == x.elem
        and y.elem == x.elem
        and (b is None or b.elem == x.elem)
    ):
        if any(t.quant is not None for t in (*ins, *outs)):
            raise unsupported(op, ins, outs, "float families carry no quant descriptor (QUANT-09)")
        return "float"
    if x.elem == "i8" and w.elem in ("i8", "i4") and (b is None or b.elem == "i32"):
        if (w.elem == "i8" and y.elem in ("i8", "i16")) or (w.elem == "i4" and y.elem == "i8"):
            return "int8" if w.elem == "i8" else "int4"
    raise unsupported(
        op,
        ins,
        outs,
        "no type family matches (float: X, W, Y, B all f16/bf16/f32; "
        "int8: i8 x i8 -> i8/i16 + i32 bias; int4: i8 x i4 -> i8 + i32 bias)",
    )


def _check_accum(op: str, ins: list[Tensor], outs: list[Tensor], fam: str, accum: object) -> None:
    want = "f32" if fam == "float" else "i32"
    if accum not in (None, want):
        raise unsupported(
            op,
            ins,
            outs,
            f"accum_type={accum} is not supported; the {fam} family accumulates in {want}",
        )


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact int64 matmul: through f64 BLAS when every partial sum is below 2^53."""
    bound = float(np.abs(a).max(initial=0)) * float(np.abs(b).max(initial=0)) * max(a.shape[-1], 1)
    out: np.ndarray
    if bound < F64_EXACT:
        out = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    else:
        out = np.matmul(a, b)
    return out


def _int_linear(
    op: str,
    ins: list[Tensor],
    outs: list[Tensor],
    xc: np.ndarray,
    wc: np.ndarray,
    groups: list[WeightGroup],
    prod: Product,
    y_shape: tuple[int, ...],
) -> list[np.ndarray]:
    """Integer path shared by gemm and conv.

    xc, wc: zero-point-centred int64 operands; groups: list of (reduction slice or None,
    weight scale broadcastable to Y); prod(xc, wc, sl) -> exact int64 accumulator."""
    x, y = ins[0], outs[0]
    bias = ins[2] if len(ins) > 2 else None
    assert x.quant is not None, op  # `_check_x_quant` ran
    sx, _ = expand(x.quant, x.array.shape, f"{op} input")
    i32lo, i32hi = int_range("i32")
    if bias is not None and bias.quant is None and len(groups) != 1:
        raise unsupported(
            op,
            ins,
            outs,
            "with per-group weights the i32 bias needs its own quant "
            "descriptor (there is no single weight scale to share)",
        )
    accs = []
    for sl, sw in groups:
        acc = prod(xc, wc, sl)
        if bias is not None and bias.quant is None:
            acc = acc + bias.array.astype(np.int64)
        if acc.size and (acc.min() < i32lo or acc.max() > i32hi):
            raise NumericError(
                f"{op}: i32 accumulator overflow (range [{acc.min()}, {acc.max()}]"
                f"; {signature(ins, outs)})"
            )
        accs.append((acc, sw))
    check_shape(op, ins, outs, accs[0][0].shape, y)
    if y.quant is None:
        if len(groups) != 1 or (bias is not None and bias.quant is not None):
            raise unsupported(
                op,
                ins,
                outs,
                "the output needs a quant descriptor here (per-group weights or a quantized bias)",
            )
        return [saturate_int(accs[0][0], y.elem)]
    sy, zy = expand(y.quant, y_shape, f"{op} output")
    v = np.zeros(y_shape, dtype=np.float64)
    for acc, sw in accs:
        v = v + acc.astype(np.float64) * ((sx * sw) / sy)
    if bias is not None and bias.quant is not None:
        v = v + dequantize(bias.array, bias.quant, f"{op} bias") / sy
    return [saturate_int(np.rint(v) + zy.astype(np.float64), y.elem)]


def _weight_groups(
    op: str,
    ins: list[Tensor],
    outs: list[Tensor],
    w: Tensor,
    red_axis: int,
    out_axis: int,
    to_out_vec: Callable[[np.ndarray], np.ndarray],
) -> tuple[np.ndarray, list[WeightGroup]]:
    """Centre the weights and split them into reduction groups (D-NUM-INT4).

    Returns (wc in the stored layout, [(slice along red_axis or None, scale)])."""
    q = w.quant
    assert q is not None, op  # called for quantized weights only
    shape = w.array.shape
    sw, zw = expand(q, shape, f"{op} weight")
    wc = w.array.astype(np.int64) - zw
    if q.kind == "per_tensor":
        return wc, [(None, sw)]
    if q.axis == out_axis:
        return wc, [(None, to_out_vec(np.broadcast_to(sw, shape)))]
    if q.axis == red_axis:
        size = 1 if q.kind == "per_channel" else q.group_size
        assert size is not None  # `expand` rejected a per_group quant without one
        scales = np.asarray(q.scales, dtype=np.float64)
        dim = shape[red_axis]
        return wc, [
            (slice(g * size, min((g + 1) * size, dim)), scales[g]) for g in range(scales.size)
        ]
    raise unsupported(
        op,
        ins,
        outs,
        f"weight quant along axis {q.axis} is not supported (use the "
        f"output-channel axis {out_axis} or the reduction axis {red_axis})",
    )


def _check_x_quant(op: str, ins: list[Tensor], outs: list[Tensor]) -> tuple[Quant, Quant]:
    """The input's and the weight's quant descriptors, which an integer family needs."""
    q, qw = ins[0].quant, ins[1].quant
    if q is None or qw is None:
        raise unsupported(
            op,
            ins,
            outs,
            "integer families need quant descriptors on the input and the weight (QUANT-07/08)",
        )
    if q.kind != "per_tensor":
        raise unsupported(op, ins, outs, "the activation must be quantized per_tensor")
    return q, qw


def gemm_kernel(op: str) -> Kernel:
    def kernel(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
        check_count(op, ins, outs, (2, 3))
        fam = _family(op, ins, outs)
        _check_accum(op, ins, outs, fam, attrs.get("accum_type"))
        a_t, b_t = ins[0], ins[1]
        if a_t.array.ndim < 2 or b_t.array.ndim < 2:
            raise unsupported(op, ins, outs, "gemm operands need rank >= 2")
        ta, tb = int(attrs.get("trans_a", 0) or 0), int(attrs.get("trans_b", 0) or 0)
        a = np.swapaxes(a_t.array, -1, -2) if ta else a_t.array
        y = outs[0]
        if a.shape[-1] != (b_t.array.shape[-1] if tb else b_t.array.shape[-2]):
            raise unsupported(op, ins, outs, "inner dimensions differ")
        if fam == "float":
            b = np.swapaxes(b_t.array, -1, -2) if tb else b_t.array
            acc = np.matmul(a.astype(np.float64), b.astype(np.float64))
            if len(ins) > 2:
                acc = acc + ins[2].array.astype(np.float64)
            check_shape(op, ins, outs, acc.shape, y)
            return [to_float_out(acc, y.elem)]
        qx, _ = _check_x_quant(op, ins, outs)
        _, zx = expand(qx, a_t.array.shape, f"{op} input")
        xc = a_t.array.astype(np.int64) - zx
        xc = np.swapaxes(xc, -1, -2) if ta else xc
        rb = b_t.array.ndim
        red_axis, out_axis = (rb - 1, rb - 2) if tb else (rb - 2, rb - 1)
        wc, groups = _weight_groups(
            op,
            ins,
            outs,
            b_t,
            red_axis,
            out_axis,
            lambda s: (np.swapaxes(s, -1, -2) if tb else s)[..., :1, :].reshape(
                s.shape[:-2] + (1, -1)
            ),
        )
        wc = np.swapaxes(wc, -1, -2) if tb else wc

        def prod(xc: np.ndarray, wc: np.ndarray, sl: slice | None) -> np.ndarray:
            if sl is None:
                return _dot(xc, wc)
            return _dot(xc[..., sl], wc[..., sl, :])

        return _int_linear(op, ins, outs, xc, wc, groups, prod, y.array.shape)

    return kernel


def _conv_spatial(
    op: str,
    ins: list[Tensor],
    outs: list[Tensor],
    x_shape: tuple[int, ...],
    k_shape: Sequence[int],
    attrs: Attrs,
    nsp: int,
) -> tuple[list[int], list[int], list[int], list[int]]:
    pads = list(attrs.get("pads") or [0] * 2 * nsp)
    strides = list(attrs.get("strides") or [1] * nsp)
    dil = list(attrs.get("dilations") or [1] * nsp)
    if len(pads) != 2 * nsp or len(strides) != nsp or len(dil) != nsp:
        raise unsupported(
            op,
            ins,
            outs,
            f"needs {2 * nsp} pads, {nsp} strides, {nsp} dilations; got "
            f"pads={pads} strides={strides} dilations={dil}",
        )
    if min(pads, default=0) < 0 or min(strides) < 1 or min(dil) < 1:
        raise unsupported(op, ins, outs, "pads must be >= 0, strides and dilations >= 1")
    out_sp = []
    for i in range(nsp):
        span = x_shape[1 + i] + pads[i] + pads[nsp + i] - (dil[i] * (k_shape[i] - 1) + 1)
        if span < 0:
            raise unsupported(op, ins, outs, "the window does not fit the padded input")
        out_sp.append(span // strides[i] + 1)
    return pads, strides, dil, out_sp


def _windows(
    xp: np.ndarray,
    k_shape: Sequence[int],
    strides: Sequence[int],
    dil: Sequence[int],
    out_sp: Sequence[int],
) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
    """Yield (kernel offset, strided view [N, *out_sp, C]) for every kernel position."""
    nsp = len(out_sp)
    for offs in np.ndindex(*k_shape):
        sl = [slice(None)]
        for i in range(nsp):
            start = offs[i] * dil[i]
            sl.append(slice(start, start + strides[i] * (out_sp[i] - 1) + 1, strides[i]))
        sl.append(slice(None))
        yield offs, xp[tuple(sl)]


def _windows_view(
    xp: np.ndarray,
    k_shape: Sequence[int],
    strides: Sequence[int],
    dil: Sequence[int],
    out_sp: Sequence[int],
) -> np.ndarray:
    """One strided view [N, *out_sp, *K, C] of `xp`: each output position's
    window (built directly: numpy's sliding_window_view costs tens of
    microseconds per tile)."""
    nsp = len(out_sp)
    st = xp.strides
    return np.lib.stride_tricks.as_strided(
        xp,
        (xp.shape[0], *out_sp, *k_shape, xp.shape[-1]),
        (
            st[0],
            *(st[1 + i] * strides[i] for i in range(nsp)),
            *(st[1 + i] * dil[i] for i in range(nsp)),
            st[-1],
        ),
        writeable=False,
    )


def _im2col(
    xp: np.ndarray,
    k_shape: Sequence[int],
    strides: Sequence[int],
    dil: Sequence[int],
    out_sp: Sequence[int],
) -> np.ndarray:
    """[N, *out_sp, prod(K) * C]: each output position's window, kernel offset
    major and channel minor (w's C order), copied from `_windows_view`."""
    return _windows_view(xp, k_shape, strides, dil, out_sp).reshape(xp.shape[0], *out_sp, -1)


def _padded_shape(shape: Sequence[int], padw: Sequence[tuple[int, int]]) -> list[int]:
    return [d + lo + hi for d, (lo, hi) in zip(shape, padw)]


def _interior(shape: Sequence[int], padw: Sequence[tuple[int, int]]) -> tuple[slice, ...]:
    return tuple(slice(lo, lo + d) for d, (lo, _) in zip(shape, padw))


def _conv_sum(
    xp: np.ndarray,
    w: np.ndarray,
    strides: Sequence[int],
    dil: Sequence[int],
    out_sp: Sequence[int],
    groups: int,
    dot: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> np.ndarray:
    """sum over kernel offsets of window @ w[offset] with channel groups; w is
    [*K, cin_g, Cout], xp is padded [N, *S, Cin]."""
    k_shape = w.shape[:-2]
    cin_g, cout = w.shape[-2], w.shape[-1]
    cout_g = cout // groups
    if groups == 1:
        # im2col: the windows side by side ([N, *out_sp, prod(K) * Cin], kernel
        # offset major as in w's C order) times w as one matrix: one BLAS call
        # instead of one per offset; the f64 sum's order is BLAS's either way
        # (D-NUM-LINEAR-FLOAT), integer sums are exact (D-NUM-LINEAR-INT)
        return dot(_im2col(xp, k_shape, strides, dil, out_sp), w.reshape(-1, cout))
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
    assert acc is not None  # np.ndindex yields at least one kernel offset
    return acc


class _ConvSetup(NamedTuple):
    """What `conv_kernel`'s checks of the operands and attributes give."""

    fam: str
    groups: int
    to_grouped: Callable[[np.ndarray], np.ndarray]
    strides: list[int]
    dil: list[int]
    out_sp: list[int]
    padw: list[tuple[int, int]]


def conv_kernel(op: str, nsp: int, depthwise: bool = False) -> Kernel:
    def setup(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> _ConvSetup:
        """The checks of the operands and attributes, and what they give."""
        check_count(op, ins, outs, (2, 3))
        fam = _family(op, ins, outs)
        _check_accum(op, ins, outs, fam, attrs.get("accum_type"))
        x_t, w_t, y = ins[0], ins[1], outs[0]
        rank = nsp + 2
        if x_t.array.ndim != rank or w_t.array.ndim != rank:
            raise unsupported(
                op,
                ins,
                outs,
                f"input and weight must have rank {rank} (N{'S' * nsp}C / "
                f"{'K' * nsp}IO, D-CONV-LAYOUT)",
            )
        cin = x_t.array.shape[-1]
        k_shape = w_t.array.shape[:nsp]
        groups = int(attrs.get("groups", 1) or 1)
        if depthwise:
            if w_t.array.shape[-2] != cin or groups not in (1, cin):
                raise unsupported(
                    op,
                    ins,
                    outs,
                    "depthwise weights are [Kh, Kw, C, multiplier] with C "
                    "the input channels; groups must be 1 or C",
                )
            groups = cin
            cout = cin * w_t.array.shape[-1]

            def to_grouped(w: np.ndarray) -> np.ndarray:
                return w.reshape(k_shape + (1, cout))  # channel c*mult + m
        else:
            if groups < 1 or cin != w_t.array.shape[-2] * groups or w_t.array.shape[-1] % groups:
                raise unsupported(
                    op,
                    ins,
                    outs,
                    f"Cin={cin} must equal weight I x groups={groups} and "
                    "Cout must divide by groups",
                )
            cout = w_t.array.shape[-1]

            def to_grouped(w: np.ndarray) -> np.ndarray:
                return w

        pads, strides, dil, out_sp = _conv_spatial(
            op, ins, outs, x_t.array.shape, k_shape, attrs, nsp
        )
        y_shape = (x_t.array.shape[0], *out_sp, cout)
        check_shape(op, ins, outs, y_shape, y)
        padw = [(0, 0)] + [(pads[i], pads[nsp + i]) for i in range(nsp)] + [(0, 0)]
        return _ConvSetup(fam, groups, to_grouped, strides, dil, out_sp, padw)

    def kernel(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
        fam, groups, to_grouped, strides, dil, out_sp, padw = setup(ins, outs, attrs)
        x_t, w_t, y = ins[0], ins[1], outs[0]
        rank, y_shape = nsp + 2, tuple(y.array.shape)

        def padded(a: np.ndarray) -> np.ndarray:  # np.pad with zeros, without its overhead
            if not any(lo or hi for lo, hi in padw):
                return a
            out = np.zeros(_padded_shape(a.shape, padw), a.dtype)
            out[_interior(a.shape, padw)] = a
            return out

        if fam == "float":
            xp = padded(x_t.array.astype(np.float64))
            w = to_grouped(w_t.array.astype(np.float64))
            acc = _conv_sum(xp, w, strides, dil, out_sp, groups, np.matmul)
            if len(ins) > 2:
                acc = acc + ins[2].array.astype(np.float64)
            return [to_float_out(acc, y.elem)]
        qx, wq = _check_x_quant(op, ins, outs)
        _, zx = expand(qx, x_t.array.shape, f"{op} input")
        xc = padded(x_t.array.astype(np.int64) - zx)  # pads hold real zero
        if depthwise:
            # the weight's last two axes (C, multiplier) are both output-channel axes
            sw, zw = expand(wq, w_t.array.shape, f"{op} weight")
            wc = w_t.array.astype(np.int64) - zw
            if wq.kind != "per_tensor" and wq.axis not in (rank - 2, rank - 1):
                raise unsupported(
                    op,
                    ins,
                    outs,
                    f"depthwise weight quant along axis {wq.axis} is not "
                    "supported (use the C or multiplier axis)",
                )
            sw_vec = (
                sw
                if wq.kind == "per_tensor"
                else to_grouped(np.ascontiguousarray(np.broadcast_to(sw, w_t.array.shape)))[
                    (0,) * nsp + (0,)
                ]
            )
            wgroups: list[WeightGroup] = [(None, sw_vec)]
        else:
            wc, wgroups = _weight_groups(
                op,
                ins,
                outs,
                w_t,
                rank - 2,
                rank - 1,
                lambda s: np.ascontiguousarray(s)[(0,) * nsp + (0,)],
            )
        wc = to_grouped(wc)

        def prod(xc: np.ndarray, wc: np.ndarray, sl: slice | None) -> np.ndarray:
            if sl is not None:
                mask = np.zeros(wc.shape[-2], dtype=np.int64)
                mask[sl] = 1
                wc = wc * mask[:, None]
            return _conv_sum(xc, wc, strides, dil, out_sp, groups, _dot)

        return _int_linear(op, ins, outs, xc, wc, wgroups, prod, y_shape)

    def prepare(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> BoundKernel | None:
        """A float convolution without groups bound to its operands: the
        padded f64 input (its zero border written once), its windows' view,
        the im2col matrix, the f64 weights and the f64 result are buffers kept
        across calls, written here so that their pages are committed before
        the first call (D-RT-PREPARE); the same BLAS call on the same values as `kernel`,
        without re-checking and re-allocating.  An f32 result is rounded
        straight into the output (one f64 -> f32 rounding, as `to_float_out`)."""
        fam, groups, _, strides, dil, out_sp, padw = setup(ins, outs, attrs)
        if fam != "float" or groups != 1 or depthwise:
            return None
        x, w = ins[0].array, ins[1].array
        bias = ins[2].array if len(ins) > 2 else None
        y = outs[0]
        xp = np.zeros(_padded_shape(x.shape, padw), np.float64)
        inner = xp[_interior(x.shape, padw)]
        wins = _windows_view(xp, w.shape[:nsp], strides, dil, out_sp)
        cols = np.empty(wins.shape, np.float64)
        cols_m = cols.reshape(x.shape[0], *out_sp, -1)
        w64 = np.empty(w.shape, np.float64)
        wm = w64.reshape(-1, w.shape[-1])
        acc = np.empty((x.shape[0], *out_sp, w.shape[-1]), np.float64)
        for scratch in (xp, cols, w64, acc):
            scratch.fill(0)

        def call() -> list[np.ndarray] | None:
            np.copyto(inner, x)
            np.copyto(w64, w)
            np.copyto(cols, wins)
            np.matmul(cols_m, wm, out=acc)
            if bias is not None:
                np.add(acc, bias, out=acc)
            if y.elem == "f32":
                with np.errstate(over="ignore", invalid="ignore"):
                    np.copyto(y.array, acc, casting="same_kind")
                return None
            return [to_float_out(acc, y.elem)]

        return call

    return Preparable(kernel, prepare)


# --------------------------------------------------------------------------
# pooling (D-NUM-POOL)


def pool_kernel(op: str) -> Kernel:
    def kernel(ins: list[Tensor], outs: list[Tensor], attrs: Attrs) -> list[np.ndarray]:
        check_count(op, ins, outs, (1, 1))
        x_t, y = ins[0], outs[0]
        elem = same_types(op, ins, outs, POOL_T)
        ks = list(attrs.get("kernel_shape") or [])
        nsp = len(ks)
        if nsp == 0 or x_t.array.ndim != nsp + 2 or min(ks) < 1:
            raise unsupported(
                op, ins, outs, f"kernel_shape {ks} does not fit a rank-{x_t.array.ndim} N...C input"
            )
        attrs2 = dict(attrs, dilations=[1] * nsp)
        pads, strides, _, out_sp = _conv_spatial(op, ins, outs, x_t.array.shape, ks, attrs2, nsp)
        check_shape(op, ins, outs, (x_t.array.shape[0], *out_sp, x_t.array.shape[-1]), y)
        padw = [(0, 0)] + [(pads[i], pads[nsp + i]) for i in range(nsp)] + [(0, 0)]
        one = [1] * nsp
        valid = np.pad(np.ones(x_t.array.shape, dtype=np.int64), padw)
        count = cast(np.ndarray, sum(win for _, win in _windows(valid, ks, strides, one, out_sp)))
        if (count == 0).any():
            raise unsupported(op, ins, outs, "a pooling window lies entirely in the padding")

        def pool(x: np.ndarray, fill: float) -> np.ndarray:
            xp = np.pad(x, padw, constant_values=fill)
            wins = [win for _, win in _windows(xp, ks, strides, one, out_sp)]
            if op == "maxpool":
                return np.maximum.reduce(wins) if len(wins) > 1 else wins[0].copy()
            return cast(np.ndarray, sum(wins))  # a sum of one or more arrays

        def fop(x: np.ndarray) -> np.ndarray:
            r = pool(x, -np.inf if op == "maxpool" else 0.0)
            return r if op == "maxpool" else r / count

        def iop(x: np.ndarray) -> np.ndarray:
            r = pool(x, np.iinfo(np.int64).min if op == "maxpool" else 0)
            return r if op == "maxpool" else div_rne_int(r, count)

        if (
            is_int(elem)
            and x_t.quant is not None
            and same(x_t.quant, y.quant)
            and x_t.quant.kind == "per_tensor"
        ):
            # identical per-tensor descriptors: the integer path equals the real-domain one
            return [saturate_int(iop(x_t.array.astype(np.int64)), y.elem)]
        return [numeric_kernel(op, ins, y, fop, iop, allowed=POOL_T)]

    return kernel
