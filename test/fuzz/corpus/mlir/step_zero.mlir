func.func @f(%A: memref<64xf32>) {
  affine.for %i = 0 to 8 step 0 {
    %v = affine.load %A[%i] : memref<64xf32>
    affine.store %v, %A[%i] : memref<64xf32>
  }
  return
}
