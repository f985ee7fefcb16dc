// A loop nest with an affine.if (upstream custom syntax, implicit terminator,
// an else region with a result): not raisable, so it becomes an escape-hatch
// compute task whose kernel the runtime interprets (D-LOW-ESCAPE).
func.func @clamp_rows(%X: memref<16x24xf32>, %Z: memref<16x24xf32>) {
  affine.for %i = 0 to 16 {
    affine.for %j = 0 to 24 {
      %a = affine.load %X[%i, %j] : memref<16x24xf32>
      %r = affine.if affine_set<(d0, d1) : (d0 - 4 >= 0, 19 - d1 >= 0)>(%i, %j) -> f32 {
        affine.yield %a : f32
      } else {
        %n = arith.negf %a : f32
        affine.yield %n : f32
      }
      affine.store %r, %Z[%i, %j] : memref<16x24xf32>
      affine.if affine_set<(d0) : (d0 == 0)>(%i) {
        %c = arith.constant 1.0 : f32
        affine.store %c, %Z[%i, %j] : memref<16x24xf32>
      }
    }
  }
  return
}
