"""Lowering an MLIR input of test/lit/lowering/Inputs/raise/ with the real
CLI and running it under 3 random schedules (shared by the graph-raising
tests: test_lowering_graph_raise.py, _fills, _grouped_conv, _casts)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from nem.cli.upstream_tools import find_tool

INPUTS = Path(__file__).resolve().parents[1] / "lit" / "lowering" / "Inputs" / "raise"
DEVICE = "npm_pro_x1"


def tool(name: str) -> str:
    found = Path(sys.executable).parent / name
    return str(found) if found.exists() else (shutil.which(name) or name)


def mlir_opt() -> str | None:
    return find_tool("mlir-opt")


def lower_and_run(
    mlir: Path,
    tmp: Path,
    inputs: dict[str, np.ndarray],
    outputs: list[str],
    remark: str,
    entry: str | None = None,
    device: str = DEVICE,
) -> dict[str, np.ndarray]:
    nem = tmp / "prog.nem"
    opts = f"device={device} remarks=true" + (f" entry={entry}" if entry else "")
    r = subprocess.run(
        [tool("nem-opt"), str(mlir), "-p", f"lower-to-nem{{{opts}}}", "-t", "nem", "-o", str(nem)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert remark in r.stderr, r.stderr
    args = [tool("nem-run"), str(nem), "--schedules", "3"]
    for name, arr in inputs.items():
        np.save(tmp / f"{name}.npy", arr)
        args += ["--input", f"{name}={tmp / f'{name}.npy'}"]
    for name in outputs:
        args += ["--output", f"{name}={tmp / f'out_{name}.npy'}"]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "races: 0 distinct" in r.stdout and "identical across all schedules" in r.stdout
    return {n: np.load(tmp / f"out_{n}.npy").reshape(inputs[n].shape) for n in outputs}


def rand(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)
