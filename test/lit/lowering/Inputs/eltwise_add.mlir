func.func @add(%X: memref<1024x512xf32>, %Y: memref<1024x512xf32>, %Z: memref<1024x512xf32>) {
  affine.for %i = 0 to 1024 {
    affine.for %j = 0 to 512 {
      %a = affine.load %X[%i, %j] : memref<1024x512xf32>
      %b = affine.load %Y[%i, %j] : memref<1024x512xf32>
      %s = arith.addf %a, %b : f32
      affine.store %s, %Z[%i, %j] : memref<1024x512xf32>
    }
  }
  return
}
