"""A user's own lit suite gets the NEM tools and substitutions from two lines
of its lit.cfg.py (`nem.cli.lit_config.configure`, docs/testing.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LIT_CFG = "from nem.cli.lit_config import configure\nconfigure(config)\n"

TEST = """\
# RUN: nem-opt %s -p nem-fold-consts | filecheck %s
# RUN: not nem-opt %s -p nem-verify-device{device=nowhere} 2>&1 | FileCheck %s --check-prefix=ERR
# RUN: %python -c "print(1)" | filecheck %s --check-prefix=PY
# RUN: ls %devices | filecheck %s --check-prefix=DEV
const T = 2 * 32
buffer B : L1 (size=T)
# CHECK: const T = 64
# CHECK: buffer B : L1 (size=T)
# ERR: error: {{.*}}nowhere
# PY: 1
# DEV: npm_lite.nem
"""

MLIR_TEST = """\
// REQUIRES: mlir-opt
// RUN: mlir-opt %s | nem-opt - -o /dev/null
func.func @f() {
  return
}
"""


def _lit() -> str:
    found = Path(sys.executable).parent / "lit"
    return str(found) if found.exists() else (shutil.which("lit") or "lit")


@pytest.mark.slow  # 7 s
def test_out_of_tree_suite(tmp_path):
    suite = tmp_path / "my_tests"
    (suite / "Inputs").mkdir(parents=True)
    (suite / "lit.cfg.py").write_text(LIT_CFG)
    (suite / "fold.nem").write_text(TEST)
    (suite / "interop.mlir").write_text(MLIR_TEST)
    (suite / "Inputs" / "not_a_test.nem").write_text("this is not run\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIT_")}
    r = subprocess.run(
        [_lit(), "-v", str(suite)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS: my_tests :: fold.nem" in r.stdout  # the suite is named after its folder
    assert "not_a_test" not in r.stdout
    from nem.cli.upstream_tools import find_tool

    assert (
        "PASS" if find_tool("mlir-opt") else "UNSUPPORTED"
    ) + ": my_tests :: interop.mlir" in r.stdout

    # a failing test fails the user's suite
    (suite / "fold.nem").write_text(TEST.replace("const T = 64", "const T = 65"))
    r = subprocess.run(
        [_lit(), "-q", str(suite)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert r.returncode == 1 and "my_tests :: fold.nem" in r.stdout + r.stderr
