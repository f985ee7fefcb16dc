"""`nem-compile -v` prints records of the documented forms only
(docs/compile.md, "What -v prints"): each stage and part of a stage with
its wall and CPU time, remarks, warnings, the interface lines."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from onnx import numpy_helper  # noqa: E402

from nem.cli import nem_compile  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402

TIMES = r" +\d+\.\d ms wall +\d+\.\d ms cpu"
STAGE = re.compile(r"nem-compile: (import|bufferize|tile|lower|write)" + TIMES)
PART = re.compile(r"nem-compile:   (import|bufferize|tile|lower)/\S.*?" + TIMES)
FORMS = [
    STAGE,
    PART,
    re.compile(r"nem-compile: total" + TIMES),
    re.compile(r"\S+: (remark|warning): .+"),
    re.compile(r"\S+:\d+:\d+: remark: .+"),
    re.compile(r"\S+: node \d+ '[^']*' \(\w+\)( and node \d+ '[^']*' \(\w+\))*: remark: .+"),
    re.compile(
        r"\S+\.tile\.mlir:\d+:\d+: note: in the tiled program \(nem-compile --save-temps writes it\)"
    ),
    re.compile(r"nem-compile: note: .+"),
    re.compile(r"weights: \S+ \(\d+ buffers?; nem-run \S+ --input \S+\)"),
    re.compile(
        r"(input|output): \S+ \w+\[[\d,]*\]( \(ONNX '.*'\))?"
        r"( \(\w+ in the model: the program holds \w+, which nem-run --input takes\))?"
    ),
    re.compile(r"run: nem-run .+"),
]


def _verbose(tmp_path, capsys, *extra: str) -> list[str]:
    model = samples.mlp("f32")
    first = model.graph.initializer[0]  # one zero weight: a warning line too
    first.CopyFrom(numpy_helper.from_array(np.zeros_like(numpy_helper.to_array(first)), first.name))
    onnx.save(model, tmp_path / "mlp.onnx")
    assert (
        nem_compile.run(
            [
                str(tmp_path / "mlp.onnx"),
                "-o",
                str(tmp_path / "mlp.nem"),
                "-v",
                "--no-progress",
                *extra,
            ]
        )
        == 0
    )
    return capsys.readouterr().err.splitlines()


def test_every_line_has_a_documented_form(tmp_path, capsys):
    lines = _verbose(tmp_path, capsys)
    quoted = False  # a located remark is followed by its line and a caret, indented
    for line in lines:
        if quoted and line.startswith("  "):
            continue
        assert any(f.fullmatch(line) for f in FORMS), line
        quoted = re.match(r"\S+:\d+:\d+: (remark|note): ", line) is not None
    stages = [m[1] for m in map(STAGE.fullmatch, lines) if m]
    assert stages == ["import", "bufferize", "tile", "lower", "write"]
    assert any(PART.fullmatch(ln) and "lower/nem-verify" in ln for ln in lines)
    assert any(": warning: 1 node multiplies" in ln for ln in lines)
    _no_line_in_the_unwritten_tiled_program(tmp_path, lines)


def _no_line_in_the_unwritten_tiled_program(tmp_path, lines: list[str]) -> None:
    """No --save-temps: no line is located in the tiled program, which is not
    written, but its notes saying so; they name the ONNX node, or the model
    (D-COMPILE-LOC)."""
    tiled = f"{tmp_path}/mlp.tile.mlir"
    assert not (tmp_path / "mlp.tile.mlir").exists()
    assert [ln for ln in lines if ln.startswith(tiled) and ": note: in the tiled" not in ln] == []


@pytest.mark.slow  # a compile: 2 s
def test_remarks_name_the_onnx_node_without_save_temps(tmp_path, capsys):
    """On npm_lite (no f32 matmul) each Gemm's remark is led by its node;
    the function's by the model file."""
    lines = _verbose(tmp_path, capsys, "--device", "npm_lite")
    _no_line_in_the_unwritten_tiled_program(tmp_path, lines)
    model = f"{tmp_path}/mlp.onnx"
    assert [ln for ln in lines if re.match(rf"{model}: node \d+ '\w+' \(Gemm\): remark: ", ln)]
    assert [ln for ln in lines if ln.startswith(f"{model}: remark: lowered @main to NEM")]
    assert [ln.split(":")[0] for ln in lines[-4:]] == ["weights", "input", "output", "run"]


@pytest.mark.slow  # a compile: 2 s
def test_cpu_times_sum_to_the_total(tmp_path, capsys):
    lines = _verbose(tmp_path, capsys, "--save-temps")
    assert not any(ln.startswith("nem-compile: note:") for ln in lines)  # the file exists
    cpu = {ln.split()[1]: float(ln.split()[-3]) for ln in lines if STAGE.fullmatch(ln)}
    (total,) = [float(ln.split()[-3]) for ln in lines if ln.startswith("nem-compile: total")]
    # the write (of a small .nem: well under a millisecond) is in the total
    assert list(cpu) == ["import", "bufferize", "tile", "lower", "write"]
    assert all(cpu[s] > 0 for s in ("import", "bufferize", "tile", "lower"))
    # each figure is printed to 0.1 ms: the five and the total round by 0.05 each
    # (the README run, loaded, printed 2075.3 against 2075.1)
    assert abs(sum(cpu.values()) - total) <= 0.05 * (len(cpu) + 1) + 1e-9


def test_an_input_the_program_holds_in_another_type_says_so(tmp_path, capsys):
    """An int64 graph input is an i32 buffer (D-COMPILE-I64): its `input:`
    line says so, for the array `nem-run --input` takes is int32 (an outside
    review, session 54: `nem-run` refused the int64 array onnxruntime takes,
    and the lines gave no hint why)."""
    from onnx import TensorProto, helper

    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "t")
    g = helper.make_graph(
        [helper.make_node("Gather", ["t", "idx"], ["y"], name="gather")],
        "g",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [table],
    )
    path = tmp_path / "gather.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert nem_compile.run([str(path), "-o", str(tmp_path / "g.nemb"), "-v", "--no-progress"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert (
        "input: idx i32[3] (int64 in the model: the program holds int32, which nem-run --input takes)"
        in lines
    )
    assert "output: y f32[3,4]" in lines
    assert all(
        any(f.fullmatch(ln) for f in FORMS) for ln in lines if ln.startswith(("input", "output"))
    )
