"""Concatenations written in place (D-COMPILE-CONCAT-IN-PLACE,
`nem.compile.concats`): the ops computing a concatenation's inputs write
its buffer's slices, instead of buffers of their own copied into it.  A
minimized SqueezeNet fire module (squeeze 1x1, expand 1x1 and 3x3,
Concat) whose expand 1x1 output is read again after the concatenation, and
a second Concat of the first (DenseNet's nesting), compiled with and
without `concat_in_place`: the same bits under random schedules,
onnxruntime's values, fewer copies between DDR buffers and cycles (each test fails
without the rewrite)."""

from __future__ import annotations

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
from onnx import helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx  # noqa: E402
from nem.compile.check import max_violation, onnxruntime_run  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402

OPTS = {"device": "npm_pro_x1"}


def _fire():
    """x (1x4x8x8) -> s = Relu(Conv 1x1, 4) -> e1 = Relu(Conv 1x1, 8) and
    e3 = Relu(Conv 3x3 pad 1, 8) -> cat = Concat(e1, e3) -> y =
    Concat(cat, e1 * e1): 24 channels."""
    rng = np.random.default_rng(3)

    def w(name, shape):
        return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)

    inits = [w("ws", (4, 4, 1, 1)), w("w1", (8, 4, 1, 1)), w("w3", (8, 4, 3, 3))]
    nodes = [
        helper.make_node("Conv", ["x", "ws"], ["sc"], name="squeeze"),
        helper.make_node("Relu", ["sc"], ["s"], name="squeeze_relu"),
        helper.make_node("Conv", ["s", "w1"], ["e1c"], name="expand1x1"),
        helper.make_node("Relu", ["e1c"], ["e1"], name="expand1x1_relu"),
        helper.make_node("Conv", ["s", "w3"], ["e3c"], name="expand3x3", pads=[1] * 4),
        helper.make_node("Relu", ["e3c"], ["e3"], name="expand3x3_relu"),
        helper.make_node("Concat", ["e1", "e3"], ["cat"], name="cat", axis=1),
        helper.make_node("Mul", ["e1", "e1"], ["m"], name="square"),
        helper.make_node("Concat", ["cat", "m"], ["y"], name="cat2", axis=1),
    ]
    return graph_model(nodes, [1, 4, 8, 8], inits)


def _biased_fire(padded: bool = False):
    """x (1x4x8x8) -> squeeze (Conv 1x1 with bias, 4), Relu -> expand1x1
    (Conv 1x1 with bias, 8), Relu and expand3x3 (Conv 3x3 pad 1 with bias,
    8), Relu -> Concat: SqueezeNet's fire module, whose Convs have biases
    (D-COMPILE-FUSE-L1 fuses a Relu into a Conv with a bias); `padded`: then
    a 3x3 MaxPool with padding 1 (Inception's blocks: the concatenation is
    the interior of the pool's padded buffer)."""
    rng = np.random.default_rng(5)

    def w(name, *shape):
        return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)

    inits = [w("ws", 4, 4, 1, 1), w("bs", 4), w("w1", 8, 4, 1, 1), w("b1", 8)]
    inits += [w("w3", 8, 4, 3, 3), w("b3", 8)]
    nodes = [
        helper.make_node("Conv", ["x", "ws", "bs"], ["sc"], name="squeeze"),
        helper.make_node("Relu", ["sc"], ["s"], name="squeeze_relu"),
        helper.make_node("Conv", ["s", "w1", "b1"], ["e1c"], name="expand1x1"),
        helper.make_node("Relu", ["e1c"], ["e1"], name="expand1x1_relu"),
        helper.make_node("Conv", ["s", "w3", "b3"], ["e3c"], name="expand3x3", pads=[1] * 4),
        helper.make_node("Relu", ["e3c"], ["e3"], name="expand3x3_relu"),
        helper.make_node("Concat", ["e1", "e3"], ["cat" if padded else "y"], name="cat", axis=1),
    ]
    if padded:
        pool = {"kernel_shape": [3, 3], "pads": [1] * 4}
        nodes.append(helper.make_node("MaxPool", ["cat"], ["y"], name="pool", **pool))
    return graph_model(nodes, [1, 4, 8, 8], inits)


def _copies(result) -> list[str]:
    return [line for line in result.stage("bufferize").text.splitlines() if "memref.copy" in line]


