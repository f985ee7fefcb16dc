"""L1 planning of tiled ops (D-COMPILE-L1, `nem.compile.l1_plan`): what one
tiled op needs in each engine's L1, the re-tiling of an op that does not
fit, and the compile that never emits a program its own checks reject."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

pytest.importorskip("mlir.ir")

from mlir import ir  # noqa: E402

from nem.compile import CompileError, compile_onnx, l1_plan  # noqa: E402
from nem.compile.lower import verify_nem  # noqa: E402

TILE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%a: memref<8x64xf32>, %b: memref<8x64xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c2 {
    %sa = memref.subview %a[%i, 0] [2, 64] [1, 1] : memref<8x64xf32> to memref<2x64xf32, strided<[64, 1], offset: ?>>
    %sb = memref.subview %b[%i, 0] [2, 64] [1, 1] : memref<8x64xf32> to memref<2x64xf32, strided<[64, 1], offset: ?>>
    %m = memref.alloc() : memref<512xi8, 2>
    %v = memref.view %m[%c0][] : memref<512xi8, 2> to memref<2x64xf32, 2>
    %n = memref.alloc() : memref<512xi8, 2>
    %w = memref.view %n[%c0][] : memref<512xi8, 2> to memref<2x64xf32, 2>
    linalg.copy ins(%sa : memref<2x64xf32, strided<[64, 1], offset: ?>>) outs(%v : memref<2x64xf32, 2>)
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%v : memref<2x64xf32, 2>) outs(%w : memref<2x64xf32, 2>) {
    ^bb0(%x: f32, %y: f32):
      %e = math.exp %x : f32
      %p = arith.mulf %e, %x : f32
      linalg.yield %p : f32
    }
    linalg.copy ins(%w : memref<2x64xf32, 2>) outs(%sb : memref<2x64xf32, strided<[64, 1], offset: ?>>)
    memref.dealloc %m : memref<512xi8, 2>
    memref.dealloc %n : memref<512xi8, 2>
  }
  %big = memref.alloc() : memref<1024xi8, 3>
  %u = memref.view %big[%c0][] : memref<1024xi8, 3> to memref<4x64xf32, 3>
  %top = memref.subview %a[0, 0] [4, 64] [1, 1] : memref<8x64xf32> to memref<4x64xf32, strided<[64, 1]>>
  linalg.copy ins(%top : memref<4x64xf32, strided<[64, 1]>>) outs(%u : memref<4x64xf32, 3>)
  linalg.copy ins(%u : memref<4x64xf32, 3>) outs(%top : memref<4x64xf32, strided<[64, 1]>>)
  %late = memref.alloc() : memref<2048xi8, 2>
  %z = memref.view %late[%c0][] : memref<2048xi8, 2> to memref<8x64xf32, 2>
  linalg.copy ins(%a : memref<8x64xf32>) outs(%z : memref<8x64xf32, 2>)
  return
}
"""


def _need(pipeline: bool) -> dict[int, int]:
    with ir.Context():
        module = ir.Module.parse(TILE)
        fn = module.body.operations[0]
        ops = [o.operation for o in fn.regions[0].blocks[0].operations]
        return l1_plan.measure([o for o in ops if o.name != "func.return"],
                               pipeline).by_space


def test_measure_counts_slots_views_scratch_and_lifetimes():
    # space 2: the loop's two 512-byte tiles, two slots each when pipelined, and
    # the elementwise body's two intermediate results (exp, mul), output-sized;
    # the 2048-byte buffer after the loop is never live with them (peak, not sum)
    assert _need(True) == {2: 2 * 512 * 2 + 2 * 512 * 2, 3: 1024}
    assert _need(False) == {2: max(512 * 2 + 2 * 512, 2048), 3: 1024}


def test_fit_shrinks_until_it_fits_and_says_when_it_cannot():
    tried = []

    def tile(sizes):
        tried.append(list(sizes))
        return l1_plan.Need({2: 100 * sizes[0]})

    def sizes_for(budget):
        return [max(1, budget // 100)]

    assert l1_plan.fit(10_000, 3_000, sizes_for, tile) == [27]
    assert tried[0] == [100]                       # the budget's sizes first
    with pytest.raises(l1_plan.DoesNotFit) as e:
        l1_plan.fit(10_000, 50, sizes_for, tile)   # one element already needs 100 bytes
    assert (e.value.need, e.value.capacity, e.value.sizes) == (100, 50, [1])


def _conv(c: int, f: int, hw: int) -> onnx.ModelProto:
    w = numpy_helper.from_array(
        np.random.default_rng(0).uniform(-0.1, 0.1, (f, c, 1, 1)).astype(np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv10")
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, f, hw, hw])],
                          [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("route", ["affine", "transform"])
@pytest.mark.slow  # 8 s (2 cases)
def test_a_layer_the_footprint_model_undercounts_compiles_valid(route):
    """SqueezeNet's conv10 (1x1, 512 -> 1000 channels, 13x13): on the affine
    route its weight tiles sat in a pipelined loop nested in another, four
    copies of 512 KB, and the compile emitted a program needing 3,090,096
    bytes of a 1 MiB L1 (DEV-16).  Measured on the tiled IR, it is tiled
    again until it fits, and the program verifies."""
    result = compile_onnx(_conv(512, 1000, 13), device="npm_pro_x1", route=route)
    verify_nem(result.nem, "conv10.nem", "npm_pro_x1")


def test_tile_sizes_that_cannot_fit_name_the_node():
    """`--tile-sizes` the user forces on a layer whose tiles do not fit L1:
    an error at the tile stage naming the ONNX node, not a program that the
    final check rejects."""
    with pytest.raises(CompileError) as e:
        compile_onnx(_conv(512, 1000, 13), device="npm_pro_x1", tile_sizes=(1, 13, 13, 1000))
    msg = str(e.value)
    assert e.value.stage == "tile"
    assert msg.startswith("node 'conv10'") and "DEV-16" in msg and "D-COMPILE-L1" in msg
