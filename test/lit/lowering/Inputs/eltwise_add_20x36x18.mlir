func.func @add(%X: memref<20x36x18xf32>, %Y: memref<20x36x18xf32>, %Z: memref<20x36x18xf32>) {
  affine.for %i = 0 to 20 {
    affine.for %j = 0 to 36 {
      affine.for %k = 0 to 18 {
        %a = affine.load %X[%i, %j, %k] : memref<20x36x18xf32>
        %b = affine.load %Y[%i, %j, %k] : memref<20x36x18xf32>
        %s = arith.addf %a, %b : f32
        affine.store %s, %Z[%i, %j, %k] : memref<20x36x18xf32>
      }
    }
  }
  return
}
