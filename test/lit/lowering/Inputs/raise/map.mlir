// linalg.map (xDSL 0.74 does not define it).
func.func @main(%x: memref<4x8xf32>, %z: memref<4x8xf32>, %y: memref<4x8xf32>) {
  linalg.map { arith.addf } ins(%x, %z : memref<4x8xf32>, memref<4x8xf32>) outs(%y : memref<4x8xf32>)
  return
}
