"""Honest compiles (issue 34): a compile that raises less than half of the
FLOPs says so without -v (D-COMPILE-LOW-SHARE), and the diagnostics of a
`.nemb` compiled from ONNX name a file that exists, the one read, while its
bytes do not depend on the path it was written to (D-COMPILE-NEMB-LOC)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from nem.dialect.diagnostics import SourceLoc  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402

BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mlp") / "mlp.onnx"
    onnx.save(samples.mlp("f32"), path)
    return path


@pytest.mark.slow  # a compile and a run: 4-7 s
def test_a_low_share_is_one_warning_line_without_v(mlp):
    r = _run("nem-compile", str(mlp), "--device", "npm_lite", "-o", str(mlp.with_suffix(".nem")))
    assert r.returncode == 0 and r.stdout == ""
    assert r.stderr == (
        f"{mlp}: warning: only 0.0% of the model's FLOPs run as NEM opcodes "
        "(136960 of 136960 in escape-hatch kernels): no matmul variant for f32 "
        "on device npm_lite; no relu variant for f32 on device npm_lite "
        "(-v: a remark per op)\n"
    )
    r = _run("nem-compile", str(mlp), "--device", "npm_pro_x1", "-o", str(mlp.with_suffix(".nem")))
    assert r.returncode == 0 and r.stderr == ""  # all raised: nothing to say


@pytest.mark.slow  # a compile and a run: 4-7 s
def test_nemb_diagnostics_name_the_nemb_at_its_text_lines(mlp):
    nemb = mlp.with_suffix(".nemb")
    assert _run("nem-compile", str(mlp), "--device", "npm_pro_x1", "-o", str(nemb)).returncode == 0
    r = _run("nem-opt", str(nemb), "-p", "nem-verify{device=npm_lite}", "-o", "/dev/null")
    located = re.findall(r"^(\S+?):(\d+):(\d+): error: (\w+) is not valid", r.stderr, re.M)
    assert r.returncode == 1 and located, r.stderr
    assert ".nem:" not in r.stderr.replace(".nemb:", "")
    text = _run("nem-opt", str(nemb), "-t", "nem").stdout.splitlines()
    for file, line, col, opcode in located:
        assert file == str(nemb) and Path(file).exists()
        assert re.match(rf"\s*\w+ = {opcode}\.", text[int(line) - 1][int(col) - 1 :])
    copy = nemb.with_name("renamed.nemb")  # the file read, not the one written
    copy.write_bytes(nemb.read_bytes())
    r = _run("nem-opt", str(copy), "-p", "nem-verify{device=npm_lite}", "-o", "/dev/null")
    assert re.findall(r"^(\S+?):\d+:\d+: error:", r.stderr, re.M) == [str(copy)] * len(located)


@pytest.mark.slow  # two compiles: ~4 s
def test_a_nemb_does_not_depend_on_its_path(mlp, tmp_path):
    """Two compiles of one model to two paths write the same bytes (`cmp`
    is how bit-identical programs are checked); read back, its locations
    name the file read."""
    from nem.cli.nem_compile import run as compile_run
    from nem.frontends.bytecode.reader import read_nemb
    from nem.frontends.nem_text.printer import printed_statements

    one, other = tmp_path / "one.nemb", tmp_path / "sub" / "other.nemb"
    other.parent.mkdir()
    for out in (one, other):
        assert (
            compile_run([str(mlp), "--device", "npm_pro_x1", "-o", str(out), "--no-progress"]) == 0
        )
    assert one.read_bytes() == other.read_bytes()
    module = read_nemb(other.read_bytes(), str(other)).module
    files = {SourceLoc.of(op).file for op in printed_statements(module)}
    assert files == {str(other)}
