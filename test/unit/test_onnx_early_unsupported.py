"""A model with nodes of unsupported op types that the graph simplifier
cannot remove is converted without loading the simplifier
(D-COMPILE-EARLY-UNSUPPORTED); an unsupported node it folds or drops does
not stop the compile."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from onnx import TensorProto, helper  # noqa: E402

from nem.frontends.onnx.op_types import SIMPLIFIER_OP_TYPES, SUPPORTED  # noqa: E402


def _model(nodes, inits=()):
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        list(inits),
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_report_does_not_load_the_simplifier(tmp_path):
    """The report of a live node of an unsupported type reading the input
    imports neither onnxscript nor onnx_ir (0.6 s of the 1.1 s it took)."""
    path = tmp_path / "hm.onnx"
    onnx.save(
        _model(
            [
                helper.make_node("Hardmax", ["x"], ["a"], name="hm"),
                helper.make_node("Relu", ["a"], ["y"], name="r"),
            ]
        ),
        path,
    )
    code = (
        f"import sys\nfrom nem.compile import CompileError, compile_onnx\n"
        f"try:\n    compile_onnx({str(path)!r})\nexcept CompileError as e:\n    print(e)\n"
        "print(sorted(m for m in ('onnxscript', 'onnx_ir') "
        "if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    ).stdout.splitlines()
    assert out[0] == f"{path}: node 0 'hm' (Hardmax): error: not supported: op type Hardmax"
    assert out[-1] == "[]"


def test_folded_and_dead_unsupported_nodes_still_compile():
    """Hardmax of a ConstantOfShape(Shape(x)) is folded and a Trilu no
    output reads is dropped by the simplifier: not reported, the model
    compiles and computes x + hardmax(ones)."""
    from nem.compile import compile_onnx

    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    m = _model(
        [
            helper.make_node("Shape", ["x"], ["s"], name="shape"),
            helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill", value=one),
            helper.make_node("Hardmax", ["c"], ["h"], name="hm"),
            helper.make_node("Trilu", ["x"], ["t"], name="unused"),
            helper.make_node("Add", ["x", "h"], ["y"], name="add"),
        ],
    )
    result = compile_onnx(m)
    assert "program" in result.nem


def test_undecidable_types_wait_for_the_full_import():
    """An unsupported ScatterND reading the input may be removed by a
    rewrite: no early verdict; the full import lists it with the others."""
    from nem.frontends.onnx import OnnxImportErrors, import_onnx
    from nem.frontends.onnx.entry import EARLY_NOTE
    from nem.frontends.onnx.op_types import early_unsupported

    idx = helper.make_tensor("i", TensorProto.INT64, [1, 1], [0])
    upd = helper.make_tensor("u", TensorProto.FLOAT, [1, 3], np.ones(3))
    m = _model(
        [
            helper.make_node("ScatterND", ["x", "i", "u"], ["a"], name="sc"),
            helper.make_node("Hardmax", ["a"], ["y"], name="hm"),
        ],
        [idx, upd],
    )
    assert early_unsupported(m, "m", {}, simplified=True) == []
    with pytest.raises(OnnxImportErrors) as e:
        import_onnx(m, file="m.onnx")
    text = str(e.value)
    assert "'sc' (ScatterND): error: not supported: op type ScatterND" in text
    assert "'hm' (Hardmax)" in text and EARLY_NOTE not in text


def test_simplifier_op_types_cover_the_installed_onnxscript():
    """Every op type onnxscript's optimizer evaluates partially or names in
    a default rewrite rule is a supported one or in SIMPLIFIER_OP_TYPES
    (an onnxscript upgrade that adds a rule fails here)."""
    import onnxscript

    root = Path(onnxscript.__file__).parent
    folding = (root / "optimizer" / "_constant_folding.py").read_text()
    named = set(re.findall(r'@register\("([A-Za-z]+)"', folding))
    for f in sorted((root / "rewriter" / "rules" / "common").glob("*.py")):
        text = f.read_text()
        named |= set(re.findall(r"\bop\.([A-Z][A-Za-z]+)\(", text))
        named |= set(re.findall(r'op_type\s*(?:==|in)\s*[\(\{\[]?\s*"([A-Z][A-Za-z]+)"', text))
    assert named and named - SUPPORTED <= SIMPLIFIER_OP_TYPES, (
        named - SUPPORTED - SIMPLIFIER_OP_TYPES
    )


def test_supported_lists_the_converters():
    from nem.frontends.onnx.converters import CONVERTERS

    assert frozenset(CONVERTERS) == SUPPORTED


def test_an_op_type_shape_inference_cannot_follow_is_named(monkeypatch):
    """GroupNormalization (opset 21) before a Relu, kept as a node (as a
    function op whose body onnx cannot build would be; today its body
    replaces it, D-COMPILE-ONNX-FUNCTIONS): onnx's strict shape inference
    fails at the Relu ('Input 0 expected to have type'), which told an
    outside user to run onnx.checker; the error names the op type the
    importer does not take, the inference failure a note."""
    from nem.frontends.onnx import import_onnx, prepare

    monkeypatch.setattr(prepare, "expand_functions", lambda *args: {})
    from nem.frontends.onnx.diagnostics import OnnxImportError

    g = helper.make_graph(
        [
            helper.make_node("GroupNormalization", ["x", "s", "b"], ["n"], num_groups=2, name="gn"),
            helper.make_node("Relu", ["n"], ["y"], name="r"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 3])],
        [
            onnx.numpy_helper.from_array(np.ones(4, np.float32), "s"),
            onnx.numpy_helper.from_array(np.zeros(4, np.float32), "b"),
        ],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(OnnxImportError) as e:
        import_onnx(model, file="gn.onnx")
    text = e.value.render()
    assert text.startswith(
        "gn.onnx: node 0 'gn' (GroupNormalization): error: not supported: "
        "op type GroupNormalization"
    ), text
    assert "note: ONNX shape inference failed" in text


def test_an_op_type_with_an_exact_rewrite_names_it():
    """Upsample has no converter; its fix names the rewrite that works
    (nearest by whole factors: Reshape + Expand + Reshape), not the generic
    pointer.  (DepthToSpace, the example before session 26, converts.)"""
    from nem.frontends.onnx import import_onnx
    from nem.frontends.onnx.diagnostics import OnnxImportError

    scales = onnx.numpy_helper.from_array(np.ones(2, np.float32), "sc")
    with pytest.raises(OnnxImportError) as e:
        import_onnx(
            _model([helper.make_node("Upsample", ["x", "sc"], ["y"], name="up")], [scales]),
            file="up.onnx",
        )
    assert "node 0 'up' (Upsample)" in e.value.render()
    assert "Reshape + Expand + Reshape, exactly" in e.value.render()


def test_a_resize_that_is_no_weighted_sum_gets_no_nearest_rewrite():
    """Nearest upsampling computes another function than other Resizes (an
    outside user's report, session 22: following a fix that named it gave a
    model with wrong numbers). Linear and cubic ones compile since session
    29; tf_crop_and_resize, whose extrapolated outputs are no weighted sum
    of the input, is refused by its mode, with what is supported
    (D-COMPILE-RESIZE)."""
    from nem.frontends.onnx import import_onnx
    from nem.frontends.onnx.diagnostics import OnnxImportError

    node = helper.make_node(
        "Resize",
        ["x", "", "sc"],
        ["y"],
        name="up",
        mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize",
    )
    with pytest.raises(OnnxImportError) as e:
        import_onnx(
            _model([node], [onnx.numpy_helper.from_array(np.ones(2, np.float32), "sc")]),
            file="up.onnx",
        )
    text = e.value.render()
    assert "up.onnx: node 0 'up' (Resize): error: not supported: Resize with " in text
    assert "tf_crop_and_resize" in text and "Reshape + Expand + Reshape" not in text


def test_a_node_named_as_an_earlier_one_is_reported_as_itself(tmp_path):
    """Three nodes named `n` (onnx's checker accepts it): the Hardmax, node
    1, was reported as "node 0 'n' (Relu)", the first node of that name;
    it is now node 1 of its own type under a name of its own
    (`<name>_<index>`, D-COMPILE-SIMPLIFY)."""
    from nem.compile import CompileError, compile_onnx

    model = _model(
        [
            helper.make_node("Relu", ["x"], ["a"], name="n"),
            helper.make_node("Hardmax", ["a"], ["b"], name="n"),
            helper.make_node("Neg", ["b"], ["y"], name="n"),
        ]
    )
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / "dup.onnx"
    onnx.save(model, path)
    with pytest.raises(CompileError) as e:
        compile_onnx(str(path))
    assert str(e.value).splitlines()[0] == (
        f"{path}: node 1 'n_1' (Hardmax): error: not supported: op type Hardmax"
    )
