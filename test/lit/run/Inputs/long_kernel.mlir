func.func @f(%A: memref<4xf32>) {
  affine.for %i = 0 to 1000000000000 {
    %a = affine.load %A[0] : memref<4xf32>
    %b = math.sin %a : f32
    affine.store %b, %A[0] : memref<4xf32>
  }
  return
}
