// issue 12 reproducer (nem-compile, ONNX Conv with group > 1, MatMul with a
// 1-D operand): the NHWC activation viewed as [N, H, W, G, C/G] is a
// memref.expand_shape, lowered as a view (D-LOW-RESHAPE).
func.func @main(%x: memref<1x4x4x4xf32>, %y: memref<1x4x4x2x2xf32>) {
  %v = memref.expand_shape %x [[0], [1], [2], [3, 4]] output_shape [1, 4, 4, 2, 2]
      : memref<1x4x4x4xf32> into memref<1x4x4x2x2xf32>
  affine.for %h = 0 to 4 {
    affine.for %w = 0 to 4 {
      affine.for %g = 0 to 2 {
        affine.for %c = 0 to 2 {
          %a = affine.load %v[0, %h, %w, %g, %c] : memref<1x4x4x2x2xf32>
          affine.store %a, %y[0, %h, %w, %g, %c] : memref<1x4x4x2x2xf32>
        }
      }
    }
  }
  return
}
