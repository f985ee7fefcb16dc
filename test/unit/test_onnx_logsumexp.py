"""ReduceLogSumExp as `m + log(sum(exp(x - m)))` (D-COMPILE-REDUCE,
session 54): onnx's body, `log(sum(exp(x)))` in float64, is f32 here
(D-COMPILE-F64), and an input of 100 gave inf where onnxruntime gives
100.00676 (an outside review).  Compiled, run race-free under a random
schedule, compared with onnxruntime; infinite rows as onnxruntime's."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
onnx = pytest.importorskip("onnx")

from compile_runs import run_compiled  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402
from nem.compile.check import max_violation, onnxruntime_run  # noqa: E402


def _model(opset: int, axes: list[int], keepdims: int, dtype=np.float32, shape=(2, 3, 5)):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inputs, inits, attrs = ["x"], [], {"keepdims": keepdims}
    if opset >= 18:
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        inputs.append("axes")
    else:
        attrs["axes"] = axes
    g = helper.make_graph(
        [helper.make_node("ReduceLogSumExp", inputs, ["y"], name="lse", **attrs)],
        "g",
        [helper.make_tensor_value_info("x", elem, list(shape))],
        [helper.make_tensor_value_info("y", elem, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize(
    "opset, axes, keepdims, dtype",
    [
        (13, [1], 0, np.float32),
        (17, [-1], 1, np.float32),
        (18, [0, 2], 0, np.float32),
        (13, [2], 1, np.float16),
    ],
)
def test_large_and_small_inputs_give_onnxruntime_s_values(opset, axes, keepdims, dtype):
    model = _model(opset, axes, keepdims, dtype)
    rng = np.random.default_rng(4)
    base = rng.uniform(-3, 3, (2, 3, 5))
    x = (base + np.where(np.arange(5) % 2, 100.0, -110.0)).astype(dtype)  # exp overflows f32
    x[1, 2, :] = -np.inf  # a row of -inf: -inf
    x[0, 1, 3] = np.inf  # a row holding +inf: +inf
    result = compile_onnx(model, device="npm_pro_x1")
    it, _ = run_compiled(result, model, schedules=1, inputs={"x": x})
    ((name, shape, dt),) = result.interface.outputs
    got = it.read_tensor(name, shape, dt)
    want = onnxruntime_run(model, {"x": x})["y"]
    assert max_violation(got, want) <= 1.0
    assert np.isfinite(want).any() and not np.isfinite(want).all()  # both kinds of rows
