"""Attributes a converter does not read (D-COMPILE-ATTRS): the importer
remembers which attributes each converter looked at; one it never read,
set to another value than the schema's default, is a located `not
supported`, never a silent miscompile (SpaceToDepth's `mode` was ignored
until session 28, and CRD compiled as DCR).  Defaults written out and the
attributes that cannot change an inference result (IGNORED_ATTRIBUTES)
pass."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from nem.compile import CompileError, compile_onnx
from nem.frontends.onnx.driver import IGNORED_ATTRIBUTES


def _layernorm(elem: int, **attrs) -> onnx.ModelProto:
    g = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", **attrs)],
        "g",
        [helper.make_tensor_value_info("x", elem, [2, 8])],
        [helper.make_tensor_value_info("y", elem, None)],
        [helper.make_tensor("s", elem, [8], [1.0] * 8)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_an_attribute_the_converter_ignores_is_an_error_at_the_node():
    """stash_type=0 asks for f16 statistics; the converter computes them in
    f32 and never read the attribute."""
    with pytest.raises(CompileError) as e:
        compile_onnx(_layernorm(TensorProto.FLOAT16, stash_type=0), device="npm_pro_x1")
    text = str(e.value)
    assert "node 0 'ln' (LayerNormalization)" in text, text
    assert "not supported: LayerNormalization attribute 'stash_type' = 0" in text, text
    assert "D-COMPILE-ATTRS" in text


def test_defaults_written_out_and_ignorable_attributes_compile():
    compile_onnx(_layernorm(TensorProto.FLOAT, stash_type=1, axis=-1), device="npm_pro_x1")
    g = helper.make_graph(
        [helper.make_node("Dropout", ["x"], ["y"], name="d", seed=7)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    compile_onnx(model, device="npm_pro_x1")


@pytest.mark.parametrize(("op", "name"), sorted(IGNORED_ATTRIBUTES))
def test_each_ignored_attribute_is_an_attribute_of_its_op(op, name):
    assert name in onnx.defs.get_schema(op).attributes


def test_an_input_the_converter_never_looks_at_is_an_error_at_the_node(monkeypatch):
    """Inputs too (session 29): Dropout's converter was the identity, which
    never looked at `training_mode`, and a training-mode Dropout compiled
    as the identity.  With that converter back, the guard refuses the
    node instead of compiling it."""
    import numpy as np
    from onnx import numpy_helper

    from nem.frontends.onnx import converters
    from nem.frontends.onnx.ops import identity

    monkeypatch.setitem(converters.CONVERTERS, "Dropout", identity)
    g = helper.make_graph(
        [helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [
            numpy_helper.from_array(np.array(0.5, np.float32), "r"),
            numpy_helper.from_array(np.array(True), "t"),
        ],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(CompileError) as e:
        compile_onnx(model, device="npm_pro_x1")
    text = str(e.value)
    assert "node 0 'drop' (Dropout): error: not supported: Dropout input 1 'r' (ratio)" in text
    assert "the importer does not read it (D-COMPILE-ATTRS)" in text
