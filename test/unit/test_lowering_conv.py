"""linalg.conv_2d_nhwc_hwcf lowered to NEM and run matches numpy (f16 operands;
D-NUM-FLOAT: exact sums, rounded to f32 then f16; linalg accumulates into its
output, which the lowering expresses as one `conv2d in X, W, Y out Y`: the
sum and what Y held rounded once, D-CONV-BIAS)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nem.runtime import NemInterpreter

FIXTURE = Path(__file__).resolve().parents[1] / "lit/lowering/Inputs/linalg_conv_f16.mlir"


def _round(a64):
    return a64.astype(np.float32).astype(np.float16)


@pytest.mark.slow  # 3 s
def test_linalg_conv_lowers_and_matches_numpy(tmp_path):
    out = tmp_path / "conv.nem"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "nem.cli.nem_opt",
            str(FIXTURE),
            "-p",
            "lower-to-nem{device=npm_pro_x1}",
            "-t",
            "nem",
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    it = NemInterpreter()
    it.load(out)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (1, 10, 10, 8)).astype(np.float16)
    w = rng.uniform(-1, 1, (3, 3, 8, 16)).astype(np.float16)
    y0 = rng.uniform(-1, 1, (1, 8, 8, 16)).astype(np.float16)
    for name, arr in (("x", x), ("w", w), ("y", y0)):
        it.write_tensor(name, arr)
    r = it.run()
    assert r.status == "completed" and r.race_count == 0, r.error
    y = it.read_tensor("y", (1, 8, 8, 16), np.float16)
    acc = np.zeros((1, 8, 8, 16))
    for i in range(3):
        for j in range(3):
            acc += np.einsum(
                "nhwc,co->nhwo",
                x[:, i : i + 8, j : j + 8].astype(np.float64),
                w[i, j].astype(np.float64),
            )
    ref = _round(y0.astype(np.float64) + acc)  # once: not round(y0 + round(conv))
    assert np.array_equal(y, ref)
