// An unfolded BatchNormalization (a per-column scale, then a shift) and a
// Relu, one linalg.generic each (test/lit/compile/elementwise_chain.test).
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @main(%x: tensor<64x256xf32>, %s: tensor<256xf32>, %t: tensor<256xf32>) -> tensor<64x256xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<64x256xf32>
  %m = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<64x256xf32>, tensor<256xf32>) outs(%e0 : tensor<64x256xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<64x256xf32>
  %e1 = tensor.empty() : tensor<64x256xf32>
  %n = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %t : tensor<64x256xf32>, tensor<256xf32>) outs(%e1 : tensor<64x256xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<64x256xf32>
  %e2 = tensor.empty() : tensor<64x256xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%n : tensor<64x256xf32>) outs(%e2 : tensor<64x256xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  } -> tensor<64x256xf32>
  return %y : tensor<64x256xf32>
}
