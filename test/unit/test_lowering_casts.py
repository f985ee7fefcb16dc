"""Casts raised (D-LOW-CAST): each entry of
test/lit/lowering/Inputs/raise/casts.mlir (`casts.test` checks the tasks)
lowered and run under 3 random schedules, compared bit for bit with
numpy's conversion, which rounds as MLIR's casts do (half to even, inf
beyond the range, NaN kept); the escape-hatch near miss runs too."""

from __future__ import annotations

import numpy as np
import pytest
from raise_runs import INPUTS, lower_and_run

CASTS = INPUTS / "casts.mlir"


def _edge_f32(shape) -> np.ndarray:
    """Random values plus what a cast must get right: overflow, ties, NaN, inf."""
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32) * 1000
    flat = x.reshape(-1)
    flat[:6] = [70000.0, -1e30, np.nan, np.inf, 2049.0, 65519.0]
    return x


def _edge_f16(shape) -> np.ndarray:
    with np.errstate(over="ignore"):
        return _edge_f32(shape).astype(np.float16)


@pytest.mark.parametrize(
    "entry, x, out_dtype",
    [
        ("truncf", _edge_f32((4, 8)), np.float16),
        ("extf", _edge_f16((4, 8)), np.float32),
        ("sitofp", np.arange(-128, 128, 16, dtype=np.int8), np.float16),
    ],
)
@pytest.mark.slow  # 10 s (3 cases)
def test_cast(tmp_path, entry, x, out_dtype):
    y0 = np.zeros(x.shape, out_dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x.astype(out_dtype)
    out = lower_and_run(CASTS, tmp_path, {"x": x, "y": y0}, ["y"], "-> cast;", entry)["y"]
    assert out.dtype == out_dtype and out.tobytes() == ref.tobytes()


@pytest.mark.slow  # 5 s
def test_fptosi_escape_still_truncates(tmp_path):
    x = np.array([2.5, -2.5, 3.7, -3.7] * 4, np.float32)
    out = lower_and_run(
        CASTS, tmp_path, {"x": x, "y": np.zeros(16, np.int8)}, ["y"], "escape-hatch task", "fptosi"
    )["y"]
    assert (out == np.trunc(x).astype(np.int8)).all()
