"""A run of fill tiles stages its constant once per engine
(`nem.compile.fill_tiles`, D-COMPILE-FILL-TILES): a padded depthwise
convolution's border strips, each tile of which filled an L1 buffer with
zeros and stored it, now store views of one zero buffer per engine.  The
same bits under random schedules, and fewer fills."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import graph_model, only_output  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from nem.compile import compile_onnx, fill_tiles  # noqa: E402
from nem.passes import share_fills  # noqa: E402

ZERO_FILL = "min=0 max=0"
"""A zero fill as the lowering writes it: an i8 clamp to [0, 0] (D-LOW-FILL)."""


def _pointwise_depthwise(hw: int, c: int, f: int, op: str = "Conv"):
    """Conv 1x1 `c` -> `f`, Relu, then a padded 3x3 depthwise Conv (or a
    MaxPool, whose border is `-inf`), ShuffleNet's late units' shape."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (f, c, 1, 1)).astype(np.float32), "w")
    d = numpy_helper.from_array(rng.uniform(-1, 1, (f, 1, 3, 3)).astype(np.float32), "d")
    last = (
        helper.make_node("Conv", ["r", "d"], ["y"], name="dw", group=f, pads=[1] * 4)
        if op == "Conv"
        else helper.make_node(
            "MaxPool", ["r"], ["y"], name="pool", kernel_shape=[3, 3], pads=[1] * 4
        )
    )
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["a"], name="pw"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        last,
    ]
    return graph_model(nodes, [1, c, hw, hw], [w, d] if op == "Conv" else [w], opset=13)


@pytest.mark.parametrize("hw,c,f,op", [(7, 64, 128, "Conv"), (9, 32, 96, "MaxPool")])
def test_a_borders_fill_tiles_share_one_buffer_per_engine(monkeypatch, hw, c, f, op):
    """Each engine fills one buffer of the border's constant (fewer fill
    tasks), every strip's store reads it: bit-identical to each tile
    filling its own, under random schedules; verified (compile_onnx checks
    the program) and race-free (`run_compiled`).  The lowering's sharing of
    fill chains (`nem-share-constant-fills`, D-LOW-FILL-SHARE), which takes
    the pool's `-inf` chains, is off in both compiles."""
    monkeypatch.setattr(share_fills, "WINDOWS", ())
    model = _pointwise_depthwise(hw, c, f, op)
    new = compile_onnx(model, device="npm_pro_x1")
    monkeypatch.setattr(fill_tiles, "runs", lambda *args: [])
    old = compile_onnx(model, device="npm_pro_x1")
    got = only_output(new, model, 2)
    assert np.array_equal(got.view(np.uint32), only_output(old, model, 0).view(np.uint32))
    fills = ZERO_FILL if op == "Conv" else "clamp.async"
    assert 0 < new.nem.count(fills) < old.nem.count(fills)


def _tile(space: int, shape: str, nbytes: int, dst: str) -> str:
    """One fill tile as the tile stage leaves it: a fast-memory buffer
    filled with %cst and copied out to `dst`."""
    return f"""
    %a{dst} = memref.alloc() : memref<{nbytes}xi8, {space}>
    %v{dst} = memref.view %a{dst}[%c0][] : memref<{nbytes}xi8, {space}> to memref<{shape}xf32, {space}>
    linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>],
        iterator_types = ["parallel", "parallel"]}} outs(%v{dst} : memref<{shape}xf32, {space}>) {{
    ^bb0(%out: f32):
      linalg.yield %cst : f32
    }}
    linalg.copy ins(%v{dst} : memref<{shape}xf32, {space}>) outs(%{dst} : memref<{shape}xf32>)
    memref.dealloc %a{dst} : memref<{nbytes}xi8, {space}>"""


def _function(tiles: dict[str, tuple[int, str, int]]) -> str:
    """A function of fill tiles (name -> space, shape, bytes), in order."""
    args = ", ".join(f"%{d}: memref<{shape}xf32>" for d, (_, shape, _) in tiles.items())
    body = "".join(_tile(space, shape, nbytes, d) for d, (space, shape, nbytes) in tiles.items())
    return f"""
func.func @f({args}) {{
    %c0 = arith.constant 0 : index
    %cst = arith.constant 0.0 : f32{body}
    return
}}"""


