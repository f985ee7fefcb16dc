// An op xDSL 0.74 does not define, outside linalg.
func.func @main(%x: memref<4xf32>) {
  %v = vector.splat %c : vector<4xf32>
  return
}
