"""The buffers a program reads that no task writes and the run was given no
contents for: `NemInterpreter.unset_inputs()`, and the one warning line of a
`nem-run` that writes outputs (D-RT-UNSET)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nem.runtime.api import NemInterpreter

ROOT = Path(__file__).resolve().parents[2]
GEMM = ROOT / "examples" / "gemm_bias_relu.nem"  # reads A_L2, B_L2, C_L2; writes Y_L2
INPUTS = ["A_L2", "B_L2", "C_L2"]


def _loaded() -> NemInterpreter:
    it = NemInterpreter(device="npm_lite")
    it.load(GEMM)
    return it


def test_the_read_buffers_no_task_writes_until_given():
    it = _loaded()
    assert it.unset_inputs() == INPUTS  # not Y_L2 (written), not the L1 tiles
    it.write_tensor("B_L2", np.ones(it.tensor_size("B_L2"), np.uint8), raw=True)
    assert it.unset_inputs() == ["A_L2", "C_L2"]
    it.write_bytes("C_L2", b"\0")  # given, even as zeros: the caller chose them
    assert it.unset_inputs() == ["A_L2"]
    it.randomize_inputs(0)
    assert it.unset_inputs() == []


def test_bytes_into_ddr_by_offset_count_for_every_ddr_buffer(tmp_path):
    text = GEMM.read_text().replace(": L2 (", ": DDR (")  # the L2 buffers in DDR
    prog = tmp_path / "ddr.nem"
    prog.write_text(text)
    it = NemInterpreter(device="npm_lite")
    it.load(prog)
    assert it.unset_inputs() == INPUTS
    it.write_bytes(None, b"\1\2")
    assert it.unset_inputs() == []


def _nem_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "nem-run"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow  # three nem-run starts: 3-5 s
def test_nem_run_warns_only_when_it_writes_outputs(tmp_path):
    out = f"Y_L2={tmp_path / 'y.bin'}"
    r = _nem_run(str(GEMM), "--device", "npm_lite", "--output", out)
    assert r.returncode == 0, r.stderr
    assert r.stderr == (
        "nem-run: warning: 3 buffers are read by the program, written by none "
        "of its tasks and given by no --input: 'A_L2', 'B_L2', 'C_L2'; the run "
        "reads zeros there (D-RT-UNSET)\n"
    )
    assert _nem_run(str(GEMM), "--device", "npm_lite").stderr == ""  # values not read out
    r = _nem_run(str(GEMM), "--device", "npm_lite", "--random-inputs", "1", "--output", out)
    assert r.returncode == 0 and r.stderr == "", r.stderr
