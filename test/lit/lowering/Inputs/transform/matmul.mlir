// The payload of the transform-dialect recipes (scf_for.test, docs/compile.md).
func.func @main(%A: memref<8x16xf32>, %B: memref<16x8xf32>, %C: memref<8x8xf32>) {
  linalg.matmul ins(%A, %B : memref<8x16xf32>, memref<16x8xf32>) outs(%C : memref<8x8xf32>)
  return
}
