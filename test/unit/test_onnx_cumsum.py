"""ONNX CumSum (D-COMPILE-REDUCE): each output position adds the inputs it
covers in the order of onnxruntime's sequential scan, forward or
`reverse`, inclusive or `exclusive`; compiled, run race-free under random
schedules and compared with onnxruntime, on a graph input and on a Conv's
NHWC output, over a negative axis; an axis computed at run time is refused
at the node."""

from __future__ import annotations

import numpy as np
import pytest
from compile_runs import run_api
from onnx import TensorProto, helper, numpy_helper

from nem.compile import CompileError, compile_onnx


def _model(shape, axis: int, conv: bool = False, axis_input: bool = False, **attrs):
    nodes, src = [], "x"
    inits = [] if axis_input else [numpy_helper.from_array(np.array(axis, np.int64), "axis")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))]
    if axis_input:
        inputs.append(helper.make_tensor_value_info("axis", TensorProto.INT64, []))
    if conv:
        w = np.random.default_rng(7).standard_normal((5, shape[1], 3, 3)).astype(np.float32)
        inits.append(numpy_helper.from_array(w * 0.3, "w"))
        nodes.append(helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]))
        src = "c"
    nodes.append(helper.make_node("CumSum", [src, "axis"], ["y"], name="cs", **attrs))
    g = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


CASES = {
    "axis 1": lambda: _model((3, 7, 2), 1),
    "last axis, exclusive": lambda: _model((4, 9), -1, exclusive=1),
    "axis 0, reverse": lambda: _model((6, 3), 0, reverse=1),
    "reverse exclusive": lambda: _model((2, 5, 4), 2, reverse=1, exclusive=1),
    "a conv's channels": lambda: _model((1, 3, 4, 4), 1, conv=True),
    "a conv's width, reverse": lambda: _model((1, 2, 3, 6), -1, conv=True, reverse=1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cumsum_matches_onnxruntime(case):
    run_api(CASES[case]())


def test_an_axis_computed_at_run_time_is_refused_at_the_node():
    with pytest.raises(CompileError) as e:
        compile_onnx(_model((3, 4), 1, axis_input=True), device="npm_pro_x1")
    assert "node 0 'cs' (CumSum)" in str(e.value) and "axis" in str(e.value)
