"""ONNX Dropout: the identity in inference, its mask all true; training
mode with a nonzero ratio refused (its output is random).  Before session
29 a Dropout whose `training_mode` was a constant true compiled as the
identity: a wrong program without a diagnostic."""

from __future__ import annotations

import numpy as np
import pytest
from compile_runs import run_compiled, typed_model
from onnx import TensorProto, helper, numpy_helper

from nem.compile import CompileError, compile_onnx
from nem.compile.check import onnxruntime_run

F, B = TensorProto.FLOAT, TensorProto.BOOL


def _model(ratio: float, training: bool | None, mask: bool = True):
    inits = [numpy_helper.from_array(np.array(ratio, np.float32), "r")]
    inputs = ["x", "r"]
    if training is not None:
        inits.append(numpy_helper.from_array(np.array(training), "t"))
        inputs.append("t")
    outs = ["y", "m"] if mask else ["y"]
    node = helper.make_node("Dropout", inputs, outs, name="drop")
    declared = [("y", F, [3, 5])] + ([("m", B, [3, 5])] if mask else [])
    return typed_model([node], [("x", F, [3, 5])], declared, inits)


def test_training_mode_with_a_ratio_is_refused_at_the_node():
    with pytest.raises(CompileError) as e:
        compile_onnx(_model(0.5, True, mask=False))
    text = str(e.value)
    assert "node 0 'drop' (Dropout): error: not supported: Dropout in training mode" in text
    assert "its output is random" in text


@pytest.mark.parametrize(("ratio", "training"), [(0.5, None), (0.5, False), (0.0, True)])
def test_the_identity_and_an_all_true_mask_match_onnxruntime(ratio, training):
    model = _model(ratio, training)
    result = compile_onnx(model)
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    it, _ = run_compiled(result, model, inputs={"x": x})
    want = onnxruntime_run(model, {"x": x})
    for name, shape, dtype in result.interface.outputs:
        got = it.read_tensor(name, shape, dtype)
        expected = want[result.interface.onnx_names[name]]
        np.testing.assert_array_equal(got, expected.astype(got.dtype))


def test_a_training_mode_input_is_bound():
    node = helper.make_node("Dropout", ["x", "", "t"], ["y"], name="drop")
    model = typed_model([node], [("x", F, [3, 5]), ("t", B, [])], [("y", F, [3, 5])])
    with pytest.raises(CompileError) as e:
        compile_onnx(model)
    assert "nem-compile --bind t=VALUES" in str(e.value)
    assert compile_onnx(model, bind={"t": np.array(False)}).interface.inputs[0][0] == "x"
