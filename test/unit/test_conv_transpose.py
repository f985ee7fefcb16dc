"""ConvTranspose by phases (D-COMPILE-CONVT-PHASES, `conv_transpose.py`):
with a compile-time kernel, no dilation and each kernel at least as long
as its stride, one stride-1 convolution of the undilated input per phase
of the stride, each written into the result's strided slice.  Each
minimized model is compiled so and by the dilated convolution (the route
before, `by_phases` off): the same bits under random schedules, within
onnxruntime's tolerance; a stride-2 layer multiplies 4x fewer products and
runs in fewer cycles (the test fails with the dilated route)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import nmu_macs, run_compiled, timed_cycles  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402
from nem.compile.check import max_violation, onnxruntime_run  # noqa: E402
from nem.frontends.onnx import conv_transpose, samples  # noqa: E402


def _model(c, f, hw, k, st, spatial=2, group=1, bias=True, dtype=np.float32, **attrs):
    """x (1 x c x hw^spatial) -> ConvTranspose to f channels (kernel k,
    stride st, `attrs`: pads, output_padding, output_shape, auto_pad)."""
    rng = np.random.default_rng(1)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    ks = [k] * spatial if isinstance(k, int) else list(k)
    inits = [numpy_helper.from_array(rng.uniform(-1, 1, (c, f // group, *ks)).astype(dtype), "w")]
    if bias:
        inits.append(numpy_helper.from_array(rng.uniform(-1, 1, f).astype(dtype), "b"))
    strides = [st] * spatial if isinstance(st, int) else list(st)
    hws = [hw] * spatial if isinstance(hw, int) else list(hw)
    node = helper.make_node(
        "ConvTranspose",
        ["x", "w", "b"][: len(inits) + 1],
        ["y"],
        name="up",
        strides=strides,
        group=group,
        **attrs,
    )
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", elem, [1, c, *hws])],
        [helper.make_tensor_value_info("y", elem, None)],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _dilated(monkeypatch) -> None:
    """Compile ConvTranspose as the dilated convolution (the route before)."""
    monkeypatch.setattr(conv_transpose, "by_phases", lambda *a: False)


def _output(result, model, schedules):
    it, _ = run_compiled(result, model, "npm_pro_x1", schedules)
    ((name, shape, dtype),) = result.interface.outputs
    return it.read_tensor(name, shape, dtype)


CASES = {
    "k2s2": dict(c=8, f=16, hw=7, k=2, st=2),
    "k3s2_output_padding": dict(c=8, f=16, hw=7, k=3, st=2, pads=[1] * 4, output_padding=[1, 1]),
    "k4s2": dict(c=8, f=16, hw=7, k=4, st=2, pads=[1] * 4),
    "k3s3_asymmetric_pads": dict(c=4, f=8, hw=5, k=3, st=3, pads=[0, 1, 2, 0]),
    "per_axis": dict(
        c=4, f=8, hw=(5, 6), k=(3, 4), st=(2, 3), pads=[1, 0, 0, 2], output_padding=[1, 2]
    ),
    "grouped": dict(c=8, f=8, hw=6, k=3, st=2, pads=[1] * 4, group=4),
    "depthwise": dict(c=8, f=8, hw=6, k=3, st=2, pads=[1] * 4, group=8),
    "same_lower": dict(c=4, f=8, hw=5, k=3, st=2, auto_pad="SAME_LOWER"),
    "output_shape_past_the_convolution": dict(c=4, f=8, hw=5, k=3, st=2, output_shape=[12, 12]),
    "pads_past_a_phase": dict(c=4, f=8, hw=5, k=3, st=2, pads=[2] * 4),
    "no_bias": dict(c=4, f=8, hw=5, k=5, st=2, bias=False),
    "f16": dict(c=4, f=8, hw=5, k=3, st=2, pads=[1] * 4, dtype=np.float16),
    "1d": dict(c=4, f=8, hw=9, k=4, st=2, pads=[1, 1], spatial=1),
    "3d": dict(c=2, f=4, hw=4, k=3, st=2, pads=[1] * 6, output_padding=[1, 1, 1], spatial=3),
}


@pytest.mark.parametrize("case", CASES)
def test_by_phases_is_bit_identical_to_the_dilated_convolution(case, monkeypatch):
    """The same products as the dilated convolution's that are not by zero,
    in the same order: the same bits (race-free under random schedules),
    onnxruntime's values."""
    model = _model(**CASES[case])
    phased = compile_onnx(model, device="npm_pro_x1")
    got = _output(phased, model, 2)
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))["y"]
    assert got.shape == want.shape and max_violation(got, want) <= 1.0
    _dilated(monkeypatch)
    dilated = compile_onnx(model, device="npm_pro_x1")
    assert phased.nem != dilated.nem  # (the route changed)
    before = _output(dilated, model, 0)
    assert np.array_equal(got.view(np.uint8), before.view(np.uint8))


def test_a_stride_2_layer_multiplies_4x_fewer_products_in_fewer_cycles(monkeypatch):
    """A U-Net's upsampling layer (64 -> 32 channels, 28x28 -> 56x56, kernel
    2, stride 2): the dilated convolution multiplies each output by all 4
    taps, 3 of them by a zero of the dilated input; by phases each output
    takes its one tap (an outside review, session 53: a ConvTranspose ran at
    4x the model's MACs).  npm_pro_x1, timed: 13,591 -> 5,902 cycles."""
    model = _model(c=64, f=32, hw=28, k=2, st=2)
    phased = compile_onnx(model, device="npm_pro_x1").nem
    _dilated(monkeypatch)
    dilated = compile_onnx(model, device="npm_pro_x1").nem
    assert nmu_macs(phased) * 4 == nmu_macs(dilated) == 56 * 56 * 4 * 64 * 32
    assert timed_cycles(phased) * 3 < timed_cycles(dilated) * 2


@pytest.mark.parametrize(
    "kernel, strides, dilations, phased",
    [
        ([3, 3], [2, 2], [1, 1], True),
        ([3, 3], [1, 1], [1, 1], False),  # no stride: the convolution itself
        ([3, 3], [2, 2], [2, 2], False),  # a dilation: phases of other taps
        ([2, 3], [3, 2], [1, 1], False),  # a phase without taps (2 < 3)
        ([8, 8], [4, 4], [1, 1], True),  # 16 phases
        ([16, 16], [8, 8], [1, 1], False),  # 64 phases: the compile grows with them
        ([4, 4, 4], [2, 2, 2], [1, 1, 1], True),
    ],
)
def test_which_transposed_convolutions_go_by_phases(kernel, strides, dilations, phased):
    assert conv_transpose.by_phases(kernel, strides, dilations) is phased
