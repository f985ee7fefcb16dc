"""Reference kernels (runtime/nem/runtime/kernels.py) against independent numpy formulas
(convolution and pooling: test_kernels_conv.py).

Every expected value here is computed directly in the test (plain numpy, int64
loops/einsums for the integer paths), never with the kernel module's helpers.
The numeric rules checked are the D-NUM-* decisions of docs/spec-decisions.md.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernel_calls import (
    BF16,
    NP,
    RNG,
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

from nem.dialect.registry import opcodes
from nem.runtime.kernels import KERNELS, KernelError, NotSupported, NumericError

# ---------------------------------------------------------------- table


def test_every_registry_opcode_has_a_kernel():
    assert set(KERNELS) == set(opcodes())


def test_errors_are_kernel_errors():
    assert issubclass(NotSupported, KernelError) and issubclass(NumericError, KernelError)


# ---------------------------------------------------------------- elementwise, float

GELU_C = math.sqrt(2.0 / math.pi)
UNARY_REF = {
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
    "exp": np.exp,
    "log": lambda x: np.log(np.abs(x) + 0.5),
    "sqrt": lambda x: np.sqrt(np.abs(x)),
    "abs": np.abs,
    "neg": lambda x: -x,
    "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * (x * x * x)))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
}


@pytest.mark.parametrize("elem", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("op", sorted(UNARY_REF))
def test_float_unary(op, elem):
    x = rand_float((4, 7), elem)
    if op == "log":
        x = (np.abs(x.astype(np.float64)) + 0.5).astype(NP[elem])
        ref = np.log(x.astype(np.float64))
    elif op == "sqrt":
        x = np.abs(x.astype(np.float64)).astype(NP[elem])
        ref = np.sqrt(x.astype(np.float64))
    else:
        ref = UNARY_REF[op](x.astype(np.float64))
    got = run(op, [T(x, elem)], [out(x.shape, elem)])
    same_bits(got, f_out(ref, elem))


BINARY_REF = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "min": np.minimum,
    "max": np.maximum,
    "pow": np.power,
}


@pytest.mark.parametrize("elem", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("op", sorted(BINARY_REF))
def test_float_binary(op, elem):
    x = rand_float((3, 5), elem, 0.25, 4.0 if op == "pow" else 3.0)
    y = rand_float((3, 5), elem, -2.0, 2.0)
    got = run(op, [T(x, elem), T(y, elem)], [out(x.shape, elem)])
    same_bits(got, f_out(BINARY_REF[op](x.astype(np.float64), y.astype(np.float64)), elem))


def test_float_arith_is_correctly_rounded_in_f16():
    # f16 1 + 2^-11 is a tie: RNE keeps 1.0; 1 + 3*2^-11 rounds up to 1 + 2^-9 (even).
    x = np.array([1.0, 1.0], np.float16)
    y = np.array([2.0**-11, 3 * 2.0**-11], np.float16)
    got = run("add", [T(x, "f16"), T(y, "f16")], [out((2,), "f16")])
    assert got.tolist() == [1.0, 1.0 + 2.0**-9]


def test_float_overflow_is_ieee_inf():
    x = np.array([60000.0], np.float16)
    got = run("add", [T(x, "f16"), T(x, "f16")], [out((1,), "f16")])
    assert np.isinf(got[0]) and got[0] > 0


def test_leaky_relu_and_clamp_float():
    x = rand_float((10,), "bf16")
    got = run("leaky_relu", [T(x, "bf16")], [out(x.shape, "bf16")], alpha=0.2)
    x64 = x.astype(np.float64)
    same_bits(got, f_out(np.where(x64 < 0, 0.2 * x64, x64), "bf16"))
    got = run("clamp", [T(x, "bf16")], [out(x.shape, "bf16")], min=-1.0, max=0.5)
    same_bits(got, f_out(np.clip(x64, -1.0, 0.5), "bf16"))


# ---------------------------------------------------------------- elementwise, integer


def test_int_saturating_arithmetic():
    x = np.array([100, -100, 127, -128, 5, -7], np.int8)
    y = np.array([100, -100, 1, -1, 2, 2], np.int8)
    tx, ty, o = T(x, "i8"), T(y, "i8"), out(x.shape, "i8")
    x64, y64 = x.astype(np.int64), y.astype(np.int64)
    same_bits(run("add", [tx, ty], [o]), np.clip(x64 + y64, -128, 127).astype(np.int8))
    same_bits(run("sub", [tx, ty], [o]), np.clip(x64 - y64, -128, 127).astype(np.int8))
    same_bits(run("mul", [tx, ty], [o]), np.clip(x64 * y64, -128, 127).astype(np.int8))
    # truncation toward zero: -7 / 2 = -3; -128 / -1 saturates to 127
    same_bits(run("div", [tx, ty], [o]), np.array([1, 1, 127, 127, 2, -3], np.int8))
    same_bits(run("neg", [tx], [o]), np.array([-100, 100, -127, 127, -5, 7], np.int8))
    same_bits(run("abs", [tx], [o]), np.array([100, 100, 127, 127, 5, 7], np.int8))
    same_bits(run("relu", [tx], [o]), np.maximum(x, 0))
    same_bits(run("min", [tx, ty], [o]), np.minimum(x, y))
    same_bits(run("max", [tx, ty], [o]), np.maximum(x, y))
    same_bits(run("clamp", [tx], [o], min=-10, max=50), np.clip(x, -10, 50))
    # leaky_relu: x * alpha rounded half to even: -7 * 0.5 = -3.5 -> -4, -100*.5 = -50
    same_bits(
        run("leaky_relu", [tx], [o], alpha=0.5), np.array([100, -50, 127, -64, 5, -4], np.int8)
    )


def test_int16_int32_saturate():
    x = np.array([2**31 - 1, -(2**31)], np.int32)
    got = run("add", [T(x, "i32"), T(x, "i32")], [out((2,), "i32")])
    assert got.tolist() == [2**31 - 1, -(2**31)]
    x = np.array([300, -300], np.int16)
    got = run("mul", [T(x, "i16"), T(x, "i16")], [out((2,), "i16")])
    assert got.tolist() == [32767, 32767]


def test_int_div_by_zero_is_an_error():
    x = T(np.array([1, 2], np.int8), "i8")
    z = T(np.array([1, 0], np.int8), "i8")
    with pytest.raises(NumericError, match="div"):
        run("div", [x, z], [out((2,), "i8")])


def test_float_only_op_on_unquantized_int_is_not_supported():
    x = T(np.array([1, 2], np.int8), "i8")
    for op in ("gelu", "exp", "sigmoid", "silu"):
        with pytest.raises(NotSupported, match=f"{op}.*i8"):
            run(op, [x], [out((2,), "i8")])
    with pytest.raises(NotSupported, match="pow"):
        run("pow", [x, x], [out((2,), "i8")])


def test_eltwise_types_outside_family_are_not_supported():
    x = T(np.array([1, 2], np.uint8), "u8")
    with pytest.raises(NotSupported, match="add.*u8"):
        run("add", [x, x], [out((2,), "u8")])
    with pytest.raises(NotSupported, match="relu"):
        run("relu", [T(np.zeros(2), "f16")], [out((2,), "f32")])


def test_quantized_eltwise_uses_real_values():
    # RULE: QUANT-11
    qx, qy, qz = pt(0.05, 3), pt(0.1, -2), pt(0.08, 1)
    x = rand_int((5, 6), -128, 127).astype(np.int8)
    y = rand_int((5, 6), -128, 127).astype(np.int8)
    rx = (x.astype(np.int64) - 3).astype(np.float64) * 0.05
    ry = (y.astype(np.int64) + 2).astype(np.float64) * 0.1

    def q(v):
        return np.clip(np.rint(v / 0.08) + 1, -128, 127).astype(np.int8)

    got = run("add", [T(x, "i8", qx), T(y, "i8", qy)], [out(x.shape, "i8", qz)])
    same_bits(got, q(rx + ry))
    got = run("sigmoid", [T(x, "i8", qx)], [out(x.shape, "i8", qz)])
    same_bits(got, q(1.0 / (1.0 + np.exp(-rx))))
    got = run("relu", [T(x, "i8", qx)], [out(x.shape, "i8", qx)])
    same_bits(got, np.maximum(x, 3).astype(np.int8))  # real 0 is the zero point
    with pytest.raises(NotSupported, match="quant"):
        run("add", [T(x, "i8", qx), T(y, "i8")], [out(x.shape, "i8", qz)])


# ---------------------------------------------------------------- gemm, float


@pytest.mark.parametrize("elem", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1)])
def test_gemm_float_with_bias(elem, ta, tb):
    M, K, N = 5, 19, 6
    a = rand_float((M, K), elem)
    b = rand_float((K, N), elem)
    c = rand_float((N,), elem)
    A = a.T.copy() if ta else a
    B = b.T.copy() if tb else b
    ref = np.zeros((M, N))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for k in range(K):  # exact products, f64 sum
        ref += np.outer(a64[:, k], b64[k, :])
    ref += c.astype(np.float64)
    got = run(
        "gemm", [T(A, elem), T(B, elem), T(c, elem)], [out((M, N), elem)], trans_a=ta, trans_b=tb
    )
    same_bits(got, f_out(ref, elem))


def test_matmul_batched_float():
    a, b = rand_float((2, 3, 4), "f32"), rand_float((2, 4, 5), "f32")
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    same_bits(run("matmul", [T(a, "f32"), T(b, "f32")], [out((2, 3, 5), "f32")]), f_out(ref, "f32"))


def test_gemm_accum_other_than_family_is_not_supported():
    a = T(np.ones((2, 2)), "f16")
    with pytest.raises(NotSupported, match="accum_type=f16"):
        run("gemm", [a, a], [out((2, 2), "f16")], accum_type="f16")
    with pytest.raises(NotSupported, match="gemm"):
        run("gemm", [a, T(np.ones((2, 2)), "f32")], [out((2, 2), "f16")])


# ---------------------------------------------------------------- gemm, int8 / int4


def test_gemm_int8_per_tensor_with_bias():
    # RULE: QUANT-11
    M, K, N = 7, 33, 5
    a = rand_int((M, K), -128, 127)
    b = rand_int((K, N), -128, 127)
    c = rand_int((N,), -5000, 5000)
    sx, zx, sw, zw, sy, zy = 0.05, 4, 0.02, -3, 0.7, -5
    acc = np.einsum("mk,kn->mn", a - zx, b - zw, dtype=np.int64) + c
    ref = requant_ref(acc, sx, sw, sy, zy, -128, 127).astype(np.int8)
    got = run(
        "gemm",
        [T(a, "i8", pt(sx, zx)), T(b, "i8", pt(sw, zw)), T(c, "i32")],
        [out((M, N), "i8", pt(sy, zy))],
    )
    same_bits(got, ref)


def test_gemm_int8_per_channel_to_i16_trans_b():
    # RULE: QUANT-11
    M, K, N = 4, 16, 6
    a = rand_int((M, K), -128, 127)
    bt = rand_int((N, K), -128, 127)  # trans_b: B stored [N, K]
    c = rand_int((N,), -100000, 100000)
    sw = RNG.uniform(0.001, 0.01, N)
    zw = rand_int((N,), -3, 3)
    sy = RNG.uniform(0.01, 0.1, N)
    zy = rand_int((N,), -10, 10)
    acc = np.einsum("mk,nk->mn", a - 1, bt - zw[:, None], dtype=np.int64) + c
    ref = requant_ref(acc, 0.03, sw, sy, zy, -32768, 32767).astype(np.int16)
    got = run(
        "gemm",
        [T(a, "i8", pt(0.03, 1)), T(bt, "i8", pc(0, sw, zw)), T(c, "i32")],
        [out((M, N), "i16", pc(1, sy, zy))],
        trans_b=1,
    )
    same_bits(got, ref)


def test_gemm_int8_without_output_quant_saturates_the_accumulator():
    a = np.full((1, 4), 100)
    b = np.full((4, 1), 100)
    got = run("gemm", [T(a, "i8", pt(0.1, 0)), T(b, "i8", pt(0.1, 0))], [out((1, 1), "i16")])
    assert got.tolist() == [[32767]]


def test_gemm_int8_accumulator_overflow_is_an_error():
    K = 140000  # 128 * 128 * K > 2^31 - 1
    a = np.full((1, K), -128)
    b = np.full((K, 1), -128)
    with pytest.raises(NumericError, match="overflow"):
        run(
            "gemm",
            [T(a, "i8", pt(1.0, 0)), T(b, "i8", pt(1.0, 0))],
            [out((1, 1), "i8", pt(1.0, 0))],
        )


def test_gemm_int4_per_group():
    # RULE: QUANT-11, QUANT-03
    M, K, N, G = 3, 20, 4, 8  # groups 8, 8, 4 (last one shorter)
    a = rand_int((M, K), -128, 127)
    b = rand_int((K, N), -8, 7)
    c = rand_int((N,), -1000, 1000)
    sw = [0.11, 0.07, 0.3]
    zw = [1, -2, 0]
    sx, zx, sb, sy, zy = 0.02, -1, 0.001, 0.5, 2
    v = np.zeros((M, N))
    for g in range(3):
        k = slice(g * G, min((g + 1) * G, K))
        acc_g = np.einsum("mk,kn->mn", a[:, k] - zx, b[k, :] - zw[g], dtype=np.int64)
        v = v + acc_g.astype(np.float64) * ((sx * sw[g]) / sy)
    v = v + (c.astype(np.float64) * sb) / sy
    ref = np.clip(np.rint(v) + zy, -128, 127).astype(np.int8)
    got = run(
        "gemm",
        [T(a, "i8", pt(sx, zx)), T(b, "i4", pg(0, G, sw, zw)), T(c, "i32", pt(sb, 0))],
        [out((M, N), "i8", pt(sy, zy))],
    )
    same_bits(got, ref)
    with pytest.raises(NotSupported, match="bias"):
        run(
            "gemm",
            [T(a, "i8", pt(sx, zx)), T(b, "i4", pg(0, G, sw, zw)), T(c, "i32")],
            [out((M, N), "i8", pt(sy, zy))],
        )


def test_gemm_int4_per_channel_equals_int8_formula():
    a = rand_int((2, 8), -128, 127)
    b = rand_int((8, 3), -8, 7)
    sw = np.array([0.1, 0.2, 0.3])
    acc = np.einsum("mk,kn->mn", a, b, dtype=np.int64)
    ref = requant_ref(acc, 0.5, sw, 0.25, 0, -128, 127).astype(np.int8)
    got = run(
        "gemm",
        [T(a, "i8", pt(0.5, 0)), T(b, "i4", pc(1, sw, [0, 0, 0]))],
        [out((2, 3), "i8", pt(0.25, 0))],
    )
    same_bits(got, ref)


def test_gemm_int8_needs_quant_and_per_tensor_activation():
    a = T(np.ones((2, 2)), "i8")
    w = T(np.ones((2, 2)), "i8", pt(1.0, 0))
    with pytest.raises(NotSupported, match="quant"):
        run("gemm", [a, w], [out((2, 2), "i8")])
    with pytest.raises(NotSupported, match="per_tensor"):
        run("gemm", [T(np.ones((2, 2)), "i8", pc(0, [1, 1], [0, 0])), w], [out((2, 2), "i8")])


# ---------------------------------------------------------------- views


def test_views():
    x = rand_int((2, 3, 4), -128, 127).astype(np.int8)
    tx = T(x, "i8")
    same_bits(
        run("transpose", [tx], [out((4, 2, 3), "i8")], perm=[2, 0, 1]), np.transpose(x, (2, 0, 1))
    )
    same_bits(run("reshape", [tx], [out((6, 4), "i8")]), x.reshape(6, 4))
    same_bits(
        run("slice", [tx], [out((1, 2, 3), "i8")], starts=[1, 0, 1], ends=[2, 2, 4]),
        x[1:2, 0:2, 1:4],
    )
    y = rand_int((2, 1, 4), -128, 127).astype(np.int8)
    same_bits(
        run("concat", [tx, T(y, "i8")], [out((2, 4, 4), "i8")], axis=1),
        np.concatenate([x, y], axis=1),
    )
    a, b = run("split", [tx], [out((2, 1, 4), "i8"), out((2, 2, 4), "i8")], axis=1)
    same_bits(a, x[:, :1])
    same_bits(b, x[:, 1:])
    same_bits(
        run("pad", [tx], [out((3, 5, 4), "i8")], pads=[1, 0, 0, 0, 2, 0], value=-3),
        np.pad(x, [(1, 0), (0, 2), (0, 0)], constant_values=-3),
    )
    idx = np.array([[3, 0], [1, 1]], np.int32)
    same_bits(run("gather", [tx, T(idx, "i32")], [out((2, 3, 2, 2), "i8")], axis=2), x[:, :, idx])
    with pytest.raises(NumericError, match="gather"):
        run("gather", [tx, T(np.array([4], np.int32), "i32")], [out((2, 3, 1), "i8")], axis=2)


def test_views_float_and_quant():
    x = rand_float((3, 4), "bf16")
    same_bits(
        run("pad", [T(x, "bf16")], [out((3, 6), "bf16")], pads=[0, 1, 0, 1], value=0.1),
        np.pad(x, [(0, 0), (1, 1)], constant_values=BF16(0.1)),
    )
    q = pt(0.5, 2)
    xi = rand_int((2, 2), -10, 10)
    # quantized pad value is a real value: 1.0 / 0.5 + 2 = 4
    same_bits(
        run("pad", [T(xi, "i8", q)], [out((2, 3), "i8", q)], pads=[0, 0, 0, 1], value=1.0),
        np.pad(xi, [(0, 0), (0, 1)], constant_values=4).astype(np.int8),
    )
    with pytest.raises(NotSupported, match="quant"):
        run("reshape", [T(xi, "i8", q)], [out((4,), "i8", pt(0.25, 2))])


# ---------------------------------------------------------------- reductions


def test_reductions():
    x = rand_int((3, 4, 5), -128, 127).astype(np.int8)
    x64 = x.astype(np.int64)
    same_bits(
        run("reduce_sum", [T(x, "i8")], [out((3, 1, 1), "i8")], axes=[1, 2]),
        np.clip(x64.sum(axis=(1, 2), keepdims=True), -128, 127).astype(np.int8),
    )
    same_bits(
        run("reduce_max", [T(x, "i8")], [out((4, 5), "i8")], axes=[0], keepdims=0), x.max(axis=0)
    )
    same_bits(
        run("reduce_min", [T(x, "i8")], [out((1,), "i8")], axes=[0, 1, 2], keepdims=0),
        np.array([x.min()], np.int8),
    )
    f = rand_float((3, 4), "f16")
    same_bits(
        run("reduce_sum", [T(f, "f16")], [out((3, 1), "f16")], axes=[1]),
        f_out(f.astype(np.float64).sum(axis=1, keepdims=True), "f16"),
    )


def test_argmax_argmin_first_index_on_ties():
    x = np.array([[1, 5, 5, 0], [2, 2, -1, -1]], np.int8)
    same_bits(
        run("argmax", [T(x, "i8")], [out((2, 1), "i32")], axis=1), np.array([[1], [0]], np.int32)
    )
    same_bits(
        run("argmin", [T(x, "i8")], [out((2,), "i32")], axis=1, keepdims=0),
        np.array([3, 2], np.int32),
    )
    with pytest.raises(NotSupported, match="i32"):
        run("argmax", [T(x, "i8")], [out((2, 1), "i16")], axis=1)


# ---------------------------------------------------------------- norms, softmax


@pytest.mark.parametrize("elem", ["f16", "bf16", "f32"])
def test_layernorm_rmsnorm(elem):
    x = rand_float((3, 8), elem)
    s, b = rand_float((8,), elem), rand_float((8,), elem)
    x64, s64, b64 = (t.astype(np.float64) for t in (x, s, b))
    mu = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mu) ** 2).mean(axis=1, keepdims=True)
    ref = (x64 - mu) / np.sqrt(var + 1e-5) * s64 + b64
    got = run("layernorm", [T(x, elem), T(s, elem), T(b, elem)], [out(x.shape, elem)])
    same_bits(got, f_out(ref, elem))
    ref = x64 / np.sqrt((x64**2).mean(axis=1, keepdims=True) + 1e-3) * s64
    got = run("rmsnorm", [T(x, elem), T(s, elem)], [out(x.shape, elem)], epsilon=1e-3)
    same_bits(got, f_out(ref, elem))


@pytest.mark.parametrize("elem", ["f16", "bf16", "f32"])
def test_softmax_log_softmax(elem):
    x = rand_float((4, 6), elem, -5, 5)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=0, keepdims=True))
    same_bits(
        run("softmax", [T(x, elem)], [out(x.shape, elem)], axis=0),
        f_out(e / e.sum(axis=0, keepdims=True), elem),
    )
    d = x64 - x64.max(axis=1, keepdims=True)
    same_bits(
        run("log_softmax", [T(x, elem)], [out(x.shape, elem)]),
        f_out(d - np.log(np.exp(d).sum(axis=1, keepdims=True)), elem),
    )
    with pytest.raises(NotSupported, match="softmax.*i8"):
        run("softmax", [T(np.ones(3), "i8")], [out((3,), "i8")])


# ---------------------------------------------------------------- cast, quantize


def test_cast_float_to_int_rounding_and_saturation():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 200.0, -300.0, np.nan, np.inf], np.float32)
    got = run("cast", [T(x, "f32")], [out(x.shape, "i8")])
    assert got.tolist() == [0, 2, 2, 0, -2, 127, -128, 0, 127]
    got = run("cast", [T(x[:7], "f32")], [out((7,), "i8")], saturate=0)
    assert got.tolist() == [0, 2, 2, 0, -2, -56, -44]  # 200 - 256, -300 + 256
    with pytest.raises(NumericError):
        run("cast", [T(x, "f32")], [out(x.shape, "i8")], saturate=0)


def test_cast_int_and_float_conversions():
    v = np.array([2**24 + 2**16 + 1, 2**24 + 2**16, 7, -(2**31)], np.int32)
    got = run("cast", [T(v, "i32")], [out(v.shape, "bf16")])
    # one rounding from the exact integer (no double rounding through f32)
    assert got.astype(np.float64).tolist() == [2.0**24 + 2**17, 2.0**24, 7.0, -(2.0**31)]
    got = run("cast", [T(np.array([100, -9]), "i16")], [out((2,), "i4")])
    assert got.tolist() == [7, -8]
    got = run("cast", [T(np.array([100, -9]), "i16")], [out((2,), "i4")], saturate=0)
    assert got.tolist() == [4, 7]
    big = np.array([1e6, -1e6, np.inf, 1.00048828125], np.float32)  # last: a tie
    got = run("cast", [T(big, "f32")], [out((4,), "f16")])
    assert got.astype(np.float64).tolist() == [65504.0, -65504.0, np.inf, 1.0]
    got = run("cast", [T(big, "f32")], [out((4,), "f16")], saturate=0)
    assert np.isinf(got[:2]).all()
    with pytest.raises(NotSupported, match="cast"):
        run("cast", [T(np.ones(2), "i8", pt(0.1, 0))], [out((2,), "f32")])


def test_quantize_dequantize_per_tensor_and_per_channel():
    # RULE: QUANT-11
    x = rand_float((3, 4), "f32", -20, 20)
    got = run("quantize", [T(x, "f32")], [out(x.shape, "i8", pt(0.1, -3))])
    ref = np.clip(np.rint(x.astype(np.float64) / 0.1) - 3, -128, 127).astype(np.int8)
    same_bits(got, ref)
    s, z = np.array([0.05, 0.2, 0.5, 1.0]), np.array([0, 1, -1, 2])
    got = run("quantize", [T(x, "f16")], [out(x.shape, "i8", pc(1, s, z))])
    x16 = x.astype(np.float16).astype(np.float64)
    same_bits(got, np.clip(np.rint(x16 / s) + z, -128, 127).astype(np.int8))
    q = rand_int((3, 4), -128, 127)
    got = run("dequantize", [T(q, "i8", pc(1, s, z))], [out(q.shape, "f16")])
    same_bits(got, f_out((q - z).astype(np.float64) * s, "f16"))
    got = run("dequantize", [T(q, "i8", pg(0, 2, [0.5, 0.25], [1, 0]))], [out(q.shape, "f32")])
    sg = np.array([0.5, 0.5, 0.25])[:, None]
    zg = np.array([1, 1, 0])[:, None]
    same_bits(got, f_out((q - zg).astype(np.float64) * sg, "f32"))
    with pytest.raises(NotSupported, match="quantize"):
        run("quantize", [T(x, "f32")], [out(x.shape, "i8")])
    with pytest.raises(NotSupported, match="quantize"):
        run("quantize", [T(x, "bf16")], [out(x.shape, "i8", pt(0.1, 0))])


# ---------------------------------------------------------------- compute escape hatch


def test_compute_delegates_to_registry_opcodes():
    x = rand_float((2, 3), "f16")
    got = run("compute", [T(x, "f16")], [out(x.shape, "f16")], op="leaky_relu", alpha=0.5)
    x64 = x.astype(np.float64)
    same_bits(got, f_out(np.where(x64 < 0, 0.5 * x64, x64), "f16"))
    with pytest.raises(NotSupported, match="compute op=my_fused_op"):
        run("compute", [T(x, "f16")], [out(x.shape, "f16")], op="my_fused_op")
    with pytest.raises(NotSupported, match="compute op=gelu.*i8"):
        run("compute", [T(np.ones(2), "i8")], [out((2,), "i8")], op="gelu")
