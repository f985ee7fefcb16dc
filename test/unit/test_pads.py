"""Padded tensors written in place (D-COMPILE-PAD-IN-PLACE, `nem.compile.pads`):
the op computing a padded tensor's source writes the padded buffer's
interior, and only the border the consumers read is filled.  A minimized
stem (3x3 stride-2 Conv, Relu, 3x3 stride-2 MaxPool with padding 1, as
ResNet-50's 7x7 stem and its pool) is compiled with and without
`pad_in_place`: the same bits under random schedules, onnxruntime's values,
no copy between DDR buffers, fewer DMA bytes and cycles (each test fails
without the rewrite)."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import (  # noqa: E402
    ddr_to_ddr,
    dma_bytes,
    graph_model,
    only_output,
    timed_cycles,
)
from mlir import ir  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402
from nem.compile.check import max_violation, onnxruntime_run  # noqa: E402
from nem.compile.fusion import find_groups  # noqa: E402
from nem.compile.pads import strips  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402

OPTS = {"device": "npm_pro_x1"}
C, F, HW = 4, 16, 32
"""Input channels, convolution outputs, input rows and columns."""


def _stem():
    """x (1x4x32x32) -> 3x3 Conv stride 2 padding 1 (16 channels, bias) ->
    Relu -> 3x3 MaxPool stride 2 padding 1: 16x16 -> 8x8."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, (F, C, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.uniform(-1, 1, F).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1] * 4, strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node(
            "MaxPool", ["r"], ["y"], name="pool", kernel_shape=[3, 3], pads=[1] * 4, strides=[2, 2]
        ),
    ]
    return graph_model(nodes, [1, C, HW, HW], inits)


def _bufferized(in_place: bool) -> str:
    return compile_onnx(_stem(), **OPTS, pad_in_place=in_place).stage("bufferize").text


def _copies(text: str) -> list[str]:
    return [line for line in text.splitlines() if "memref.copy" in line]


def test_the_sources_are_computed_into_the_padded_buffers():
    """Without the rewrite, each of the two pads is a copy of its source into
    a buffer first filled whole; with it, the input's transpose and the Relu
    write the padded buffers' interiors, and no copy is left, whatever the
    sources' size (16 KiB each here: until session 22 sources under 512 KiB
    were left to upstream)."""
    assert len(_copies(_bufferized(False))) == 2
    assert _copies(_bufferized(True)) == []


def test_only_the_border_the_windows_read_is_filled():
    """The convolution's 16 windows of 3 at stride 2 read padded rows (and
    columns) 0..32 of 0..33, the pool's 8 windows rows 0..16 of 0..17: of
    each padded buffer only the top row and the left column are filled
    (without the rewrite, the whole buffer)."""
    fills = [
        [int(d) for d in m.group(1).split("x")]
        for m in re.finditer(
            r"linalg\.generic [^\n]*\]\} outs\(%\w+ : memref<([0-9x]+)xf32", _bufferized(True)
        )
    ]
    assert sorted(fills) == [[1, 1, 17, 16], [1, 1, 33, 4], [1, 16, 1, 16], [1, 32, 1, 4]], fills


def test_the_relu_writing_the_pool_input_stays_fused():
    """The Relu writes a view of the pool's padded buffer (without the
    rewrite, a buffer of its own): it is still the convolution's epilogue
    (D-COMPILE-FUSE-L1) when nothing else touches that buffer before it."""
    for in_place, writes in ((True, "memref.subview"), (False, "memref.alloc")):
        with ir.Context():
            module = ir.Module.parse(_bufferized(in_place))
            (group,) = find_groups(module.body.operations[0].operation)
            (relu,) = group.epilogues
            assert relu.operands[-1].owner.name == writes, in_place


@pytest.mark.slow  # 4 compiles and 4 runs: about 10 s
def test_bit_identical_with_fewer_bytes_and_cycles():
    model = _stem()
    new = compile_onnx(model, **OPTS)
    old = compile_onnx(model, **OPTS, pad_in_place=False)
    a = only_output(new, model, 3)
    assert np.array_equal(a.view(np.uint32), only_output(old, model, 0).view(np.uint32))
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))
    ((name, _, _),) = new.interface.outputs
    assert max_violation(a, want[new.interface.onnx_names[name]]) <= 1.0
    assert ddr_to_ddr(new.nem) == 0 < ddr_to_ddr(old.nem)
    assert dma_bytes(new.nem) < dma_bytes(old.nem)
    assert timed_cycles(new.nem) < 0.8 * timed_cycles(old.nem)


