"""ONNX Resize (D-COMPILE-RESIZE): nearest upsampling by whole factors (a
copy) and every other float Resize (one product per resized axis with
ONNX's reference weights), compiled, run race-free under random schedules
and compared with onnxruntime; tf_crop_and_resize and unknown modes are
refused at the node."""

from __future__ import annotations

import numpy as np
import pytest
from compile_runs import graph_model, run_api, typed_model
from onnx import TensorProto, helper, numpy_helper

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


WEIGHTED = {
    "align_corners nearest 2x2": (
        {"coordinate_transformation_mode": "align_corners"},
        [1, 1, 2, 2],
    ),
    "asymmetric round_prefer_floor": (
        {"coordinate_transformation_mode": "asymmetric"},
        [1, 1, 2, 2],
    ),
    "half_pixel floor": ({"nearest_mode": "floor"}, [1, 1, 2, 2]),
    "nearest 1.5": ({}, [1, 1, 1.5, 2]),
    "nearest 0.5 (downsampling)": ({}, [1, 1, 0.5, 0.5]),
    "linear 2x2 (a U-Net's bilinear upsampling)": ({"mode": "linear"}, [1, 1, 2, 2]),
    "linear align_corners 1.5x3": (
        {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
        [1, 1, 1.5, 3],
    ),
    "linear antialias 0.6": ({"mode": "linear", "antialias": 1}, [1, 1, 0.6, 0.5]),
    "cubic 2x2": ({"mode": "cubic"}, [1, 1, 2, 2]),
    "cubic exclude_outside, coeff -0.5": (
        {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5},
        [1, 1, 0.8, 1.7],
    ),
}


@pytest.mark.parametrize("case", sorted(WEIGHTED))
def test_weighted_resizes_match_onnxruntime(case):
    """Each reads other input indices than `i // k`, or several: one matrix
    product per resized axis with ONNX's reference weights, raised to a NEM
    matmul (D-COMPILE-RESIZE)."""
    attrs, scales = WEIGHTED[case]
    result = run_api(resize_model(["", "sc"], [floats("sc", scales)], opset=18, **attrs))
    assert "matmul" in result.nem or "gemm" in result.nem


def test_a_resize_of_every_axis_matches_onnx_reference():
    """Linear over the batch and channel axes too (onnxruntime takes only
    the spatial ones: onnx's reference evaluator is the oracle)."""
    from onnx.reference import ReferenceEvaluator

    model = resize_model(["", "sc"], [floats("sc", [2, 1.5, 0.5, 1.25])], mode="linear")
    run_api(model, reference=lambda ins: dict(zip(["y"], ReferenceEvaluator(model).run(None, ins))))


def test_a_resize_after_a_conv_in_f16_matches_onnxruntime():
    """Linear upsampling of a convolution's output (NHWC-kept, D-COMPILE-LAYOUT),
    in f16."""
    w = numpy_helper.from_array(
        (np.random.default_rng(0).standard_normal((4, 3, 3, 3)) / 4).astype(np.float16), "w"
    )
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Resize", ["c", "", "sc"], ["y"], mode="linear"),
    ]
    sc = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
    model = typed_model(
        nodes,
        [("x", TensorProto.FLOAT16, [1, 3, 6, 6])],
        [("y", TensorProto.FLOAT16, None)],
        [w, sc],
    )
    run_api(model)


@pytest.mark.parametrize(
    ("attrs", "why"),
    [
        ({"coordinate_transformation_mode": "tf_crop_and_resize"}, "tf_crop_and_resize"),
        ({"mode": "area"}, "Resize mode 'area' is not one of"),
        # read as the defaults by the f32 nearest rule (a review, session 55)
        (
            {"coordinate_transformation_mode": "half_pixels"},
            "coordinate_transformation_mode 'half_pixels' is not one of half_pixel,",
        ),
        ({"nearest_mode": "round"}, "nearest_mode 'round' is not one of round_prefer_floor,"),
    ],
)
def test_other_resizes_are_refused_at_the_node(attrs, why):
    """tf_crop_and_resize's extrapolated outputs are not a weighted sum of
    the input: an error at the node, never another function."""
    model = resize_model(["", "sc"], [floats("sc", [1, 1, 2, 2])], **attrs)
    with pytest.raises(CompileError) as e:
        compile_onnx(model, device="npm_pro_x1")
    text = str(e.value)
    assert "node 0 'up' (Resize): error:" in text and why in text, text


