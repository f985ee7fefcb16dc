func.func @main(%a: tensor<64xi8>, %b: tensor<64xi8>) -> tensor<64xi8> {
  %e = tensor.empty() : tensor<64xi8>
  %r = linalg.add ins(%a, %b : tensor<64xi8>, tensor<64xi8>) outs(%e : tensor<64xi8>) -> tensor<64xi8>
  return %r : tensor<64xi8>
}
