"""A Reshape keeps its source's layout where it can (D-COMPILE-LAYOUT,
session 60; `nem.frontends.onnx.ops.reshape_orders`): the dimensions it
merges or splits are laid out in their logical order, the groups of them in
the order the source holds them, so the Reshape is a view of the same bytes
and at most one copy reorders the source.  ShuffleNet's channel shuffle
(NHWC C -> g x C/g, a Transpose, C/g x g -> C) went through the logical
(NCHW) order and back to NHWC for the next convolution: three copies, one
now; and the padded depthwise convolution after it reads the shuffle's
output written in its padded buffer's interior through the reshape
(`pads.RESHAPES`, D-COMPILE-PAD-IN-PLACE), not copied there."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import dma_bytes, only_output, timed_cycles, typed_model  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx, pads, transform  # noqa: E402
from nem.compile.check import max_violation, onnxruntime_run  # noqa: E402
from nem.frontends.onnx import ops, samples  # noqa: E402

C, G, HW = 24, 3, 14


def _shuffle():
    """x (1 x 24 x 14 x 14) -> 1x1 Conv in 3 groups -> channel shuffle
    (Reshape 1x3x8x14x14, Transpose 0,2,1,3,4, Reshape 1x24x14x14) -> 3x3
    depthwise Conv (padding 1): a ShuffleNet unit's branch."""
    rng = np.random.default_rng(0)

    def init(name, *shape):
        return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)

    shapes = [
        numpy_helper.from_array(np.array(s, dtype=np.int64), n)
        for n, s in (("s5", [1, G, C // G, HW, HW]), ("s4", [1, C, HW, HW]))
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["g"], name="gconv", group=G),
        helper.make_node("Reshape", ["g", "s5"], ["r5"], name="split"),
        helper.make_node("Transpose", ["r5"], ["t5"], name="swap", perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t5", "s4"], ["r4"], name="merge"),
        helper.make_node("Conv", ["r4", "d"], ["y"], name="dwconv", group=C, pads=[1] * 4),
    ]
    inits = [init("w", C, C // G, 1, 1), init("b", C), init("d", C, 1, 3, 3), *shapes]
    x = ("x", TensorProto.FLOAT, [1, C, HW, HW])
    return typed_model(nodes, [x], [("y", TensorProto.FLOAT, [1, C, HW, HW])], inits, 13)


@pytest.mark.parametrize(
    "shape, perm, dims, order, out",
    [
        # NHWC channels split: no data moves, the result keeps the channels innermost
        ((1, 24, 14, 14), (0, 2, 3, 1), [1, 3, 8, 14, 14], (0, 2, 3, 1), (0, 3, 4, 1, 2)),
        # after the Transpose the split channels lie swapped: one copy, then NHWC
        ((1, 8, 3, 14, 14), (0, 3, 4, 2, 1), [1, 24, 14, 14], (0, 3, 4, 1, 2), (0, 2, 3, 1)),
        # a pooled NHWC value flattened: only size-1 dimensions move, a view
        ((1, 1024, 1, 1), (0, 2, 3, 1), [1, 1024], (0, 2, 3, 1), (0, 1)),
        # merged with the spatial dimensions: the logical order (Flatten's)
        ((1, 64, 7, 7), (0, 2, 3, 1), [1, 64 * 49], (0, 1, 2, 3), (0, 1)),
        # a value held in the logical order stays so
        ((2, 3, 4), (0, 1, 2), [6, 4], (0, 1, 2), (0, 1)),
    ],
)
def test_a_reshape_keeps_the_order_its_groups_allow(shape, perm, dims, order, out):
    assert ops.reshape_orders(shape, perm, dims) == (order, out)


def test_a_channel_shuffle_is_one_copy_and_writes_the_padded_interior(monkeypatch):
    """The shuffle compiled, against the Reshape through the logical order
    (`reshape_orders` giving it, as before session 60) and against the pad
    not followed through the reshape: the same output bits under random
    schedules, race-free, `nem-verify` clean (compile_onnx verifies),
    within onnxruntime's tolerance, fewer transfers each, fewer DMA bytes
    than through the logical order, fewer timed cycles than either (1,301
    against 1,644 and 1,589 when written)."""
    model = _shuffle()
    new = compile_onnx(model, device="npm_pro_x1")
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))["y"]
    got = only_output(new, model, 2)
    assert max_violation(got, want) <= 1.0
    monkeypatch.setattr(pads, "RESHAPES", ())
    copied = compile_onnx(model, device="npm_pro_x1")
    logical = ops.reshape_orders
    monkeypatch.setattr(ops, "reshape_orders", lambda s, p, d: logical(s, tuple(range(len(s))), d))
    old = compile_onnx(model, device="npm_pro_x1")
    for other in (copied, old):
        assert np.array_equal(got.view(np.uint32), only_output(other, model, 0).view(np.uint32))
    assert dma_bytes(new.nem) <= dma_bytes(copied.nem) < dma_bytes(old.nem)
    transfers = [r.nem.count("transfer") for r in (new, copied, old)]
    assert transfers == sorted(set(transfers))  # fewer each (120, 129, 156 when written)
    assert timed_cycles(new.nem) < min(timed_cycles(copied.nem), timed_cycles(old.nem))


def test_a_transposes_tiles_read_their_input_where_it_is(monkeypatch):
    """The shuffle's one copy (the swap of the channel dimensions, a
    `linalg.transpose`) stages its output only: each tile's permuted box is
    copied from DDR into L1 by one transfer (D-LOW-GENERIC-COPY), where its
    input staged too was copied in, then permuted in L1 by a second one
    (`transform.UNSTAGED`, session 60).  The same bits under random
    schedules, fewer DMA bytes (the L1-to-L1 pass gone) and timed cycles."""
    model = _shuffle()
    new = compile_onnx(model, device="npm_pro_x1")
    monkeypatch.setattr(transform, "UNSTAGED", ())
    old = compile_onnx(model, device="npm_pro_x1")
    got = only_output(new, model, 2)
    assert np.array_equal(got.view(np.uint32), only_output(old, model, 0).view(np.uint32))
    assert dma_bytes(new.nem) < dma_bytes(old.nem)
    assert timed_cycles(new.nem) < timed_cycles(old.nem)


@pytest.mark.parametrize("group", [8, 1])
def test_a_padded_conv_after_a_reshape_merging_rows_verifies(group):
    """An outside user's Conv 4 -> 8 (1x1) -> Reshape 1x8x6x7 -> 1x8x1x42
    -> a padded 1x3 Conv (depthwise, or dense 8 -> 4): the Conv wrote the
    padded interior through the reshape (`pads.RESHAPES`), which
    bufferized to a copy from a collapse-and-expand of that interior onto
    itself; left in, its transfer's source and destination overlap and the
    compile failed nem-verify (HAZ-02).  `pads.drop_self_copies` now erases
    a copy from a reshaping of its own target (session 60): the program
    verifies (compile_onnx checks it) and matches onnxruntime."""
    rng = np.random.default_rng(1)
    f = 8 if group == 8 else 4
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, (8, 4, 1, 1)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([1, 8, 1, 42], dtype=np.int64), "s"),
        numpy_helper.from_array(rng.uniform(-1, 1, (f, 8 // group, 1, 3)).astype(np.float32), "m"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["a"], name="conv"),
        helper.make_node("Reshape", ["a", "s"], ["r"], name="rows"),
        helper.make_node("Conv", ["r", "m"], ["y"], name="pconv", group=group, pads=[0, 1, 0, 1]),
    ]
    x = ("x", TensorProto.FLOAT, [1, 4, 6, 7])
    model = typed_model(nodes, [x], [("y", TensorProto.FLOAT, [1, f, 1, 42])], inits, 13)
    result = compile_onnx(model, device="npm_pro_x1")
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))["y"]
    assert max_violation(only_output(result, model, 2), want) <= 1.0


def test_a_value_and_its_transpose_each_get_their_own_nhwc_copy():
    """Found by graph fuzzing (seed 6005): Conv(x) + Conv(Transpose(x)),
    x square in H and W.  A Transpose shares its input's MLIR value in
    another order, and `Importer.in_perm` cached the NHWC copy by value and
    wanted order only, so both convs read x's copy: a wrong result, silent
    where H = W (an internal shape error otherwise).  The cache is keyed by
    the order held too (session 61)."""
    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32), "v"),
    ]
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], name="swap", perm=[0, 1, 3, 2]),
        helper.make_node("Conv", ["x", "w"], ["a"], name="cx", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["t", "v"], ["b"], name="ct", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["a", "b"], ["y"], name="sum"),
    ]
    x = ("x", TensorProto.FLOAT, [1, 3, 6, 6])
    model = typed_model(nodes, [x], [("y", TensorProto.FLOAT, [1, 4, 6, 6])], inits, 13)
    result = compile_onnx(model, device="npm_pro_x1")
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))["y"]
    assert max_violation(only_output(result, model, 2), want) <= 1.0
