// issue 12 reproducer (nem-compile, ONNX Flatten / Reshape / MatMul on
// [1, S, D]): a contiguous reshape is a memref.collapse_shape view.
// Lowers as a view (D-LOW-RESHAPE).
func.func @main(%x: memref<2x3x4xf32>, %w: memref<12x5xf32>, %y: memref<2x5xf32>) {
  %v = memref.collapse_shape %x [[0], [1, 2]] : memref<2x3x4xf32> into memref<2x12xf32>
  %c0 = arith.constant 0.0 : f32
  affine.for %i = 0 to 2 {
    affine.for %j = 0 to 5 {
      affine.store %c0, %y[%i, %j] : memref<2x5xf32>
    }
  }
  affine.for %i = 0 to 2 {
    affine.for %j = 0 to 5 {
      affine.for %k = 0 to 12 {
        %a = affine.load %v[%i, %k] : memref<2x12xf32>
        %b = affine.load %w[%k, %j] : memref<12x5xf32>
        %c = affine.load %y[%i, %j] : memref<2x5xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %y[%i, %j] : memref<2x5xf32>
      }
    }
  }
  return
}
