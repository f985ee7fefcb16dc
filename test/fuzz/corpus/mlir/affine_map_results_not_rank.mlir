// affine.load whose map has more results than the memref has dimensions (upstream refuses it)
func.func @f(%A: memref<8xf32>, %B: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %a = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0, d0)>}> : (memref<8xf32>, index) -> f32
    "affine.store"(%a, %B, %i) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<8xf32>, index) -> ()
  }
  return
}
