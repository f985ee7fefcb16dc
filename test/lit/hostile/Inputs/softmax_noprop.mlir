func.func @f(%x: memref<4x8xf16>, %y: memref<4x8xf16>) {
  "linalg.softmax"(%x, %y) : (memref<4x8xf16>, memref<4x8xf16>) -> ()
  return
}
