func.func @f(%A: memref<16xi8>, %B: memref<16xi8>, %C: memref<16xi8>) {
  linalg.add ins(%A, %B : memref<16xi8>, memref<16xi8>) outs(%C : memref<16xi8>)
  return
}
