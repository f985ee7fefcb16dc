"""ONNX ArgMax and ArgMin (D-COMPILE-REDUCE): the extreme along the axis,
then the first (`select_last_index`: the last) position holding it, as i32
(ONNX's int64 demoted, D-COMPILE-I64); compiled, run race-free under random
schedules and compared with onnxruntime, with ties, on a Conv's NHWC output
and with `keepdims` 0."""

from __future__ import annotations

import numpy as np
import pytest
from compile_runs import run_api
from onnx import TensorProto, helper, numpy_helper


def _model(op: str, shape, conv: bool = False, elem=TensorProto.FLOAT, **attrs):
    nodes, inits, src = [], [], "x"
    if conv:
        w = np.random.default_rng(5).standard_normal((6, shape[1], 3, 3)).astype(np.float32)
        inits.append(numpy_helper.from_array(w * 0.3, "w"))
        nodes.append(helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]))
        src = "c"
    nodes.append(helper.make_node(op, [src], ["y"], name="arg", **attrs))
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", elem, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


CASES = {
    "argmax axis 1": lambda: _model("ArgMax", (2, 5, 7), axis=1),
    "argmax last axis, keepdims 0": lambda: _model("ArgMax", (3, 4, 6), axis=-1, keepdims=0),
    "argmin axis 0": lambda: _model("ArgMin", (4, 3), axis=0),
    "argmax of a conv, channels": lambda: _model("ArgMax", (1, 3, 5, 5), conv=True, axis=1),
    "argmin of a conv, width, last": lambda: _model(
        "ArgMin", (1, 3, 4, 6), conv=True, axis=3, select_last_index=1
    ),
    "argmax f16": lambda: _model("ArgMax", (2, 9), elem=TensorProto.FLOAT16, axis=1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_arg_extremes_match_onnxruntime(case):
    run_api(CASES[case]())


@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_ties_pick_the_first_or_last_position(op, last):
    """Rows with several equal extremes: the first position by default, the
    last with `select_last_index=1`, as onnxruntime."""
    import onnxruntime as ort
    from compile_runs import run_compiled

    from nem.compile import compile_onnx

    model = _model(op, (6, 8), axis=1, select_last_index=last)
    result = compile_onnx(model, device="npm_pro_x1")
    x = np.array([[1, 3, 3, 0, 3, 2, 1, 0]] * 3 + [[0, 0, 0, 0, 0, 0, 0, 0]] * 3, np.float32)
    it, _ = run_compiled(result, model, inputs={"x": x})
    got = it.read_tensor("y", (6, 1), np.int32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    assert got.tolist() == want.tolist()


def test_an_integer_argmax_is_refused_with_a_fix():
    """ArgMax takes float data only; the refusal says how to get there (an
    outside user: no fix line, session 55)."""
    from nem.compile import CompileError, compile_onnx

    with pytest.raises(CompileError) as e:
        compile_onnx(_model("ArgMax", (2, 5), elem=TensorProto.INT32, axis=1), device="npm_pro_x1")
    text = str(e.value)
    assert "node 0 'arg' (ArgMax): error: not supported: ArgMax of integer data ('x', i32)" in text
    assert "fix: Cast 'x' to FLOAT before the ArgMax" in text
