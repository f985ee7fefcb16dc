"""Reference convolution and pooling kernels (runtime/nem/runtime/kernels.py)
against independent numpy formulas (the rules of test_kernels.py: every
expected value computed here, never with the kernel module's helpers)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_calls import (
    T,
    f_out,
    out,
    pc,
    pg,
    pt,
    rand_float,
    rand_int,
    requant_ref,
    run,
    same_bits,
)

from nem.runtime.kernels import KERNELS, NotSupported, Tensor

# ---------------------------------------------------------------- convolution


def conv_ref(x, w, pads, strides, dil, groups, zx=0, zw=0):
    """Direct N-D convolution: loop over output positions, einsum over each window.
    x: [N, *S, Cin] (int64 or f64), w: [*K, Cin/groups, Cout]."""
    nsp = x.ndim - 2
    xp = np.pad(x - zx, [(0, 0)] + [(pads[i], pads[nsp + i]) for i in range(nsp)] + [(0, 0)])
    ks = w.shape[:nsp]
    cin_g, cout = w.shape[-2], w.shape[-1]
    cout_g = cout // groups
    outs = [(xp.shape[1 + i] - (dil[i] * (ks[i] - 1) + 1)) // strides[i] + 1 for i in range(nsp)]
    y = np.zeros((x.shape[0], *outs, cout), dtype=xp.dtype)
    wc = w - zw
    for pos in np.ndindex(*outs):
        idx = tuple(
            slice(pos[i] * strides[i], pos[i] * strides[i] + dil[i] * (ks[i] - 1) + 1, dil[i])
            for i in range(nsp)
        )
        win = xp[(slice(None),) + idx + (slice(None),)]  # [N, *K, Cin]
        for g in range(groups):
            wg = wc[..., g * cout_g : (g + 1) * cout_g]
            xg = win[..., g * cin_g : (g + 1) * cin_g]
            y[(slice(None),) + pos + (slice(g * cout_g, (g + 1) * cout_g),)] = np.tensordot(
                xg, wg, axes=(list(range(1, nsp + 2)), list(range(nsp + 1)))
            )
    return y


@pytest.mark.parametrize("elem", ["f32", "i8"])
def test_conv_im2col_matches_the_definition(elem):
    """D-NUM-LINEAR-FLOAT / D-NUM-LINEAR-INT: groups=1 convolution (one matrix
    product over all kernel offsets) with pads, strides and dilations."""
    rng = np.random.default_rng(5)
    dt = np.float32 if elem == "f32" else np.int8
    x = rng.integers(-9, 9, (2, 11, 13, 3)).astype(dt)
    w = rng.integers(-9, 9, (3, 2, 3, 4)).astype(dt)
    pads, strides, dil = [1, 2, 0, 1], [2, 1], [2, 3]
    ref = conv_ref(x.astype(np.int64), w.astype(np.int64), pads, strides, dil, 1)
    # integers: scale 1, zero point 0 (QUANT-07/08), so y = sat(acc)
    q = None if elem == "f32" else pt(1.0, 0)
    out = Tensor(np.zeros(ref.shape, dt), elem, q)
    got = KERNELS["conv2d"](
        [Tensor(x, elem, q), Tensor(w, elem, q)],
        [out],
        {"pads": pads, "strides": strides, "dilations": dil},
    )[0]
    np.testing.assert_array_equal(
        got.astype(np.int64), np.clip(ref, -128, 127) if elem == "i8" else ref
    )


@pytest.mark.parametrize("elem", ["f16", "bf16", "f32"])
def test_conv2d_float_pads_strides_dilations_groups_bias(elem):
    x = rand_float((2, 9, 8, 4), elem)
    w = rand_float((3, 3, 2, 6), elem)
    b = rand_float((6,), elem)
    pads, strides, dil, groups = [1, 2, 0, 1], [2, 1], [1, 2], 2
    ref = conv_ref(x.astype(np.float64), w.astype(np.float64), pads, strides, dil, groups)
    ref = ref + b.astype(np.float64)
    got = run(
        "conv2d",
        [T(x, elem), T(w, elem), T(b, elem)],
        [out(ref.shape, elem)],
        pads=pads,
        strides=strides,
        dilations=dil,
        groups=groups,
    )
    same_bits(got, f_out(ref, elem))


def test_conv2d_int8_per_channel_with_bias():
    # RULE: QUANT-11
    x = rand_int((1, 7, 6, 3), -128, 127)
    w = rand_int((3, 2, 3, 4), -128, 127)
    c = rand_int((4,), -20000, 20000)
    sx, zx = 0.05, -7
    sw, zw = np.array([0.01, 0.02, 0.005, 0.03]), np.array([0, 1, -1, 2])
    sy, zy = 0.3, 3
    pads, strides = [1, 0, 2, 1], [2, 2]
    acc = (
        conv_ref(x.astype(np.int64), w.astype(np.int64), pads, strides, [1, 1], 1, zx=zx, zw=zw) + c
    )
    ref = requant_ref(acc, sx, sw, sy, zy, -128, 127).astype(np.int8)
    got = run(
        "conv2d",
        [T(x, "i8", pt(sx, zx)), T(w, "i8", pc(3, sw, zw)), T(c, "i32")],
        [out(ref.shape, "i8", pt(sy, zy))],
        pads=pads,
        strides=strides,
    )
    same_bits(got, ref)


def test_conv2d_int8_per_tensor_i16_grouped():
    x = rand_int((1, 5, 5, 4), -128, 127)
    w = rand_int((2, 2, 2, 4), -128, 127)
    acc = conv_ref(
        x.astype(np.int64), w.astype(np.int64), [0, 0, 0, 0], [1, 1], [1, 1], 2, zx=2, zw=-1
    )
    ref = requant_ref(acc, 0.1, 0.2, 0.05, 0, -32768, 32767).astype(np.int16)
    got = run(
        "conv2d",
        [T(x, "i8", pt(0.1, 2)), T(w, "i8", pt(0.2, -1))],
        [out(ref.shape, "i16", pt(0.05, 0))],
        groups=2,
    )
    same_bits(got, ref)


def test_conv2d_int4_per_group_over_input_channels():
    # RULE: QUANT-11
    x = rand_int((1, 4, 4, 6), -128, 127)
    w = rand_int((2, 2, 6, 3), -8, 7)
    sw, zw = [0.1, 0.25], [0, 1]  # groups of 4 and 2 input channels
    v = np.zeros((1, 3, 3, 3))
    for g, k in enumerate([slice(0, 4), slice(4, 6)]):
        acc = conv_ref(
            x[..., k].astype(np.int64),
            w[:, :, k, :].astype(np.int64),
            [0] * 4,
            [1, 1],
            [1, 1],
            1,
            zx=0,
            zw=zw[g],
        )
        v = v + acc.astype(np.float64) * ((0.02 * sw[g]) / 0.4)
    ref = np.clip(np.rint(v) - 1, -128, 127).astype(np.int8)
    got = run(
        "conv2d",
        [T(x, "i8", pt(0.02, 0)), T(w, "i4", pg(2, 4, sw, zw))],
        [out(ref.shape, "i8", pt(0.4, -1))],
    )
    same_bits(got, ref)


def test_depthwise_conv2d_int8_per_channel():
    # RULE: QUANT-11
    x = rand_int((1, 5, 5, 3), -128, 127)
    w = rand_int((3, 3, 3, 2), -128, 127)  # [Kh, Kw, C, multiplier]
    sw, zw = np.array([0.01, 0.02, 0.04]), np.array([1, 0, -2])
    wc = (w - zw[:, None]).reshape(3, 3, 1, 6)  # output channel c * 2 + m
    acc = conv_ref(x.astype(np.int64), wc, [1, 1, 1, 1], [2, 2], [1, 1], 3, zx=3)
    ref = requant_ref(acc, 0.1, np.repeat(sw, 2), 0.2, 0, -128, 127).astype(np.int8)
    got = run(
        "depthwise_conv2d",
        [T(x, "i8", pt(0.1, 3)), T(w, "i8", pc(2, sw, zw))],
        [out(ref.shape, "i8", pt(0.2, 0))],
        pads=[1, 1, 1, 1],
        strides=[2, 2],
    )
    same_bits(got, ref)


def test_depthwise_conv1d_conv3d_float():
    x = rand_float((1, 6, 5, 3), "f32")
    w = rand_float((3, 3, 3, 2), "f32")  # [Kh, Kw, C, multiplier]
    ref = conv_ref(
        x.astype(np.float64),
        w.reshape(3, 3, 1, 6).astype(np.float64),
        [1, 1, 1, 1],
        [1, 1],
        [1, 1],
        3,
    )
    got = run(
        "depthwise_conv2d", [T(x, "f32"), T(w, "f32")], [out(ref.shape, "f32")], pads=[1, 1, 1, 1]
    )
    same_bits(got, f_out(ref, "f32"))
    x1, w1 = rand_float((2, 10, 3), "f16"), rand_float((3, 3, 4), "f16")
    ref = conv_ref(x1.astype(np.float64), w1.astype(np.float64), [2, 0], [3], [1], 1)
    got = run(
        "conv1d", [T(x1, "f16"), T(w1, "f16")], [out(ref.shape, "f16")], pads=[2, 0], strides=[3]
    )
    same_bits(got, f_out(ref, "f16"))
    x3, w3 = rand_float((1, 4, 4, 4, 2), "f32"), rand_float((2, 2, 2, 2, 3), "f32")
    ref = conv_ref(x3.astype(np.float64), w3.astype(np.float64), [0] * 6, [1, 2, 1], [1] * 3, 1)
    got = run("conv3d", [T(x3, "f32"), T(w3, "f32")], [out(ref.shape, "f32")], strides=[1, 2, 1])
    same_bits(got, f_out(ref, "f32"))


def test_conv_wrong_output_shape_is_not_supported():
    x, w = T(np.ones((1, 4, 4, 1)), "f16"), T(np.ones((3, 3, 1, 1)), "f16")
    with pytest.raises(NotSupported, match="conv2d.*shape"):
        run("conv2d", [x, w], [out((1, 4, 4, 1), "f16")])


# ---------------------------------------------------------------- pooling


def pool_ref(x, ks, pads, strides, mode):
    """Loop over output positions; padding excluded from max and from the average count."""
    N, H, W, C = x.shape
    Ho = (H + pads[0] + pads[2] - ks[0]) // strides[0] + 1
    Wo = (W + pads[1] + pads[3] - ks[1]) // strides[1] + 1
    y = np.zeros((N, Ho, Wo, C), dtype=np.float64 if mode != "int_avg" else object)
    for i in range(Ho):
        for j in range(Wo):
            h0, w0 = i * strides[0] - pads[0], j * strides[1] - pads[1]
            win = x[:, max(h0, 0) : min(h0 + ks[0], H), max(w0, 0) : min(w0 + ks[1], W), :]
            if mode == "max":
                y[:, i, j, :] = win.max(axis=(1, 2))
            elif mode == "avg":
                y[:, i, j, :] = win.astype(np.float64).sum(axis=(1, 2)) / (
                    win.shape[1] * win.shape[2]
                )
            else:  # exact rational, rounded half to even
                from fractions import Fraction

                cnt = win.shape[1] * win.shape[2]
                s = win.astype(np.int64).sum(axis=(1, 2))
                y[:, i, j, :] = np.vectorize(lambda v: round(Fraction(int(v), cnt)))(s)
    return y


@pytest.mark.parametrize("elem", ["f16", "bf16", "f32"])
def test_pool_float(elem):
    x = rand_float((2, 7, 6, 3), elem)
    ks, pads, strides = [3, 2], [1, 1, 1, 0], [2, 2]
    for op, mode in (("maxpool", "max"), ("avgpool", "avg")):
        ref = pool_ref(x.astype(np.float64), ks, pads, strides, mode)
        got = run(
            op, [T(x, elem)], [out(ref.shape, elem)], kernel_shape=ks, pads=pads, strides=strides
        )
        same_bits(got, f_out(ref, elem))


def test_pool_int8_raw_and_quantized():
    x = rand_int((1, 6, 6, 2), -128, 127)
    ks, pads, strides = [2, 3], [0, 1, 1, 1], [2, 2]
    ref_max = pool_ref(x, ks, pads, strides, "max").astype(np.int8)
    ref_avg = pool_ref(x, ks, pads, strides, "int_avg").astype(np.int8)
    for q in (None, pt(0.1, 5)):
        kw = dict(kernel_shape=ks, pads=pads, strides=strides)
        same_bits(run("maxpool", [T(x, "i8", q)], [out(ref_max.shape, "i8", q)], **kw), ref_max)
        same_bits(run("avgpool", [T(x, "i8", q)], [out(ref_avg.shape, "i8", q)], **kw), ref_avg)


def test_pool_window_in_padding_is_not_supported():
    with pytest.raises(NotSupported, match="padding"):
        run(
            "maxpool",
            [T(np.ones((1, 2, 2, 1)), "f16")],
            [out((1, 3, 2, 1), "f16")],
            kernel_shape=[1, 1],
            pads=[1, 0, 0, 0],
            strides=[1, 1],
        )
