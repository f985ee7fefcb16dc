"""Constant fills raised (D-LOW-FILL): each entry of
test/lit/lowering/Inputs/raise/fills.mlir (`fills.test` checks the tasks)
lowered with the real CLI and run by `nem-run` under 3 random schedules,
over buffers holding NaN and inf beforehand (what a fill must not let
through: `clamp(NaN) = NaN`), compared bit for bit with the constant."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from raise_runs import INPUTS, lower_and_run, mlir_opt

FILLS = INPUTS / "fills.mlir"


def _poisoned(shape, dtype) -> np.ndarray:
    """A buffer's old contents: NaN, +-inf and finite values."""
    a = np.full(shape, np.nan, dtype)
    flat = a.reshape(-1)
    flat[1::4] = np.inf
    flat[2::4] = -np.inf
    flat[3::4] = 7
    return a


@pytest.mark.parametrize(
    "entry, shape, dtype, value, box",
    [
        ("zero", (4, 8), np.float32, 0.0, np.s_[:, :]),
        ("finite", (8, 8), np.float32, 1.5, np.s_[0:4, 2:5]),
        ("neg_inf", (2, 4), np.float16, -np.inf, np.s_[:, :]),
    ],
)
@pytest.mark.slow  # 8 s (3 cases)
def test_float_fill(tmp_path, entry, shape, dtype, value, box):
    """D-LOW-FILL: the box holds exactly the
    constant (+0.0 with its sign bit clear), the rest of the buffer is
    untouched (NaN stays NaN bit for bit)."""
    y = _poisoned(shape, dtype)
    out = lower_and_run(FILLS, tmp_path, {"y": y}, ["y"], "(constant fill)", entry)["y"]
    ref = y.copy()
    ref[box] = value
    assert out.dtype == dtype
    assert out.tobytes() == ref.tobytes()


def test_int8_fill(tmp_path):
    y = np.arange(-8, 8, dtype=np.int8)
    out = lower_and_run(FILLS, tmp_path, {"y": y}, ["y"], "(constant fill)", "int8")["y"]
    assert (out == -3).all()


@pytest.mark.parametrize("entry", ["int32", "nan", "neg_zero"])
@pytest.mark.slow  # 7 s (3 cases)
def test_near_misses_still_run(tmp_path, entry):
    """What stays an escape-hatch task still fills correctly."""
    dtype = np.int32 if entry == "int32" else np.float32
    y = np.zeros(16, dtype) if entry == "int32" else _poisoned((16,), dtype)
    out = lower_and_run(FILLS, tmp_path, {"y": y}, ["y"], "escape-hatch task", entry)["y"]
    if entry == "int32":
        assert (out == 7).all()
    elif entry == "nan":
        assert np.isnan(out).all()
    else:
        assert (out == 0).all() and np.signbit(out).all()


@pytest.mark.slow  # 5 s
def test_tiled_fill_over_nan(tmp_path):
    """linalg.fill through -convert-linalg-to-affine-loops and
    -affine-loop-tile (tile 3 over the 4 x 3 box: partial tiles): one
    zeroing clamp and one splat per tile."""
    opt = mlir_opt()
    if opt is None:
        pytest.skip("mlir-opt (the mlir extra) is not installed")
    nest = tmp_path / "nest.mlir"
    r = subprocess.run(
        [
            opt,
            str(FILLS),
            "-convert-linalg-to-affine-loops",
            "-affine-loop-tile=tile-size=3",
            "-o",
            str(nest),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    y = _poisoned((8, 8), np.float32)
    out = lower_and_run(nest, tmp_path, {"arg0": y}, ["arg0"], "(constant fill)", "finite")["arg0"]
    ref = y.copy()
    ref[0:4, 2:5] = 1.5
    assert out.tobytes() == ref.tobytes()
