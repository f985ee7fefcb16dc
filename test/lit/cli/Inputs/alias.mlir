#map = affine_map<(d0) -> (d0)>
func.func @f() {
  return
}
