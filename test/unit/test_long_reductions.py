"""A max over one long axis is reduced in two (D-COMPILE-REDUCE,
session 54; `emit.long_axis_split`): the lowering raises an order-free reduction to
one `max` task per point of the reduced axis, so a Softmax's row max
over 3,136 elements was 3,136 serial tasks and 21 s of compile CPU,
quadratic in the row (311 s over 12,544; an outside review).  Split as
[m, n/m] (m the divisor nearest sqrt(n) from below) it is n/m + m tasks,
the same result (max is order-free), onnxruntime's values.  (A min is
not raised per point: one escape-hatch kernel, left whole.)"""

from __future__ import annotations

import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import run_compiled  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402
from nem.compile.check import max_violation, onnxruntime_run  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402
from nem.frontends.onnx.emit import long_axis_split  # noqa: E402


def _model(op: str, shape: list[int], **attrs):
    g = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], name="r", **attrs)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize(
    "op, shape, attrs, most",
    [
        # 8 rows of 3,136 (56x56): 56 + 56 per engine part, not 3,136
        ("ReduceMax", [1, 8, 3136], {"axes": [2]}, 4 * (56 + 56)),
        ("ReduceMax", [1, 3136, 4], {"axes": [1]}, 4 * (56 + 56)),
        # the row max of a decomposed f32 Softmax (its row sum stays a kernel)
        ("Softmax", [1, 8, 3136], {"axis": -1}, 4 * (56 + 56)),
        # a prime row: padded by one -inf to 56 x 55 (the same review: 15.4 s
        # over 10,007, one max per element)
        ("ReduceMax", [1, 8, 3079], {"axes": [2]}, 4 * (56 + 55)),
        ("Softmax", [1, 3079, 2], {"axis": 1}, 4 * (56 + 55)),
    ],
)
def test_a_long_max_is_two_short_ones(op, shape, attrs, most):
    model = _model(op, shape, **attrs)
    result = compile_onnx(model, device="npm_pro_x1")
    tasks = result.nem.count("= max.async")
    assert 0 < tasks <= most, tasks
    inputs = samples.random_inputs(model, seed=2)
    it, _ = run_compiled(result, model, schedules=1, inputs=inputs)
    ((name, s, d),) = result.interface.outputs
    assert max_violation(it.read_tensor(name, s, d), onnxruntime_run(model, inputs)["y"]) <= 1.0


@pytest.mark.parametrize(
    "shape, axis, split",
    [
        ([1, 8, 3136], 2, ([8, 56, 56], 1, 0)),
        ([3136, 4], 0, ([56, 56, 4], 0, 0)),
        ([2, 100, 3], 1, None),  # axes of more than one element before and after it
        ([1, 8, 3079], 2, ([8, 56, 55], 1, 1)),  # a prime extent: padded by one -inf
        ([1, 8, 2 * 3079], 2, ([8, 79, 78], 1, 4)),  # a divisor (2) far under sqrt
        ([1, 8, 63], 2, None),  # short
        ([1, 1, 128], 2, ([8, 16], 0, 0)),
    ],
)
def test_which_axes_are_split(shape, axis, split):
    got = long_axis_split(shape, axis)
    assert (None if got is None else (got.shape, got.at, got.pad)) == split
