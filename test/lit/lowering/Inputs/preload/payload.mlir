#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @main(%arg0: memref<32x48xf32>, %arg1: memref<48x30xf32>, %arg2: memref<30xf32>, %arg3: memref<32x30xf32>) {
    %cst = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<32x30xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<32x30xf32>)
    linalg.matmul ins(%arg0, %arg1 : memref<32x48xf32>, memref<48x30xf32>) outs(%alloc : memref<32x30xf32>)
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc, %arg2 : memref<32x30xf32>, memref<30xf32>) outs(%arg3 : memref<32x30xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %0 = arith.addf %in, %in_0 : f32
      %1 = arith.maximumf %0, %cst : f32
      linalg.yield %1 : f32
    }
    return
  }

}
