func.func @zero(%y: memref<4x8xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%y : memref<4x8xf32>)
  return
}
func.func @finite(%y: memref<8x8xf32>) {
  %c = arith.constant 1.5 : f32
  %v = memref.subview %y[0, 2] [4, 3] [1, 1] : memref<8x8xf32> to memref<4x3xf32, strided<[8, 1], offset: 2>>
  linalg.fill ins(%c : f32) outs(%v : memref<4x3xf32, strided<[8, 1], offset: 2>>)
  return
}
func.func @neg_inf(%y: memref<2x4xf16>) {
  %c = arith.constant 0xFC00 : f16
  affine.for %i = 0 to 2 {
    affine.for %j = 0 to 4 {
      affine.store %c, %y[%i, %j] : memref<2x4xf16>
    }
  }
  return
}
func.func @int8(%y: memref<16xi8>) {
  %c = arith.constant -3 : i8
  linalg.fill ins(%c : i8) outs(%y : memref<16xi8>)
  return
}
func.func @int32(%y: memref<16xi32>) {
  %c = arith.constant 7 : i32
  linalg.fill ins(%c : i32) outs(%y : memref<16xi32>)
  return
}
func.func @nan(%y: memref<16xf32>) {
  %c = arith.constant 0x7FC00000 : f32
  linalg.fill ins(%c : f32) outs(%y : memref<16xf32>)
  return
}
func.func @neg_zero(%y: memref<16xf32>) {
  %c = arith.constant -0.0 : f32
  linalg.fill ins(%c : f32) outs(%y : memref<16xf32>)
  return
}
func.func @diagonal(%y: memref<4x4xf32>) {
  %c = arith.constant 1.0 : f32
  affine.for %i = 0 to 4 {
    affine.store %c, %y[%i, %i] : memref<4x4xf32>
  }
  return
}
