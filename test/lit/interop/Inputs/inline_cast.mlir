func.func @f(%x: memref<4xf32>, %arg0: memref<4xf32>) { %0 = memref.cast %arg0 : memref<4xf32> to memref<?xf32>
  return
}
