func.func @f(%A: memref<4x4xf32>) {
  linalg.matmul
  return
}
