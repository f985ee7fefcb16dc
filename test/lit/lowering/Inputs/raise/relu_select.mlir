// relu as torch-mlir writes it: cmpf ugt + select.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.cmpf ugt, %in, %cst : f32
    %1 = arith.select %0, %in, %cst : f32
    linalg.yield %1 : f32
  }
  return
}
