func.func @f(%A: memref<٤x4xf32>) {
  return
}
