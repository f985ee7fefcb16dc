"""Lowering MLIR fixtures with the real CLI and running the result: the
shared steps of the lowering end-to-end tests (test_lowering_e2e.py,
test_lowering_async_value.py, test_lowering_memory_spaces.py).

    nem-opt IN.mlir -p 'lower-to-nem{device=npm_pro_x1 remarks=true}' -t nem -o OUT.nem

then `NemInterpreter` on seeded random inputs; `check_add` and `race_free`
are the checks several fixtures share.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from nem.runtime.api import NemInterpreter

LOWERING = Path(__file__).resolve().parents[1] / "lit" / "lowering"
INPUTS = LOWERING / "Inputs"
DEVICE = "npm_pro_x1"
U32 = 2.0**-24  # unit roundoff of f32


def tool(name: str) -> str:
    """The console script `name` of this environment (else from PATH)."""
    found = Path(sys.executable).parent / name
    return str(found) if found.exists() else (shutil.which(name) or name)


def lower(mlir: Path, out: Path) -> Path:
    """The CLI lowering, as the issue runs it."""
    r = subprocess.run(
        [
            tool("nem-opt"),
            str(mlir),
            "-p",
            f"lower-to-nem{{device={DEVICE} remarks=true}}",
            "-t",
            "nem",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "remark: lowered" in r.stderr
    return out


def grid_f32(rng, shape) -> np.ndarray:
    """Uniform f32 values on the grid k * 2^-24 in [-1, 1) (see module doc)."""
    return (rng.integers(-(2**24), 2**24, size=shape) * U32).astype(np.float32)


def start(nem: Path, seed: int) -> NemInterpreter:
    it = NemInterpreter(device=DEVICE)
    it.load(nem)
    it.randomize_inputs(seed)  # every DDR buffer (outputs too) starts random
    return it


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).astype(np.float32)


def run_ok(it: NemInterpreter):
    res = it.run()
    assert res.status == "completed", res.error
    assert res.race_count == 0
    assert res.deadlock is None
    return res


def check_add(nem: Path, shape, seed: int, y: str | None = "Y") -> np.ndarray:
    """Run a lowered `Z = X + Y` (`Z = X` when `y` is None) on random inputs:
    bit-exact (an f32 add is correctly rounded) and race-free under random
    schedules.  Returns the sum."""
    it = start(nem, seed=seed)
    x = it.read_tensor("X", shape, np.float32)
    other = it.read_tensor(y, shape, np.float32) if y else np.zeros(shape, np.float32)
    run_ok(it)
    want = f32(x.astype(np.float64) + other)
    np.testing.assert_array_equal(it.read_tensor("Z", shape, np.float32), want)
    race_free(lambda: start(nem, seed=seed))
    return want


def race_free(it_factory, k: int = 20) -> None:
    """K seeded random schedules: identical final memory, no race (issue 4)."""
    it = it_factory()
    results, diff = it.run_schedules(k, seed=7)
    assert diff is None, f"final memory differs: {diff}"
    assert all(r.status == "completed" and r.race_count == 0 for r in results)


# ---------------------------------------------------------------------------
