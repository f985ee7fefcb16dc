"""Fusion in L1 after a pooling (D-COMPILE-FUSE-L1, session 63): the
elementwise ops that read a window sum's or max's output run on its tile
while it is in L1, as a convolution's epilogues do: an AveragePool's scale
(by one count, or by each window's count: a weight of the output's rows and
columns), a Relu and a per-channel Add after a MaxPool, LRN's normalization
after its window sum of squares.  Each model is compiled fused and with
`fuse=False`: the same bits under random schedules (race-free),
onnxruntime's values, and the fused program moves fewer DMA bytes, by at
least the pooling output's write and read-back that fusing saves (the test
fails without the fusion)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import graph_model, same_bits, timed_cycles  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402


def _pool(op: str, out: str = "y", **attrs):
    return helper.make_node(op, ["x"], [out], name="pool", **attrs)


def _per_channel(c: int):
    v = np.random.default_rng(1).uniform(-1, 1, (1, c, 1, 1)).astype(np.float32)
    return numpy_helper.from_array(v, "b")


CASES = {
    # (nodes, input shape, initializers, output elements); outputs of the
    # pooling: 24 channels of 14 x 14 or 28 x 28
    "average 2x2 stride 2": (
        [_pool("AveragePool", kernel_shape=[2, 2], strides=[2, 2])],
        [1, 24, 28, 28],
        [],
        24 * 14 * 14,
    ),
    "average 3x3 padded, each window's count": (
        [_pool("AveragePool", kernel_shape=[3, 3], pads=[1] * 4)],
        [1, 24, 28, 28],
        [],
        24 * 28 * 28,
    ),
    "average, ceil_mode, batch 2": (
        [_pool("AveragePool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
        [2, 24, 27, 27],
        [],
        2 * 24 * 13 * 13,
    ),
    "max, Relu, per-channel Add": (
        [
            _pool("MaxPool", "p", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
            helper.make_node("Relu", ["p"], ["r"], name="relu"),
            helper.make_node("Add", ["r", "b"], ["y"], name="add"),
        ],
        [1, 24, 28, 28],
        [_per_channel(24)],
        24 * 14 * 14,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_poolings_epilogues_run_on_its_tile(case):
    nodes, shape, inits, n = CASES[case]
    fused, plain = same_bits(graph_model(nodes, shape, inits))
    assert plain - fused >= 2 * n * 4, (fused, plain)


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_lrns_normalization_runs_on_its_window_sums_tile(elem):
    """LRN (Inception v1's second moved 3.5x its tensors' bytes): the
    normalization reads the window sums in the pooling's own view, so it
    runs on the pooling's tile; the sums are never written (f16: computed in
    f32 and rounded once, as unfused)."""
    node = helper.make_node("LRN", ["x"], ["y"], name="lrn", size=5, alpha=2e-4, beta=0.6, bias=2.0)
    model = graph_model([node], [1, 32, 17, 13], elem=elem)
    fused, plain = same_bits(model)
    width = 2 if elem == TensorProto.FLOAT16 else 4
    assert plain - fused >= 2 * 32 * 17 * 13 * width, (fused, plain)


def test_a_fused_pooling_takes_fewer_cycles():
    """The scale of an average pooling in L1: fewer cycles in the timed
    model than the pooling and the scale apart (590 against 934 when
    written)."""
    node = _pool("AveragePool", kernel_shape=[2, 2], strides=[2, 2])
    model = graph_model([node], [1, 24, 28, 28])
    fused = compile_onnx(model, device="npm_pro_x1")
    plain = compile_onnx(model, device="npm_pro_x1", fuse=False)
    assert timed_cycles(fused.nem) < timed_cycles(plain.nem)
