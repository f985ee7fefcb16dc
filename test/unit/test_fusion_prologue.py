"""A convolution's prologue in L1 (D-COMPILE-FUSE-L1, session 64): the
elementwise op that alone computes a dense convolution's input (a
pre-activation network's BatchNormalization and Relu, DenseNet-121's 62
before its 1x1 convolutions) runs on each input tile in L1, in place after
the copy staging it, instead of writing its output to DDR for the
convolution to read back.  Each model is compiled fused and with
`fuse=False`: the same bits under random schedules (race-free),
onnxruntime's values, and where the prologue is fused the program moves
fewer DMA bytes, by at least the prologue output's size (its write and
read-back are saved, and the convolution's tiles may differ: the test fails
without the prologue)."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import graph_model, l1_needs, same_bits  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _weights(c_in: int, c_out: int, f: int, elem: int):
    """Two 3x3 convolutions' weights (c_in -> c_out each), BatchNormalization
    parameters of their concatenation (2 * c_out channels) and a 1x1
    convolution's (-> f), of ONNX element type `elem`."""
    dtype = np.float16 if elem == TensorProto.FLOAT16 else np.float32
    r = np.random.default_rng(5)
    c = 2 * c_out

    def t(name, *shape, lo=-0.5, hi=0.5):
        return numpy_helper.from_array(r.uniform(lo, hi, shape).astype(dtype), name)

    return [
        t("wa", c_out, c_in, 3, 3),
        t("wb", c_out, c_in, 3, 3),
        t("s", c, lo=0.5, hi=1.5),
        t("b", c),
        t("m", c),
        t("v", c, lo=0.5, hi=1.5),
        t("w", f, c, 1, 1),
    ]


def _dense_layer(stride: int = 1, pads: int = 0, bn: bool = True, k: int = 1, act=None):
    """DenseNet's layer: two convolutions concatenated (the block's growing
    input), BatchNormalization (or none), Relu (or the nodes `act` from `bn`
    to `r`), a k x k convolution (`_weights` makes it 1x1: `k` > 1 takes
    the model's own)."""
    return [
        helper.make_node("Conv", ["x", "wa"], ["a"], pads=[1] * 4),
        helper.make_node("Conv", ["x", "wb"], ["c2"], pads=[1] * 4),
        helper.make_node("Concat", ["a", "c2"], ["c"], axis=1),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"])
        if bn
        else helper.make_node("Identity", ["c"], ["bn"]),
        *(act or [helper.make_node("Relu", ["bn"], ["r"])]),
        helper.make_node(
            "Conv",
            ["r", "w" if k == 1 else "wk"],
            ["y"],
            strides=[stride] * 2,
            pads=[pads] * 4,
            name="conv",
        ),
    ]


def _const(name: str, shape: list[int], value: float | None = None):
    v = (
        np.random.default_rng(2).uniform(0.5, 1.5, shape)
        if value is None
        else np.full(shape, value)
    )
    return numpy_helper.from_array(v.astype(np.float32), name)


def _prologue_relus(nem: str) -> list[str]:
    """The regions a `relu` computes in place over that a `conv2d` then reads
    from (its first part, at the same buffer and offset): a prologue run on
    the convolution's staged input tile.  (A relu in place elsewhere, over
    an epilogue's own result, D-LOW-TREE-INPLACE, does not count.)"""
    found = []
    for r in re.findall(r"= relu\.async in (region\([^)]*\)) .* out \1", nem):
        start = r.rsplit(",", 1)[0]  # (`region(B, offset`)
        if f"conv2d.async in {start}," in nem:
            found.append(r)
    return found


