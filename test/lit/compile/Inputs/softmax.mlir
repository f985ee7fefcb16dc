func.func @attn(%x: tensor<8x8xf16>, %z: tensor<4x6xf32>) -> (tensor<8x8xf16>, tensor<4x6xf32>) {
  %e = tensor.empty() : tensor<8x8xf16>
  %y = linalg.softmax dimension(1) ins(%x : tensor<8x8xf16>) outs(%e : tensor<8x8xf16>) -> tensor<8x8xf16>
  %e2 = tensor.empty() : tensor<4x6xf32>
  %y2 = linalg.softmax dimension(1) ins(%z : tensor<4x6xf32>) outs(%e2 : tensor<4x6xf32>) -> tensor<4x6xf32>
  return %y, %y2 : tensor<8x8xf16>, tensor<4x6xf32>
}
