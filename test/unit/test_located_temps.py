"""`nem-compile --save-temps` writes the MLIR stages with each op's location
(its ONNX node) on the line and column where the lowering's remarks and
diagnostics place it, and upstream parses the files (D-COMPILE-TEMPS-LOC)."""

from __future__ import annotations

import re
import subprocess

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from onnx import TensorProto, helper  # noqa: E402

from nem.cli.upstream_tools import find_tool  # noqa: E402
from nem.compile import compile_onnx  # noqa: E402
from nem.compile.located import located_text  # noqa: E402
from nem.frontends.onnx import import_onnx, samples  # noqa: E402
from nem.frontends.onnx.locations import node_of, statement_nodes  # noqa: E402


def _alias_named_model() -> onnx.ModelProto:
    """Nodes named like location aliases, in a string of their locations."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"], name="#loc1"),
            helper.make_node("Sigmoid", ["r"], ["y"], name='a"#loc'),
        ],
        "g",
        [x],
        [y],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_located_text_has_the_plain_lines_and_inline_locations():
    im = import_onnx(_alias_named_model(), file="m.onnx", simplify=False)
    with im.context:
        plain, located = str(im.module), located_text(im.module)
    named = ('loc("#loc1"("Relu"("m.onnx":1:1)))', 'loc("a\\22#loc"("Sigmoid"("m.onnx":2:1)))')
    assert all(n in located for n in named)  # upstream writes the quote \22
    assert "#loc" not in located.replace(named[0], "").replace(named[1], "")
    for p, q in zip(plain.split("\n"), located.split("\n"), strict=True):
        assert q.startswith(p.rstrip()) or q.split("(")[0] == p.split("(")[0], (p, q)


def test_save_temps_files_locate_each_remark_position(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(samples.mlp("f32"), path)
    result = compile_onnx(path, located_temps=True)
    tile = result.stage("tile")
    assert tile.located is not None and result.stage("import").located is not None
    lines = tile.located.split("\n")
    (remark,) = [r for r in result.remarks if "lowered @main to NEM" in r]
    places = [
        (op, int(ln), int(col))
        for op, ln, col in re.findall(r"(linalg\.\w+) at (\d+):(\d+)", remark)
    ]
    assert len(places) == 5
    nodes = statement_nodes(tile.text, tile.located, [(ln, col) for _, ln, col in places])
    for (op, line, col), node in zip(places, nodes):  # the op the remark names, its node
        assert lines[line - 1][col - 1 :].startswith(op), (op, lines[line - 1])
        assert node is not None and node_of(node) is not None and node_of(node)[0] == str(path), (
            op,
            node,
        )
    mlir_opt = find_tool("mlir-opt")
    if mlir_opt is None:
        pytest.skip("mlir-opt not installed")
    for stage in ("import", "bufferize", "tile"):
        file = tmp_path / f"{stage}.mlir"
        file.write_text(result.stage(stage).located or "")
        r = subprocess.run(
            [str(mlir_opt), str(file), "-o", "/dev/null"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert r.returncode == 0, r.stderr


def test_without_the_option_no_located_text_is_made():
    result = compile_onnx(samples.mlp("f32"))
    assert all(s.located is None for s in result.stages)


def test_the_option_is_checked():
    with pytest.raises(TypeError, match="located_temps"):
        compile_onnx(samples.mlp("f32"), located_temps="yes")