def test_the_inputs_are_computed_into_the_concatenations():
    model = _fire()
    new = compile_onnx(model, **OPTS)
    old = compile_onnx(model, **OPTS, concat_in_place=False)
    # without: e1 and e3 into cat, cat and m into y; with: e3, m and the
    # inner concatenation are computed into y's buffer (nested), e1 too
    # except that the Mul reads it after y's first insert writes y's buffer
    # (a read after a write to One-Shot Analysis, which copies it, valid)
    assert len(_copies(old)) == 4, _copies(old)
    (copy,) = _copies(new)
    assert "memref<1x8x8x8xf32> to memref<1x8x8x8xf32, strided<[1536, 192, 24, 1]>>" in copy


@pytest.mark.slow  # 2 compiles, 4 runs and 2 timed runs: about 15 s
def test_bit_identical_with_fewer_bytes_and_cycles():
    model = _fire()
    new = compile_onnx(model, **OPTS)
    old = compile_onnx(model, **OPTS, concat_in_place=False)
    a = only_output(new, model, 3)
    assert np.array_equal(a.view(np.uint32), only_output(old, model, 0).view(np.uint32))
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))
    ((name, _, _),) = new.interface.outputs
    assert max_violation(a, want[new.interface.onnx_names[name]]) <= 1.0
    assert ddr_to_ddr(new.nem) < ddr_to_ddr(old.nem)
    assert timed_cycles(new.nem) < timed_cycles(old.nem)


def test_no_concat_in_place_reaches_the_options(tmp_path, monkeypatch):
    """`nem-compile --no-concat-in-place` sets `CompileOptions.concat_in_place`."""
    import onnx

    import nem.compile
    from nem.cli import nem_compile

    class Stop(Exception):
        pass

    seen = []

    def compile_onnx(src, options, **kw):
        seen.append(options.concat_in_place)
        raise Stop

    monkeypatch.setattr(nem.compile, "compile_onnx", compile_onnx)
    path = tmp_path / "m.onnx"
    onnx.save(_fire(), str(path))
    for flags in ([], ["--no-concat-in-place"]):
        with pytest.raises(Stop):
            nem_compile.run([str(path), *flags, "-o", str(tmp_path / "m.nem")])
    assert seen == [True, False]


@pytest.mark.parametrize("padded", [False, True])
def test_each_relu_is_fused_into_its_conv_writing_the_concatenation(padded):
    """Written in place, each expand Relu writes its slice of the
    concatenation's buffer (padded: of the interior of the pool's padded
    buffer, a view of a view); the one written second is fused too
    (D-COMPILE-FUSE-L1: the other slice, written before it, is apart from
    its own; on e5ecec37 it was not, and ran after its Conv's output went
    through DDR and back, SqueezeNet's expand3x3 layers; a padded
    concatenation's inputs were copied).  Fusing saves four passes of each
    Conv's output: the bias broadcast's write and read-back, the Conv's
    write and the Relu's read; no copy is left."""
    model = _biased_fire(padded)
    fused = compile_onnx(model, **OPTS)
    plain = compile_onnx(model, **OPTS, fuse=False)
    outputs = 8 * 8 * 4 + 2 * 8 * 8 * 8  # elements of the three Convs' outputs
    assert dma_bytes(plain.nem) - dma_bytes(fused.nem) == 4 * 4 * outputs
    assert _copies(fused) == []
    # the check sees copies where there are some: the concatenation copied
    assert _copies(compile_onnx(model, **OPTS, concat_in_place=False))


@pytest.mark.slow  # 2 compiles, 4 runs and 2 timed runs
@pytest.mark.parametrize("padded", [False, True])
def test_fused_into_the_concatenation_bit_identical_and_faster(padded):
    """The fire module with its Relus fused into the concatenation: the same
    bits as the concatenation copied (under random schedules), onnxruntime's
    values, fewer cycles."""
    model = _biased_fire(padded)
    fused = compile_onnx(model, **OPTS)
    copied = compile_onnx(model, **OPTS, concat_in_place=False)
    a = only_output(fused, model, 3)
    assert np.array_equal(a.view(np.uint32), only_output(copied, model, 0).view(np.uint32))
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))
    ((name, _, _),) = fused.interface.outputs
    assert max_violation(a, want[fused.interface.onnx_names[name]]) <= 1.0
    assert timed_cycles(fused.nem) < timed_cycles(copied.nem)