NEAREST_TIES = {
    # scale 0.6 on 7: output 3 reads x[3 / 0.6] = x[5] in f32 (5.0), x[4] in f64
    # (4.9999998); onnx's reference (f64) picked x[4], onnxruntime x[5]
    "asymmetric floor 0.6": (
        {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
        0.6,
        7,
    ),
    "half_pixel round_prefer_floor 1.3": ({}, 1.3, 7),
    "pytorch_half_pixel round_prefer_ceil 0.3": (
        {
            "coordinate_transformation_mode": "pytorch_half_pixel",
            "nearest_mode": "round_prefer_ceil",
        },
        0.3,
        14,
    ),
}


@pytest.mark.parametrize("case", sorted(NEAREST_TIES))
def test_nearest_source_coordinates_are_computed_in_float32(case):
    """Nearest modes read the input at a source coordinate computed in f32
    as onnxruntime computes it (`resize.nearest_weights`): onnx's
    reference computes it in f64, and where the scale is not exact in
    binary the two pick pixels a whole step apart (an outside user, session
    55: 12 of 28 nearest cases differed from onnxruntime, errors up to 3.9)."""
    attrs, scale, n = NEAREST_TIES[case]
    # no Relu after it: a wrong pick between two negative inputs would not show
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], name="up", **attrs)
    run_api(graph_model([node], (1, 2, 3, n), [floats("sc", [1, 1, 1, scale])], 17))


def test_an_unused_roi_and_tf_half_pixel_for_nn_are_taken():
    """`roi` is read by tf_crop_and_resize only: Resize-11's required roi
    and an empty roi at opset 13 were refused (no opset-11 Resize compiled);
    `tf_half_pixel_for_nn` (Resize-11, deprecated at 13, which onnxruntime
    still runs) was an internal error in onnx's reference (session 55)."""
    empty = floats("roi", [])
    run_api(
        resize_model(["roi", "sc"], [empty, floats("sc", [1, 1, 2, 2])], opset=11, mode="linear")
    )
    run_api(
        resize_model(
            ["roi", "sc"],
            [empty, floats("sc", [1, 1, 1.5, 2])],
            opset=13,
            coordinate_transformation_mode="tf_half_pixel_for_nn",
        )
    )
    model = resize_model(
        ["", "sc"],
        [floats("sc", [1, 1, 2, 2])],
        opset=13,
        mode="linear",
        coordinate_transformation_mode="tf_half_pixel_for_nn",
    )
    with pytest.raises(
        CompileError, match="mode 'linear' with coordinate_transformation_mode tf_half_pixel_for_nn"
    ):
        compile_onnx(model, device="npm_pro_x1")


@pytest.mark.parametrize(
    ("op", "opset", "mode", "n", "scale"),
    [
        ("Resize", 10, "nearest", 7, 1.3),
        ("Resize", 10, "nearest", 13, 0.3),
        ("Resize", 10, "linear", 13, 0.3),
        ("Resize", 10, "linear", 7, 3.0),
        ("Upsample", 9, "nearest", 13, 1.7),
        ("Upsample", 9, "linear", 31, 2.3),
    ],
)
def test_resize_10_and_upsample_keep_their_coordinates(op, opset, mode, n, scale):
    """Resize-10 and Upsample resize with asymmetric coordinates, nearest
    rounding down where an axis grows and up where it shrinks (onnxruntime's
    SIMPLE mode); onnx's version converter upgrades them to a Resize with
    half_pixel, the default: 18 of 22 such cases were wrong once roi was
    taken (refused before; an outside user, session 55)."""
    node = helper.make_node(op, ["x", "sc"], ["y"], mode=mode)
    run_api(graph_model([node], (1, 1, 3, n), [floats("sc", [1, 1, 1, scale])], opset))


@pytest.mark.parametrize(
    ("attrs", "n", "scale"),
    [
        ({"mode": b"linear"}, 300, 1.7),
        ({"mode": b"cubic"}, 401, 2.3),
        ({"mode": b"cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5}, 333, 0.8),
        ({"mode": b"linear", "antialias": 1}, 2000, 0.05),  # supports of 40 inputs
        ({"mode": b"cubic", "antialias": 1}, 257, 0.6),
    ],
)
def test_long_axis_weights_from_probes_are_the_identitys(attrs, n, scale):
    """A long axis's weights come from 2k + 2 resized probe rows, not the n
    rows of the identity (an outside user's 16000 -> 8000 resampling took
    87 s, session 55): the same numbers, bit for bit, where the support is
    narrow and, after more classes, where it is wide (antialias 0.05)."""
    from types import SimpleNamespace

    from nem.frontends.onnx.resize import axis_resize, axis_weights

    node = SimpleNamespace(attrs=attrs)
    s = float(np.float32(scale))
    out = int(np.floor(n * np.float32(scale)))
    want = axis_resize(node, n, s, out, b"half_pixel")(np.eye(n))  # type: ignore[arg-type]
    assert np.array_equal(axis_weights(node, n, s, out, b"half_pixel"), want)  # type: ignore[arg-type]


def test_a_length_onnx_and_onnxruntime_round_apart_is_refused_at_the_node():
    """1000 x 0.7 is 699 outputs in f64 (ONNX's shape inference) and 700 in
    f32 (onnxruntime): a located error naming both (an internal error
    before, session 55)."""
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], name="up", mode="linear")
    model = graph_model([node], (1, 1, 2, 1000), [floats("sc", [1, 1, 1, 0.7])], 17)
    with pytest.raises(CompileError, match="ONNX's shape inference makes 699 outputs"):
        compile_onnx(model, device="npm_pro_x1")