def test_no_pad_in_place_reaches_the_options(tmp_path, monkeypatch):
    """`nem-compile --no-pad-in-place` sets `CompileOptions.pad_in_place`."""
    import onnx

    import nem.compile
    from nem.cli import nem_compile

    class Stop(Exception):
        pass

    seen = []

    def compile_onnx(src, options, **kw):
        seen.append(options.pad_in_place)
        raise Stop

    monkeypatch.setattr(nem.compile, "compile_onnx", compile_onnx)
    path = tmp_path / "m.onnx"
    onnx.save(_stem(), str(path))
    for flags in ([], ["--no-pad-in-place"]):
        with pytest.raises(Stop):
            nem_compile.run([str(path), *flags, "-o", str(tmp_path / "m.nem")])
    assert seen == [True, False]


def _lrn():
    """x (1x8x6x6) -> LRN of size 5: its squares zero-padded along the channels."""
    return graph_model([helper.make_node("LRN", ["x"], ["y"], name="lrn", size=5)], [1, 8, 6, 6])


def test_lrn_squares_are_computed_into_the_padded_buffer():
    """LRN squares its input in the pooled view [1, N H W, C, 1], so the
    square writes the padded buffer's interior: no copy, and the same bits."""
    model = _lrn()
    new = compile_onnx(model, **OPTS)
    old = compile_onnx(model, **OPTS, pad_in_place=False)
    assert _copies(new.stage("bufferize").text) == []
    assert len(_copies(old.stage("bufferize").text)) == 1
    a, b = only_output(new, model, 2), only_output(old, model, 0)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_the_strips_partition_the_border_read():
    """Every element of a padded 2-D tensor that is read and not interior is
    in exactly one strip; nothing past the reach is."""
    low, inner, reach = [2, 1], [3, 4], [6, 6]  # padded to 7 x 7, read to 6 x 6
    count = np.zeros((7, 7), int)
    for (r, c), (h, w) in strips(low, inner, reach):
        count[r : r + h, c : c + w] += 1
    border = np.ones((7, 7), int)
    border[2:5, 1:5] = 0
    border[6, :] = border[:, 6] = 0
    assert np.array_equal(count, border)


def _concat_pool():
    """x (1x4x16x16) -> two 3x3 Convs (8 channels each, one with a Relu) ->
    Concat -> 3x3 stride-2 MaxPool with padding 1: the pool's padded tensor
    is a concatenation."""
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, (8, C, 3, 3)).astype(np.float32), w)
        for w in ("w1", "w2")
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], name="c1", pads=[1] * 4),
        helper.make_node("Relu", ["a"], ["ar"], name="r1"),
        helper.make_node("Conv", ["x", "w2"], ["b"], name="c2", pads=[1] * 4),
        helper.make_node("Concat", ["ar", "b"], ["cat"], name="cat", axis=1),
        helper.make_node(
            "MaxPool",
            ["cat"],
            ["y"],
            name="pool",
            kernel_shape=[3, 3],
            pads=[1] * 4,
            strides=[2, 2],
        ),
    ]
    return graph_model(nodes, [1, C, 16, 16], inits)


def test_a_concatenation_and_its_inputs_are_written_into_the_padded_buffer():
    """The pool's padded buffer holds the concatenation in its interior (no
    copy of it), and each of the concatenation's two inputs is computed
    into its slice of it (D-COMPILE-CONCAT-IN-PLACE, padded concatenations
    too since session 24): no copy is left; without `concat_in_place` the
    two inputs are computed apart and copied into their place.  The same
    bits every way."""
    model = _concat_pool()
    new = compile_onnx(model, **OPTS)
    apart = compile_onnx(model, **OPTS, concat_in_place=False)
    old = compile_onnx(model, **OPTS, pad_in_place=False, concat_in_place=False)
    assert _copies(new.stage("bufferize").text) == []
    copies = _copies(apart.stage("bufferize").text)
    assert len(copies) == 2, copies
    assert all("memref<1x16x16x8xf32" in c for c in copies)
    # x's padded copy (one for both convolutions since session 54: `Importer.pad`),
    # the two inputs into the concatenation and it into the pool's padded buffer
    assert len(_copies(old.stage("bufferize").text)) == 1 + 2 + 1
    a = only_output(new, model, 2)
    assert np.array_equal(a.view(np.uint32), only_output(old, model, 0).view(np.uint32))


