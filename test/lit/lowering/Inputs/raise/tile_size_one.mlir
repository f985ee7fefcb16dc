// issue 12 reproducer (a user's depthwise Conv, nem-compile --tile-sizes 1,5):
// `affine-loop-tile` leaves a unit-step loop of one iteration (a tile of size
// 1 of a dimension) around the other tile loops (%tf), and one inside the
// point loops that indexes nothing (%tc).  Both are loops over tiles
// (D-LOW-TILES): the point nest is still one depthwise conv2d.
#lo = affine_map<(d0) -> (d0)>
#hi = affine_map<(d0) -> (d0 + 2)>
func.func @main(%x: memref<1x6x6x2x1xf32>, %w: memref<2x1x3x3x1xf32>, %y: memref<1x4x4x2x1xf32>) {
  affine.for %th = 0 to 4 step 2 {
    affine.for %tf = 0 to 1 {
      affine.for %tk = 0 to 3 step 3 {
        affine.for %tc = 0 to 1 {
          affine.for %h = #lo(%th) to #hi(%th) {
            affine.for %ow = 0 to 4 {
              affine.for %g = 0 to 2 {
                affine.for %f = 0 to 1 {
                  affine.for %kh = 0 to 3 {
                    affine.for %kw = 0 to 3 {
                      affine.for %c = 0 to 1 {
                        %a = affine.load %x[0, %h + %kh, %ow + %kw, %g, %c] : memref<1x6x6x2x1xf32>
                        %b = affine.load %w[%g, %f, %kh, %kw, %c] : memref<2x1x3x3x1xf32>
                        %acc = affine.load %y[0, %h, %ow, %g, %f] : memref<1x4x4x2x1xf32>
                        %m = arith.mulf %a, %b : f32
                        %s = arith.addf %acc, %m : f32
                        affine.store %s, %y[0, %h, %ow, %g, %f] : memref<1x4x4x2x1xf32>
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return
}
