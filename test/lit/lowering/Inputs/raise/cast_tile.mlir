// An elementwise body with a cast, for -affine-loop-tile (D-LOW-TILES, D-LOW-CAST-TREE).
func.func @acc_extf(%x: memref<4x8xf16>, %y: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %0 = affine.load %x[%i, %j] : memref<4x8xf16>
      %1 = affine.load %y[%i, %j] : memref<4x8xf32>
      %2 = arith.extf %0 : f16 to f32
      %3 = arith.addf %1, %2 : f32
      affine.store %3, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}
