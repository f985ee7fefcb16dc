// Clip and ReLU6 as the importer writes them (D-LOW-CLAMP): min(max(x, lo), hi)
// with constant bounds, either operand order; and a near miss, hi = +0, that
// stays a max and a min (NEM's clamp gives +0 for x = -0 there, MLIR -0).
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @relu6(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %lo = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %hi = arith.constant 6.0 : f32
    %m = arith.maximumf %v, %lo : f32
    %r = arith.minimumf %m, %hi : f32
    linalg.yield %r : f32
  }
  return
}
func.func @clip(%x: memref<4x8xf16>, %y: memref<4x8xf16>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf16>) outs(%y : memref<4x8xf16>) {
  ^bb0(%v: f16, %o: f16):
    %lo = arith.constant -1.5 : f16
    %hi = arith.constant 0.3 : f16
    %m = arith.maximumf %lo, %v : f16
    %r = arith.minimumf %hi, %m : f16
    linalg.yield %r : f16
  }
  return
}
func.func @near(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %lo = arith.constant -2.0 : f32
    %hi = arith.constant 0.0 : f32
    %m = arith.maximumf %v, %lo : f32
    %r = arith.minimumf %m, %hi : f32
    linalg.yield %r : f32
  }
  return
}
