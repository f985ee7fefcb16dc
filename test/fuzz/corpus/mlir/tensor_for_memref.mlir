func.func @f(%A: tensor<4xf32>) {
  affine.for %i = 0 to 4 {
    %v = affine.load %A[%i] : tensor<4xf32>
  }
  return
}
