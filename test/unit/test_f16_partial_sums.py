"""An f16 sum is not split over engines (D-COMPILE-ENGINES, session 27).

NEM's f16 `conv2d`/`matmul` sums its products wide and rounds once
(D-NUM-LINEAR-FLOAT).  The engine split along a reduction loop gave each
part a partial sum of its own, rounded to f16, then added the roundings in
f16: graph fuzz campaign seed 2602's m8, an f16 Conv over 13 input channels
cut 4, 4, 4, 1 on npm_pro_x1, was 1.06 tolerances off the exact result.
These are that Conv (and a MatMul split along K alike) cut down to one node,
with inputs whose partial sums cancel: 1000 + 0.3 in the first part, -1000
in another.  Rounded per part, 1000.3 is 1000.5 and the output 0.5, 15
tolerances from onnxruntime's 0.3; summed whole, the output is f16(0.3).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from compile_runs import run_compiled
from onnx import TensorProto, helper, numpy_helper

from nem.compile import compile_onnx
from nem.compile.check import max_violation, onnxruntime_run


def _model(node: onnx.NodeProto, x: list[int], w: np.ndarray, y: list[int]) -> onnx.ModelProto:
    g = helper.make_graph(
        [node],
        "partials",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, x)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, y)],
        [numpy_helper.from_array(w, "w")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 10
    return m


def fuzz_2602_m8_conv() -> onnx.ModelProto:
    """m8's Conv_3: 13 input channels, kernel 3x2, stride 3 (split 4, 4, 4, 1)."""
    w = np.zeros((4, 13, 3, 2), np.float16)
    w[:, 0, 0, 0], w[:, 0, 0, 1], w[:, 4, 0, 0] = 1000.0, 0.3, -1000.0
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 2], strides=[3, 1])
    return _model(node, [1, 13, 4, 6], w, [1, 4, 1, 5])


def matmul_along_k() -> onnx.ModelProto:
    """[2, 64] x [64, 3]: split along K on npm_pro_x1 before the fix."""
    w = np.zeros((64, 3), np.float16)
    w[0], w[1], w[63] = 1000.0, 0.3, -1000.0
    return _model(helper.make_node("MatMul", ["x", "w"], ["y"]), [2, 64], w, [2, 3])


@pytest.mark.parametrize("route", ["affine", "transform"])
@pytest.mark.parametrize("make", [fuzz_2602_m8_conv, matmul_along_k])
def test_cancelling_f16_partial_sums_match_onnxruntime(make, route):
    model = make()
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    inputs = {"x": np.ones(shape, np.float16)}
    result = compile_onnx(model, device="npm_pro_x1", route=route)
    it, _ = run_compiled(result, model, "npm_pro_x1", inputs=inputs)
    (name, out_shape, dtype) = result.interface.outputs[0]
    got = it.read_tensor(name, out_shape, dtype)
    want = onnxruntime_run(model, inputs)["y"]
    assert max_violation(got, want) <= 1.0, (got.ravel()[:4], want.ravel()[:4])
