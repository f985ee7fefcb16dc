func.func @mm(%a: tensor<8x32xf32>, %b: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %z = arith.constant 1 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x32xf32>, tensor<32x16xf32>)
                     outs(%f : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  } -> tensor<8x16xf32>
    %y = arith.maximumf %x, %z : f32
    linalg.yield %y : f32
  ^