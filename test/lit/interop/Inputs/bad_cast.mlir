func.func @f(%C: memref<16xf32>) {
  %c = memref.cast %C : memref<16xf32> to memref<?xi32>
  return
}
