func.func @f(%A: memref<4xf16>) {
  %c = arith.constant 1.0e10 : f16
  return
}
