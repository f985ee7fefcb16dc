"""ONNX Resize, nearest upsampling by whole factors (D-COMPILE-RESIZE):
compiled, run race-free under random schedules and compared with
onnxruntime; the variants whose output is not a whole repetition of each
element are refused at the node."""

from __future__ import annotations

import numpy as np
import pytest
from compile_runs import graph_model, run_api
from onnx import helper, numpy_helper

from nem.compile import CompileError, compile_onnx


def resize_model(inputs, inits, opset=17, shape=(1, 4, 5, 6), **attrs):
    """`x` -> Resize(x, *inputs) -> Relu -> `y` (the Relu reads the
    upsampled tensor as a next layer would)."""
    nodes = [
        helper.make_node("Resize", ["x", *inputs], ["r"], name="up", **attrs),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    return graph_model(nodes, shape, inits, opset)


def floats(name, values):
    return numpy_helper.from_array(np.array(values, np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


CASES = {
    # the defaults: half_pixel, round_prefer_floor (a U-Net's or FPN's upsampling)
    "scales 2x2": lambda: resize_model(["", "sc"], [floats("sc", [1, 1, 2, 2])]),
    "asymmetric floor 3x2": lambda: resize_model(
        ["", "sc"],
        [floats("sc", [1, 1, 3, 2])],
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    ),
    "pytorch_half_pixel round_prefer_ceil": lambda: resize_model(
        ["", "sc"],
        [floats("sc", [1, 2, 2, 3])],
        coordinate_transformation_mode="pytorch_half_pixel",
        nearest_mode="round_prefer_ceil",
    ),
    "sizes": lambda: resize_model(["", "", "sz"], [ints("sz", [1, 4, 10, 18])]),
    "axes (opset 18)": lambda: resize_model(
        ["", "sc"], [floats("sc", [4, 2])], opset=18, axes=[2, 3]
    ),
    "align_corners, factor 1 on the resized axes' others": lambda: resize_model(
        ["", "sc"], [floats("sc", [1, 1, 1, 1])], coordinate_transformation_mode="align_corners"
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_nearest_upsampling_matches_onnxruntime(case):
    run_api(CASES[case]())


@pytest.mark.parametrize(
    ("attrs", "scales", "why"),
    [
        ({"coordinate_transformation_mode": "align_corners"}, [1, 1, 2, 2], "align_corners"),
        ({"coordinate_transformation_mode": "asymmetric"}, [1, 1, 2, 2], "round_prefer_floor"),
        ({"nearest_mode": "floor"}, [1, 1, 2, 2], "nearest_mode floor"),
        ({}, [1, 1, 1.5, 2], "Resize by 1.5 on axis 2"),
        ({}, [1, 1, 0.5, 0.5], "Resize by 0.5 on axis 2"),
    ],
)
def test_other_resizes_are_refused_at_the_node(attrs, scales, why):
    """Each of these reads input indices other than `i // k` (or is not a
    whole upsampling): an error at the node, never another function."""
    model = resize_model(["", "sc"], [floats("sc", scales)], **attrs)
    with pytest.raises(CompileError) as e:
        compile_onnx(model, device="npm_pro_x1")
    text = str(e.value)
    assert "node 0 'up' (Resize): error: not supported" in text and why in text, text