def test_fill_tiles_of_one_engine_share_the_largest_ones_buffer():
    """Three tiles of engine 2 (one of them larger) and one of engine 3 in
    a run: engine 2's copies read views of one buffer, the largest tile's,
    filled once before the run and freed after its last copy; engine 3's
    lone tile is left as it was; an op that is not a fill tile ends a run."""
    from mlir import ir

    spaces = {"d0": 2, "d1": 2, "d2": 3, "d3": 2, "d4": 2, "d5": 2}
    tiles = {
        d: (sp, "4x4" if d == "d1" else "2x4", 64 if d == "d1" else 32) for d, sp in spaces.items()
    }
    # a copy between d3 and d4 that is no fill tile: d4 and d5 are a run of two
    brk = "linalg.copy ins(%d0 : memref<2x4xf32>) outs(%d5 : memref<2x4xf32>)"
    text = _function(tiles).replace("\n    %ad4 =", f"\n    {brk}\n    %ad4 =")
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        fn = module.body.operations[0]
        assert fill_tiles.share_fill_tiles(fn) == 2  # d0's and d3's fills go
        module.operation.verify()
        ops = [op.operation for op in fn.regions[0].blocks[0].operations]
        names = [op.name for op in ops]
        assert names.count("linalg.generic") == 4  # d1's (shared), d2's, d4's, d5's
        allocs = [op for op in ops if op.name == "memref.alloc"]
        assert len(allocs) == 4
        shared = allocs[0]  # moved before the run: d1's, the largest
        assert str(shared.results[0].type) == "memref<64xi8, 2>"
        viewers = {
            str(u.owner.results[0].type)
            for u in shared.results[0].uses
            if u.owner.name == "memref.view"
        }
        assert viewers == {"memref<2x4xf32, 2>", "memref<4x4xf32, 2>"}
        # freed after d3's copy, the group's last, before the break
        free = next(u.owner for u in shared.results[0].uses if u.owner.name == "memref.dealloc")
        copies = [op for op in ops if op.name == "linalg.copy"]
        assert ops.index(free.operation) == ops.index(copies[3].operation) + 1


def test_two_engines_groups_share_when_the_runs_first_tile_goes():
    """Two engines of three tiles each, the run's first tile a small one of
    engine 2, which goes: both largest tiles move before it first (moved
    after it had gone, the second crashed: an outside user's 2x2 Conv with
    pads [1, 0, 2, 1], `test_an_asymmetrically_padded_conv_compiles`)."""
    from mlir import ir

    order = [(2, 32), (3, 32), (2, 64), (3, 64), (2, 32), (3, 32)]
    tiles = {f"e{k}": (space, "2x4" if n == 32 else "4x4", n) for k, (space, n) in enumerate(order)}
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(_function(tiles))
        fn = module.body.operations[0]
        assert fill_tiles.share_fill_tiles(fn) == 4
        module.operation.verify()
        ops = [op.operation for op in fn.regions[0].blocks[0].operations]
        assert [op.name for op in ops].count("linalg.generic") == 2
        allocs = [str(op.results[0].type) for op in ops if op.name == "memref.alloc"]
        assert allocs == ["memref<64xi8, 2>", "memref<64xi8, 3>"]


def test_an_asymmetrically_padded_conv_compiles():
    """An outside user's minimized model (session 61): a 3x3 Conv of one
    channel over 2x2 pixels with pads [1, 0, 2, 1] crashed the tile stage
    ("the operation has been invalidated", the fill tiles' sharing); it
    compiles, verifies and matches onnxruntime."""
    from compile_runs import typed_model
    from onnx import TensorProto

    from nem.compile.check import max_violation, onnxruntime_run
    from nem.frontends.onnx import samples

    w = numpy_helper.from_array(
        np.random.default_rng(0).uniform(-1, 1, (1, 1, 3, 3)).astype(np.float32), "w"
    )
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 0, 2, 1])
    x = ("x", TensorProto.FLOAT, [1, 1, 2, 2])
    model = typed_model([node], [x], [("y", TensorProto.FLOAT, None)], [w], 13)
    result = compile_onnx(model, device="npm_pro_x1")
    want = onnxruntime_run(model, samples.random_inputs(model, seed=2))["y"]
    assert max_violation(only_output(result, model, 2), want) <= 1.0
