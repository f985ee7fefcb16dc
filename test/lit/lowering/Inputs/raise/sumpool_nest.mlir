// The sum half of an average pooling as a user writes it in affine loops:
// @kw_outer adds the window's columns in the outer loop (the offsets are
// added in that order, D-LOW-SUMPOOL); @dilated and @three_windows are
// near misses that stay escape-hatch tasks, with the reason.
func.func @kw_outer(%x: memref<1x6x6x4xf32>, %s: memref<1x2x2x4xf32>) {
  affine.for %oh = 0 to 2 {
    affine.for %ow = 0 to 2 {
      affine.for %c = 0 to 4 {
        affine.for %kw = 0 to 3 {
          affine.for %kh = 0 to 3 {
            %v = affine.load %x[0, %oh * 3 + %kh, %ow * 3 + %kw, %c] : memref<1x6x6x4xf32>
            %a = affine.load %s[0, %oh, %ow, %c] : memref<1x2x2x4xf32>
            %r = arith.addf %a, %v : f32
            affine.store %r, %s[0, %oh, %ow, %c] : memref<1x2x2x4xf32>
          }
        }
      }
    }
  }
  return
}

func.func @dilated(%x: memref<1x6x6x4xf32>, %s: memref<1x2x2x4xf32>) {
  affine.for %oh = 0 to 2 {
    affine.for %ow = 0 to 2 {
      affine.for %c = 0 to 4 {
        affine.for %kh = 0 to 2 {
          affine.for %kw = 0 to 2 {
            %v = affine.load %x[0, %oh + 2 * %kh, %ow + 2 * %kw, %c] : memref<1x6x6x4xf32>
            %a = affine.load %s[0, %oh, %ow, %c] : memref<1x2x2x4xf32>
            %r = arith.addf %a, %v : f32
            affine.store %r, %s[0, %oh, %ow, %c] : memref<1x2x2x4xf32>
          }
        }
      }
    }
  }
  return
}

func.func @three_windows(%x: memref<4x6x6xf32>, %s: memref<2x2x2xf32>) {
  affine.for %od = 0 to 2 {
    affine.for %oh = 0 to 2 {
      affine.for %ow = 0 to 2 {
        affine.for %kd = 0 to 2 {
          affine.for %kh = 0 to 3 {
            affine.for %kw = 0 to 3 {
              %v = affine.load %x[%od * 2 + %kd, %oh * 3 + %kh, %ow * 3 + %kw] : memref<4x6x6xf32>
              %a = affine.load %s[%od, %oh, %ow] : memref<2x2x2xf32>
              %r = arith.addf %a, %v : f32
              affine.store %r, %s[%od, %oh, %ow] : memref<2x2x2xf32>
            }
          }
        }
      }
    }
  }
  return
}

func.func @row_sum(%x: memref<4x8xf32>, %s: memref<4x1xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %a = affine.load %s[%i, 0] : memref<4x1xf32>
      %r = arith.addf %a, %v : f32
      affine.store %r, %s[%i, 0] : memref<4x1xf32>
    }
  }
  return
}
