func.func @add1d(%X: memref<65536xf32>, %Y: memref<65536xf32>, %Z: memref<65536xf32>) {
  affine.for %i = 0 to 65536 {
    %a = affine.load %X[%i] : memref<65536xf32>
    %b = affine.load %Y[%i] : memref<65536xf32>
    %s = arith.addf %a, %b : f32
    affine.store %s, %Z[%i] : memref<65536xf32>
  }
  return
}