CASES = {
    # (nodes, input shape, (c_in, c_out, f), element type, fused: the
    # prologue's input elements, 0 where it must not be fused)
    "f32 14x14": (_dense_layer(), [1, 8, 14, 14], (8, 32, 32), TensorProto.FLOAT, 64 * 14 * 14),
    # (f16: a Relu alone; a BatchNormalization's f32 scale and shift in an
    # f16 body is no op of one type, D-COMPILE-FUSE-CHAIN, and not fused)
    "f16 Relu 14x14": (
        _dense_layer(bn=False),
        [1, 8, 14, 14],
        (8, 32, 32),
        TensorProto.FLOAT16,
        64 * 14 * 14,
    ),
    "f16 14x14, not fused": (_dense_layer(), [1, 8, 14, 14], (8, 32, 32), TensorProto.FLOAT16, 0),
    "f32 batch 2, 28x28": (
        _dense_layer(),
        [2, 16, 28, 28],
        (16, 32, 48),
        TensorProto.FLOAT,
        2 * 64 * 28 * 28,
    ),
    "f32 stride 2": (
        _dense_layer(stride=2),
        [1, 8, 15, 15],
        (8, 16, 24),
        TensorProto.FLOAT,
        32 * 15 * 15,
    ),
    # not fused: a padded input (the border must stay 0, not relu(bn(0)));
    # a Relu after a MaxPool, which is the pooling's epilogue first (it had
    # been taken by both, and the second found it erased: an internal error)
    "padded 1x1": (_dense_layer(pads=1), [1, 8, 14, 14], (8, 16, 16), TensorProto.FLOAT, 0),
    "a MaxPool's Relu": (
        [
            helper.make_node("MaxPool", ["x"], ["c"], kernel_shape=[2, 2], strides=[2, 2]),
            *_dense_layer()[3:],
        ],
        [1, 64, 28, 28],
        (8, 32, 16),
        TensorProto.FLOAT,
        0,
    ),
}


# an outside user's models (session 64) that the tile stage could not run in
# place, an internal error each: now one op at the tile, out of place
OUT_OF_PLACE = {
    # (nodes, input shape, (c_in, c_out, f) of `_weights`, more initializers,
    # options): a constant over rows, each tile reading its rows' slice
    "Mul by a [1, 1, H, 1] constant": (
        _dense_layer(bn=False, act=[helper.make_node("Mul", ["bn", "k"], ["r"])]),
        [1, 8, 15, 15],
        (8, 12, 16),
        [_const("k", [1, 1, 15, 1])],
        {},
    ),
    "Max with a [1] zero": (
        _dense_layer(act=[helper.make_node("Max", ["bn", "k"], ["r"])]),
        [1, 8, 14, 14],
        (8, 12, 16),
        [_const("k", [1], 0.0)],
        {},
    ),
    # the input rows of the tiles staged in pieces
    "1x1 at 39x39, 2 x 9 -> 120 channels, one engine": (
        _dense_layer(),
        [1, 8, 39, 39],
        (8, 9, 120),
        [],
        {"engines": 1},
    ),
}


@pytest.mark.parametrize("case", list(OUT_OF_PLACE))
def test_a_prologue_not_run_in_place_runs_at_the_tile(case):
    nodes, shape, (c_in, c_out, f), extra, opts = OUT_OF_PLACE[case]
    inits = [*_weights(c_in, c_out, f, TensorProto.FLOAT), *extra]
    fused, plain = same_bits(graph_model(nodes, shape, inits), **opts)
    assert plain - fused >= 2 * c_out * shape[2] * shape[3] * 4, (fused, plain)


@pytest.mark.parametrize("case", list(CASES))
def test_a_prologue_runs_on_the_input_tile(case):
    nodes, shape, (c_in, c_out, f), elem, n = CASES[case]
    model = graph_model(nodes, shape, _weights(c_in, c_out, f, elem), elem=elem)
    fused, plain = same_bits(model)
    width = 2 if elem == TensorProto.FLOAT16 else 4
    if n:  # (at least its output's write or read-back: tiles may differ)
        assert plain - fused >= n * width, (fused, plain)


