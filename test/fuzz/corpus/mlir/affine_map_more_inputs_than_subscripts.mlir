// affine.load whose map takes an input it has no subscript for: upstream's verifier refuses it; xDSL 0.74's did not and nem-opt printed past the subscripts (internal IndexError, review of stop 28)
func.func @f(%A: memref<8xf32>, %B: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %a = "affine.load"(%A) <{map = affine_map<(d0) -> (d0)>}> : (memref<8xf32>) -> f32
    "affine.store"(%a, %B, %i) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<8xf32>, index) -> ()
  }
  return
}
