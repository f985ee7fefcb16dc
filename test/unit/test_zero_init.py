"""Constant-filled accumulators filled in L1, not through DDR
(D-COMPILE-ZERO-INIT).

Four models with a constant-filled accumulator: a Conv without bias whose
output goes into a Concat (DenseNet's layers), a Gemm whose reduction is
split over the engines (its partial sums' buffers), a batched MatMul (an op
generalized before tiling), all from +0, and a MaxPool from -inf (session
36). On the transform route the fill is in the accumulating op's tiles: no fill tile loads its output, none
stores it back, and the op's tiles start from a fill of their staged output.
The programs compute the same bits as with the fill tiled apart, and move
fewer bytes.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import DEVICE, graph_model, run_api, run_compiled  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx, zero_init  # noqa: E402


def _weights(name: str, shape: tuple[int, ...]):
    rng = np.random.default_rng(len(name))
    return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(np.float32), name)


def concat_model():
    """Relu, a 3x3 Conv without bias (its accumulator a zero fill) and a
    Concat of the input and the Conv's output."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "w"], ["c"], name="conv", pads=[1] * 4),
        helper.make_node("Concat", ["x", "c"], ["y"], name="cat", axis=1),
    ]
    return graph_model(nodes, (1, 16, 14, 14), [_weights("w", (16, 16, 3, 3))])


def ksplit_model():
    """A Gemm of 4 x 2048 by 2048 x 64: split along its reduction over
    npm_pro_x1's engines, with partial sums (D-COMPILE-TRANSFORM-PARTIALS)."""
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc1")
    return graph_model([node], (4, 2048), [_weights("w", (2048, 64)), _weights("b", (64,))])


def bmm_model():
    """A MatMul of 8 matrices by 8 (`linalg.batch_matmul`, which
    `structured.generalize` rewrites before tiling: until session 23 its
    tiles lost the mark and the fill stayed a tile of its own)."""
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="bmm")
    return graph_model([node], (8, 32, 64), [_weights("w", (8, 64, 16))])


def maxpool_model():
    """Relu and a 3x3 MaxPool, stride 1, pad 1 (Inception's pool branch):
    its output starts from a fill of -inf (until session 36 only +0 fills
    were paired: the -inf went to DDR and back, D-COMPILE-ZERO-INIT)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[3, 3], pads=[1] * 4),
    ]
    return graph_model(nodes, (1, 32, 14, 14), [])


MODELS = {
    "concat": concat_model,
    "ksplit": ksplit_model,
    "bmm": bmm_model,
    "maxpool": maxpool_model,
}
ACCUMULATES = (
    "linalg.conv_2d_nhwc_hwcf",
    "linalg.matmul",
    "linalg.generic",
    "linalg.pooling_nhwc_max",
)


def _fills(tiled: str) -> list[tuple[str, str, str]]:
    """(line before, fill, line after) of each `linalg.fill` of the tiled IR."""
    lines = [ln.strip() for ln in tiled.splitlines()]
    return [
        (lines[i - 1], ln, lines[i + 1])
        for i, ln in enumerate(lines)
        if ln.startswith("linalg.fill")
    ]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_accumulator_fills_are_in_the_ops_tiles(name):
    """Each constant fill of the tiled IR is of an accumulating op's staged
    output, just before that op: nothing loads it before the fill, nothing
    stores it after (on 2a82c19: a fill tile of its own, copied in and out;
    the MaxPool's -inf so until session 36, 5b3f0083)."""
    result = compile_onnx(MODELS[name](), device=DEVICE)
    fills = _fills(result.stage("tile").text)
    assert fills
    for before, fill, after in fills:
        view = re.search(r"outs\((%\w+)", fill).group(1)
        assert not before.startswith("linalg.copy") or f"outs({view} " not in before
        assert after.startswith(ACCUMULATES) and f"outs({view} " in after, (fill, after)


def _plain(monkeypatch, model):
    """The model compiled with its fills tiled apart, as 2a82c19 did
    (without fusion, as the program it is compared with)."""
    with monkeypatch.context() as m:
        m.setattr(zero_init, "pairs", lambda block, ops: {})
        m.setattr(zero_init, "stage_zeros", lambda fn, value: False)
        return compile_onnx(model, device=DEVICE, fuse=False)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_fills_in_tiles_keep_the_bits(name, monkeypatch):
    """Bit-identical outputs (as uint32) to the program with the fills
    tiled apart, under 3 random schedules, within tolerance of onnxruntime,
    with fewer transfers.  Without fusion: since session 54 a Conv's zero
    fill starts its fused group (D-COMPILE-FUSE-L1), whose tiles fill in L1
    as these do."""
    model = MODELS[name]()
    plain = _plain(monkeypatch, model)
    result = run_api(model, fuse=False)
    outs = []
    for r in (plain, result):
        it, _ = run_compiled(r, model, schedules=3)
        outs.append([it.read_tensor(o, s, d) for o, s, d in r.interface.outputs])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
    assert result.nem.count("transfer.async") < plain.nem.count("transfer.async")


def test_an_input_that_views_the_filled_buffer_through_a_reshape_keeps_the_fill():
    """`pairs` drops a fill only when no input of the accumulating op views
    the filled buffer: the views followed are `hoist.root_of`'s, reshapes
    included (its own narrower table of views missed `memref.collapse_shape`:
    the fill would have been dropped under an op reading its zeros)."""
    from mlir import ir

    text = """
    #in = affine_map<(d0, d1) -> (d0 * 4 + d1)>
    #out = affine_map<(d0, d1) -> (d0, d1)>
    func.func @f(%o: memref<4x4xf32>) {
      %c = memref.collapse_shape %o [[0, 1]] : memref<4x4xf32> into memref<16xf32>
      %z = arith.constant 0.0 : f32
      linalg.fill ins(%z : f32) outs(%o : memref<4x4xf32>)
      linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel"]}
          ins(%c : memref<16xf32>) outs(%o : memref<4x4xf32>) {
      ^bb0(%a: f32, %b: f32):
        %s = arith.addf %a, %b : f32
        linalg.yield %s : f32
      }
      return
    }
    """
    with ir.Context():
        module = ir.Module.parse(text)
        fn = module.body.operations[0]
        block = fn.regions[0].blocks[0]
        ops = [o.operation for o in block.operations if o.operation.name.startswith("linalg.")]
        assert [o.name for o in ops] == ["linalg.fill", "linalg.generic"]
        assert zero_init.pairs(block, ops) == {}
