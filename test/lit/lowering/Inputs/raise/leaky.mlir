// LeakyRelu as graph compilers write it (D-LOW-LEAKY): the importer's
// select(x < 0, x * alpha, x) as a nest, torch-mlir's select(x > 0, x, x * alpha)
// as a linalg.generic, and near misses that stay escape-hatch tasks.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @nest(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %z = arith.constant 0.0 : f32
  %a = arith.constant 0.125 : f32
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = "affine.load"(%x, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<4x8xf32>, index, index) -> f32
      %n = arith.cmpf olt, %v, %z : f32
      %p = arith.mulf %v, %a : f32
      %r = arith.select %n, %p, %v : f32
      "affine.store"(%r, %y, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (f32, memref<4x8xf32>, index, index) -> ()
    }
  }
  return
}
func.func @generic(%x: memref<4x8xf16>, %y: memref<4x8xf16>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf16>) outs(%y : memref<4x8xf16>) {
  ^bb0(%v: f16, %o: f16):
    %z = arith.constant 0.0 : f16
    %a = arith.constant 0.2 : f16
    %n = arith.cmpf ugt, %v, %z : f16
    %p = arith.mulf %a, %v : f16
    %r = arith.select %n, %v, %p : f16
    linalg.yield %r : f16
  }
  return
}
// x <= 0 is not it for a negative alpha at -0 (and not what graphs write): not raised
func.func @near(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %a = arith.constant 0.125 : f32
    %n = arith.cmpf ole, %v, %z : f32
    %p = arith.mulf %v, %a : f32
    %r = arith.select %n, %p, %v : f32
    linalg.yield %r : f32
  }
  return
}
