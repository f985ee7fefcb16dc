"""How the engine split ranks a convolution's row split against its split
along the reduction (D-COMPILE-ENGINES, session 28, issue 35).

A row part reads all the weights; what that costs depends on the tiling:
once when the weights' copy is hoisted out of the part's tile loops, once
per tile when it stays inside one (a part of 7 output rows tiled in column
blocks re-reads every weight for each block).  Until session 28 the
estimate charged a row part the weights once, and ZFNet's 5x5 stride-2
convolution ran split by rows, DMA-bound on the re-read weights (140,290
cycles; 93,060 along its reduction).  A part's reads are now charged what
its tiles stream (`tile_cost.streamed`, the tiling's own sizes), and the
sum of the partial buffers after a reduction split is split over the
engines as any elementwise nest (on engine 0 alone its reads of every
partial cost AlexNet's 3x3 convolutions more than their row split)."""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from compile_runs import run_api  # noqa: E402
from onnx import helper  # noqa: E402
from roofline_models import small_model, timed_session  # noqa: E402


def strided_conv():
    """x 1x64x54x54, Conv 64 -> 128 5x5 stride 2 (25x25 outputs), Relu:
    ZFNet's second convolution with fewer channels.  Its row parts are
    tiled in column blocks, each re-reading the 819 KB of weights."""
    return small_model(
        "conv5",
        [("x", [1, 64, 54, 54])],
        [("y", [1, 128, 25, 25])],
        [
            helper.make_node(
                "Conv", ["x", "W", "B"], ["c"], name="conv", kernel_shape=[5, 5], strides=[2, 2]
            ),
            helper.make_node("Relu", ["c"], ["y"], name="relu"),
        ],
        [("W", (128, 64, 5, 5)), ("B", (128,))],
    )


def test_a_convolution_whose_row_parts_stream_their_weights_splits_along_its_reduction():
    session, _ = timed_session(strided_conv(), "conv5")
    rep = session.roofline()
    conv = {g.name: g for g in rep.groups}["node 'conv' (Conv)"]
    # before session 28: split by rows, 55,262 cycles, DMA-bound (its DMA
    # work 36,535 cycles: the weights re-read per column tile), its NMUs 28%
    # busy; along its reduction (4 parts of 16 input channels, partial sums
    # added over the engines): 26,305 cycles, NMU-bound, 59%
    assert conv.binds == "NMU", conv.binds
    assert conv.units["NMU"].utilization > 0.5


def test_the_convolution_split_along_its_reduction_matches_onnxruntime():
    run_api(strided_conv())