def _pool_conv(ch: int = 256, hw: int = 14):
    """x (1 x ch x 2hw x 2hw) -> 2x2 MaxPool -> 3x3 Conv padding 1 (ch to ch,
    bias) -> Relu: VGG-19's 14x14 stage entered from its pool."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.uniform(-0.05, 0.05, (ch, ch, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.uniform(-0.1, 0.1, ch).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w", "b"], ["c"], name="conv", pads=[1] * 4),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    return graph_model(nodes, [1, ch, 2 * hw, 2 * hw], inits)


def _conv_engines(nem: str) -> set[str]:
    """The L1 memories (engines) the program's `conv2d` tasks write."""
    space = dict(re.findall(r"^buffer (\w+) : (L1\[\d+\])", nem, re.M))
    outs = re.findall(r"= conv2d\.async .* out region\((\w+),", nem)
    return {space.get(b, b) for b in outs}


@pytest.mark.slow  # 2 compiles of a 2.4 MB layer and 3 runs: about 30 s
def test_the_convolution_reading_a_padded_buffer_is_spread_over_the_engines():
    """The border strips the rewrite fills around the pool's output are
    charged the bytes they write by the engine split's estimate
    (D-COMPILE-ENGINES), not their byte span down the whole tensor (a
    one-column strip spans 14 rows): so the convolution that follows is
    split over the four engines as it is without the rewrite, and the
    program is faster than `--no-pad-in-place`'s.  Before session 24 the
    strips' spans delayed the estimate past the split's 20% margin and the
    convolution ran on one engine: 90,137 cycles in place against 62,839."""
    model = _pool_conv()
    new = compile_onnx(model, **OPTS)
    old = compile_onnx(model, **OPTS, pad_in_place=False)
    assert _conv_engines(new.nem) == {f"L1[{k}]" for k in range(4)}
    assert timed_cycles(new.nem) < timed_cycles(old.nem)
    a = only_output(new, model, 2)  # the same bits under random schedules
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))
    ((name, _, _),) = new.interface.outputs
    assert max_violation(a, want[new.interface.onnx_names[name]]) <= 1.0


def _skip_block(from_input: bool):
    """A residual block's end: s -> 3x3 Conv padding 1 (16 to 16, bias) ->
    Add(conv, s) -> Relu, with s the graph input x (`from_input`: an NCHW
    input beside the convolution's NHWC output) or Relu(1x1 Conv(x)) (a
    basic block's skip, computed in NHWC)."""
    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (F, F, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.uniform(-1, 1, F).astype(np.float32), "b"),
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (F, F, 1, 1)).astype(np.float32), "w0"),
    ]
    skip = "x" if from_input else "s"
    nodes = (
        []
        if from_input
        else [
            helper.make_node("Conv", ["x", "w0", "b"], ["c0"], name="conv0"),
            helper.make_node("Relu", ["c0"], ["s"], name="pre"),
        ]
    )
    nodes += [
        helper.make_node("Conv", [skip, "w", "b"], ["c"], name="conv", pads=[1] * 4),
        helper.make_node("Add", ["c", skip], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["y"], name="relu"),
    ]
    return graph_model(nodes, [1, F, 16, 16], inits)


@pytest.mark.parametrize("from_input", [True, False])
def test_a_skip_read_beside_its_padded_copy_is_read_from_the_padded_buffer(from_input):
    """The skip of a residual Add is also the next convolution's padded
    input: the Add reads the padded buffer's interior, so the skip is
    computed into it and never copied (session 54: it had a buffer of its
    own, copied into the padded one, `memref.copy`).  The same bits as
    without the padded rewrite, under random schedules; onnxruntime's
    values.  (A graph input's skip, NCHW against the convolution's NHWC
    output, is read crossed: the Add runs as an escape-hatch kernel, as
    before; D-COMPILE-LAYOUT.)"""
    model = _skip_block(from_input)
    new = compile_onnx(model, **OPTS)
    old = compile_onnx(model, **OPTS, pad_in_place=False)
    assert _copies(new.stage("bufferize").text) == []
    assert ("mlir.kernel" in new.nem) == from_input
    got = only_output(new, model, 2)
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))["y"]
    assert max_violation(got, want) <= 1.0
    assert np.array_equal(got.view(np.uint32), only_output(old, model, 0).view(np.uint32))
    assert dma_bytes(new.nem) < dma_bytes(old.nem)  # (a graph input: 265,728 -> 249,344 B)
