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