def test_a_prologue_whose_output_is_read_again_is_not_fused():
    """The Relu's output is also the model's second output: its buffer is
    written whole, and the convolution reads it as before."""
    nodes = _dense_layer()
    nodes.append(helper.make_node("Identity", ["r"], ["r2"]))
    model = graph_model(nodes, [1, 8, 14, 14], _weights(8, 16, 16, TensorProto.FLOAT))
    model.graph.output.append(helper.make_tensor_value_info("r2", TensorProto.FLOAT, None))
    same_bits(model)


def test_a_prologues_l1_need_covers_what_the_lowering_declares(monkeypatch):
    """A layer whose prologue's per-channel inputs are broadcast into tiles
    of the input window's size (two engines' halves of 64 channels of
    2 x 28 x 28): the need measured for the fused tile (D-COMPILE-L1,
    `l1_scratch.prologue_scratch`) is at least the lowered program's L1
    high-water mark, so the program is not tiled again for exceeding L1.
    Read on the tight packing."""
    from nem.compile import compile_onnx
    from nem.frontends.nem_text.parser import parse_nem
    from nem.passes.share_buffers import packed_footprints

    needs = l1_needs(monkeypatch)
    model = graph_model(_dense_layer(), [2, 16, 28, 28], _weights(16, 32, 48, TensorProto.FLOAT))
    result = compile_onnx(model, device="npm_pro_x1")
    assert not [r for r in result.remarks if "exceeded L1" in r], result.remarks
    in_place = _prologue_relus(result.nem)
    assert len(in_place) >= 4, result.nem  # (one per engine's part, on its input tile)
    program = parse_nem(result.nem).ops.first
    packed = packed_footprints(program, None, "L1", over_capacity_only=False)
    lowered = max(n for k, n in packed.items() if "L1" in k)
    assert lowered <= max(n for n in needs if n <= 1 << 20), (lowered, needs)


def test_no_prologue_where_the_engines_split_the_output_channels():
    """A 7x7 layer of 2048 output channels (ResNet-50's last 1x1 expansions)
    is split over the engines by its output channels: each engine's part
    would run the prologue on the whole input, so the Relu stays an op of
    its own (not in place on a convolution's input tile), and the result is
    still the unfused program's."""
    from nem.compile import compile_onnx

    nodes = _dense_layer(bn=False)
    model = graph_model(nodes, [1, 8, 7, 7], _weights(8, 256, 2048, TensorProto.FLOAT))
    same_bits(model)
    nem = compile_onnx(model, device="npm_pro_x1").nem
    assert "= relu.async" in nem
    assert not _prologue_relus(nem)


def test_no_prologue_before_a_larger_window():
    """An outside user's DenseNet layer with a 3x3 convolution (47x47, 2 x 50
    -> 48 channels): its tiles' input rows overlap and are staged in pieces,
    so a prologue would run out of place, with smaller tiles; it moved 10.3
    MB where the unfused program moves 6.5 MB.  Only 1x1 convolutions take
    one: this layer moves no more than unfused, and its bits are the same."""
    inits = [*_weights(16, 50, 48, TensorProto.FLOAT), _const("wk", [48, 100, 3, 3], 0.01)]
    fused, plain = same_bits(graph_model(_dense_layer(k=3), [1, 16, 47, 47], inits))
    assert fused <= plain, (fused, plain)


def test_no_prologue_without_hoisting():
    """With `--no-hoist` a prologue's broadcast tiles would be made again in
    every tile (session 64's review: 2 of 109 random layers moved more
    bytes fused than unfused): the Relu stays an op of its own, the bits
    are the unfused program's, and the layer moves no more bytes."""
    from nem.compile import compile_onnx

    model = graph_model(_dense_layer(), [1, 8, 14, 14], _weights(8, 32, 32, TensorProto.FLOAT))
    fused, plain = same_bits(model, hoist=False)
    assert fused <= plain, (fused, plain)
    nem = compile_onnx(model, device="npm_pro_x1", hoist=False).nem
    assert "= relu.async" in nem
    assert not _prologue_relus(nem)
