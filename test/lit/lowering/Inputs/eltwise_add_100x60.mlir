func.func @add(%X: memref<100x60xf32>, %Y: memref<100x60xf32>, %Z: memref<100x60xf32>) {
  affine.for %i = 0 to 100 {
    affine.for %j = 0 to 60 {
      %a = affine.load %X[%i, %j] : memref<100x60xf32>
      %b = affine.load %Y[%i, %j] : memref<100x60xf32>
      %s = arith.addf %a, %b : f32
      affine.store %s, %Z[%i, %j] : memref<100x60xf32>
    }
  }
  return
}
