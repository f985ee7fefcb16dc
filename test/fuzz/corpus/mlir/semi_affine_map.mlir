#m = affine_map<(d0) -> (d0 * d0)>
func.func @f(%A: memref<64xf32>) {
  affine.for %i = 0 to 8 {
    %j = affine.apply #m(%i)
  }
  return
}
