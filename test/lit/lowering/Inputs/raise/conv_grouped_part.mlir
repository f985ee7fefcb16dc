// A tile of part of each group's output channels (2 of 3): the group and
// channel dimensions of Y do not form one channel axis (D-LOW-GROUPCONV).
func.func @main(%x: memref<1x6x6x2x2xf32>, %w: memref<2x3x3x3x2xf32>, %y: memref<1x4x4x2x3xf32>) {
  affine.for %oh = 0 to 4 {
    affine.for %ow = 0 to 4 {
      affine.for %g = 0 to 2 {
        affine.for %f = 0 to 2 {
          affine.for %kh = 0 to 3 {
            affine.for %kw = 0 to 3 {
              affine.for %c = 0 to 2 {
                %a = affine.load %x[0, %oh + %kh, %ow + %kw, %g, %c] : memref<1x6x6x2x2xf32>
                %b = affine.load %w[%g, %f, %kh, %kw, %c] : memref<2x3x3x3x2xf32>
                %p = arith.mulf %a, %b : f32
                %s = affine.load %y[0, %oh, %ow, %g, %f] : memref<1x4x4x2x3xf32>
                %t = arith.addf %s, %p : f32
                affine.store %t, %y[0, %oh, %ow, %g, %f] : memref<1x4x4x2x3xf32>
              }
            }
          }
        }
      }
    }
  }
  return
}
