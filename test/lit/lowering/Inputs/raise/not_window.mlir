// Looks like a 1-D convolution but reads a diagonal band: not raised.
func.func @main(%x: memref<8x8xf32>, %w: memref<3xf32>, %y: memref<6xf32>) {
  affine.for %i = 0 to 6 {
    affine.for %k = 0 to 3 {
      %a = affine.load %x[%i, %i + %k] : memref<8x8xf32>
      %b = affine.load %w[%k] : memref<3xf32>
      %c = affine.load %y[%i] : memref<6xf32>
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %c, %p : f32
      affine.store %s, %y[%i] : memref<6xf32>
    }
  }
  return
}
