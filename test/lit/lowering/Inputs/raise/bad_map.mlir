// linalg.map with the wrong operand count: upstream rejects it.
func.func @main(%x: memref<4xf32>) {
  linalg.map { arith.addf } ins(%x : memref<4xf32>) outs(%x : memref<4xf32>)
  return
}
