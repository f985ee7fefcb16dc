"""Grouped and depthwise convolutions raised to one `conv2d groups=G`
(D-LOW-GROUPCONV): the inputs of `conv_grouped.test` lowered and run under
3 random schedules against numpy, and ONNX Conv with group = C (depthwise,
with a channel multiplier) and 1 < group < C through nem-compile against
onnxruntime (2 random schedules)."""

from __future__ import annotations

import numpy as np
import pytest
from raise_runs import INPUTS, lower_and_run, mlir_opt, rand

GROUPED = INPUTS / "conv_grouped.mlir"


def _grouped_ref(x, w, stride):
    """Y[n, oh, ow, g, f] = sum X[n, s*oh + kh, s*ow + kw, g, c] * W[g, f, kh, kw, c]."""
    _, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    oh = (x.shape[1] - kh) // stride + 1
    ow = (x.shape[2] - kw) // stride + 1
    y = np.zeros((x.shape[0], oh, ow, w.shape[0], w.shape[1]))
    for i in range(kh):
        for j in range(kw):
            xs = x[
                :, i : i + stride * (oh - 1) + 1 : stride, j : j + stride * (ow - 1) + 1 : stride
            ]
            y += np.einsum("nhwgc,gfc->nhwgf", xs.astype(np.float64), w[:, :, i, j, :])
    return y


@pytest.mark.parametrize(
    "entry, xs, ws, stride",
    [
        ("grouped", (1, 6, 6, 2, 2), (2, 3, 3, 3, 2), 1),
        ("depthwise", (1, 9, 9, 4, 1), (4, 2, 3, 3, 1), 2),
    ],
)
@pytest.mark.slow  # 7 s (2 cases)
def test_nhwgc(tmp_path, entry, xs, ws, stride):
    if mlir_opt() is None:
        pytest.skip("the named op is generalized by upstream MLIR (the mlir extra)")
    rng = np.random.default_rng(5)
    x, w = rand(rng, xs), rand(rng, ws)
    ref = _grouped_ref(x, w, stride)
    y0 = rand(rng, ref.shape)
    out = lower_and_run(
        GROUPED, tmp_path, {"x": x, "w": w, "y": y0}, ["y"], "conv2d (groups=", entry
    )
    assert np.allclose(out["y"], y0 + ref, rtol=0, atol=1e-5)


@pytest.mark.slow  # 4 s
def test_depthwise_hwc(tmp_path):
    if mlir_opt() is None:
        pytest.skip("the named op is generalized by upstream MLIR (the mlir extra)")
    rng = np.random.default_rng(6)
    x, w = rand(rng, (1, 6, 6, 4)), rand(rng, (3, 3, 4))
    ref = sum(
        x[:, i : i + 4, j : j + 4, :].astype(np.float64) * w[i, j]
        for i in range(3)
        for j in range(3)
    )
    out = lower_and_run(
        GROUPED,
        tmp_path,
        {"x": x, "w": w, "y": np.zeros((1, 4, 4, 4), np.float32)},
        ["y"],
        "conv2d (groups=4)",
        "dw_hwc",
    )
    assert np.allclose(out["y"], ref, rtol=0, atol=1e-5)


@pytest.mark.slow  # 4 s
def test_tile_of_size_one(tmp_path):
    """A tiled depthwise nest whose tiles of size 1 leave unit-step loops of
    one iteration around tile loops and among the point loops (D-LOW-TILES;
    tile_size_one.test): raised to conv2d and exact.  Was one escape-hatch
    kernel over the whole nest ("non-unit step")."""
    rng = np.random.default_rng(7)
    x, w = rand(rng, (1, 6, 6, 2, 1)), rand(rng, (2, 1, 3, 3, 1))
    y0 = rand(rng, (1, 4, 4, 2, 1))
    out = lower_and_run(
        INPUTS / "tile_size_one.mlir",
        tmp_path,
        {"x": x, "w": w, "y": y0},
        ["y"],
        "-> conv2d (groups=2)",
    )
    assert np.allclose(out["y"], y0 + _grouped_ref(x, w, 1), rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "cin, cout, group, attrs",
    [
        (4, 8, 2, {"pads": [1, 1, 1, 1]}),  # 1 < group < C
        (4, 8, 4, {"strides": [2, 2]}),  # depthwise, multiplier 2
        (6, 6, 6, {"pads": [1, 0, 1, 2], "dilations": [1, 2]}),  # depthwise
    ],
)
@pytest.mark.slow  # 4 s (3 cases)
def test_onnx_grouped_conv(cin, cout, group, attrs):
    """ONNX Conv with groups through nem-compile (the affine route: tiled,
    staged in L1): raised, no escape-hatch task, onnxruntime's result."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("mlir.ir")
    from compile_runs import run_api

    from nem.compile import compile_onnx
    from nem.frontends.onnx import samples

    rng = np.random.default_rng(group)
    w = rng.uniform(-0.5, 0.5, (cout, cin // group, 3, 3)).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, cout).astype(np.float32)
    model = samples.single_op(
        "Conv", {"x": (1, cin, 9, 9)}, "f32", {"w": w, "b": b}, group=group, **attrs
    )
    result = run_api(model)
    assert "mlir.kernel" not in result.nem
    # on one engine the whole convolution is one grouped conv2d; over several
    # the engine split may cut the output channels at group boundaries, each
    # part an ungrouped conv2d (D-COMPILE-ENGINES, session 28)
    one = compile_onnx(model, device="npm_pro_x1", engines=1)
    assert f"groups={group}" in one.nem and "depthwise_conv2d" not in one.nem
