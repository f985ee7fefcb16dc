"""The corrected whitepaper programs run, and gemm_bias_relu matches an independent
numpy reference.  RULE: EXEC-03 QUANT-11"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nem.runtime import NemInterpreter

REPO = Path(__file__).resolve().parents[2]


def test_gemm_bias_relu_matches_numpy():
    it = NemInterpreter()
    it.load(REPO / "examples" / "gemm_bias_relu.nem")
    rng = np.random.default_rng(2024)
    a = rng.uniform(-2, 2, (4 * 64, 256)).astype(np.float16)
    b = rng.uniform(-2, 2, (256, 128)).astype(np.float16)
    c = rng.uniform(-2, 2, (128,)).astype(np.float16)
    it.write_tensor("A_L2", a)
    it.write_tensor("B_L2", b)
    it.write_tensor("C_L2", c)
    r = it.run()
    assert r.status == "completed" and r.race_count == 0, r.error
    y = it.read_tensor("Y_L2", (4 * 64, 128), np.float16)
    # f16 GEMM, f32 accumulation (+ bias), one rounding to f16, then relu
    acc = a.astype(np.float32) @ b.astype(np.float32) + c.astype(np.float32)
    ref = np.maximum(acc.astype(np.float16), np.float16(0))
    diff = np.abs(y.astype(np.float32) - ref.astype(np.float32))
    # f32 (BLAS) and exact accumulation can differ by one f16 ulp on rare ties
    ulp = np.spacing(np.abs(ref).astype(np.float16)).astype(np.float32)
    assert np.all(diff <= ulp)
    assert np.mean(y == ref) > 0.999


@pytest.mark.parametrize("name", ["gemm_bias_relu", "conv2d_relu", "conv2d_maxpool"])
def test_examples_run(name):
    it = NemInterpreter()
    it.load(REPO / "examples" / f"{name}.nem")
    it.randomize_inputs(1)
    r = it.run()
    assert r.status == "completed" and r.race_count == 0 and not r.unconsumed, r.error
    assert r.tasks_run == 17
    it.set_mode("timed")
    it.load(REPO / "examples" / f"{name}.nem")
    it.randomize_inputs(1)
    r = it.run()
    assert r.status == "completed" and r.cycle_count > 0


def test_gemm_bias_relu_is_exact_under_the_recorded_rounding():
    """D-NUM-FLOAT: products and sums exact (f64 here), one rounding to f32 then
    to the output type; relu is exact.  The reference is written out here."""
    it = NemInterpreter()
    it.load(REPO / "examples" / "gemm_bias_relu.nem")
    rng = np.random.default_rng(7)
    a = rng.uniform(-2, 2, (4 * 64, 256)).astype(np.float16)
    b = rng.uniform(-2, 2, (256, 128)).astype(np.float16)
    c = rng.uniform(-2, 2, (128,)).astype(np.float16)
    for name, arr in (("A_L2", a), ("B_L2", b), ("C_L2", c)):
        it.write_tensor(name, arr)
    assert it.run().status == "completed"
    y = it.read_tensor("Y_L2", (4 * 64, 128), np.float16)
    acc = a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)
    ref = np.maximum(acc.astype(np.float32).astype(np.float16), np.float16(0))
    assert np.array_equal(y, ref)


def _conv_i8_reference(x, w, bias, sx, sw, sy):
    """int8 conv2d (NHWC x HWIO, no padding, stride 1) with exact int64
    accumulation, i32 bias, requantization y = sat(rne(acc * ((sx*sw)/sy)))."""
    kh, kw = w.shape[:2]
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    acc = np.zeros((x.shape[0], oh, ow, w.shape[3]), np.int64)
    for i in range(kh):
        for j in range(kw):
            acc += np.einsum(
                "nhwc,co->nhwo",
                x[:, i : i + oh, j : j + ow, :].astype(np.int64),
                w[i, j].astype(np.int64),
            )
    acc += bias.astype(np.int64)
    return np.clip(np.rint(acc * ((sx * sw) / sy)), -128, 127).astype(np.int8)


def _load_conv_example(name, seed):
    it = NemInterpreter()
    it.load(REPO / "examples" / f"{name}.nem")
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (4, 16, 16, 64), dtype=np.int8)
    w = rng.integers(-128, 128, (3, 3, 64, 128), dtype=np.int8)
    it.write_tensor("X_L2", x)
    it.write_tensor("W_L2", w)
    return it, x, w


def test_conv2d_relu_is_bit_exact():
    # RULE: QUANT-11
    it, x, w = _load_conv_example("conv2d_relu", 11)
    bias = np.random.default_rng(12).integers(-5000, 5000, (128,), dtype=np.int32)
    it.write_tensor("B_L2", bias)
    r = it.run()
    assert r.status == "completed" and r.race_count == 0, r.error
    y = it.read_tensor("Y_L2", (4, 14, 14, 128), np.int8)
    ref = np.maximum(_conv_i8_reference(x, w, bias, 0.05, 0.02, 0.1), 0)  # relu at zero point 0
    assert np.array_equal(y, ref)


def test_conv2d_maxpool_is_bit_exact():
    # RULE: QUANT-11
    it, x, w = _load_conv_example("conv2d_maxpool", 21)
    r = it.run()
    assert r.status == "completed" and r.race_count == 0, r.error
    y = it.read_tensor("Y_L2", (4, 7, 7, 128), np.int8)
    conv = _conv_i8_reference(x, w, np.zeros(128, np.int32), 0.05, 0.02, 0.1)
    ref = conv.reshape(4, 7, 2, 7, 2, 128).max(axis=(2, 4))  # 2x2 max pooling, stride 2
    assert np.array_equal(y, ref)
