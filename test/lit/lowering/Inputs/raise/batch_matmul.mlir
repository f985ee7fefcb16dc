// Batched matmuls as the ONNX importer's linalg.batch_matmul generalizes:
// a tile of 2 matrices (not raised: one conv2d raises one matrix) and a tile
// of 1 (one conv2d of one group), D-COMPILE-BATCH-TILE.
#a = affine_map<(b, m, n, k) -> (b, m, k)>
#b = affine_map<(b, m, n, k) -> (b, k, n)>
#c = affine_map<(b, m, n, k) -> (b, m, n)>
func.func @two(%x: memref<2x8x16xf32>, %w: memref<2x16x4xf32>, %y: memref<2x8x4xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<2x8x16xf32>, memref<2x16x4xf32>) outs(%y : memref<2x8x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @one(%x: memref<1x8x16xf32>, %w: memref<1x16x4xf32>, %y: memref<1x8x4xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<1x8x16xf32>, memref<1x16x4xf32>) outs(%y : memref<1x8x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}
