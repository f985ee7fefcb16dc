func.func @f(%x: memref<4x8xf16>, %y: memref<4x8xf16>) {
  linalg.softmax ins(%x : memref<4x8xf16>) outs(%y : memref<4x8xf16>)
  return
}
