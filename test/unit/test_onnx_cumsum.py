"""ONNX CumSum (D-COMPILE-REDUCE): each output position adds the inputs it
covers in the order of onnxruntime's sequential scan, forward or
`reverse`, inclusive or `exclusive`; compiled, run race-free under random
schedules and compared with onnxruntime, on a graph input and on a Conv's
NHWC output, over a negative axis; an axis computed at run time is refused
at the node."""

from __future__ import annotations

import numpy as np
import pytest
from compile_runs import run_api, run_compiled
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


@pytest.mark.parametrize("reverse", [0, 1])
def test_an_f16_running_sum_is_accumulated_in_f32(reverse):
    """f16 sums run in f32 and round once (D-COMPILE-F16): the running sum of
    2,100 f16 ones stopped at 2048 (2048 + 1 rounds back to it in f16) where
    onnxruntime gives 2100 (an outside user's length regulator, session 55)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 2100])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 2100])
    axis = numpy_helper.from_array(np.array(1, np.int64), "axis")
    node = helper.make_node("CumSum", ["x", "axis"], ["y"], reverse=reverse)
    g = helper.make_graph([node], "g", [x], [y], [axis])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    result = compile_onnx(model, device="npm_pro_x1")
    it, _ = run_compiled(result, model, inputs={"x": np.ones((1, 2100), np.float16)})
    got = it.read_tensor("y", (1, 2100), np.float16)[0]
    want = np.arange(1, 2101) if not reverse else np.arange(2100, 0, -1)
    assert np.array_equal(got, want.astype(np.float16))  # f16 rounds 2049 and 2099 to even
