// Values carried out of a top-level loop (iter_args) and stored after it
// (D-LOW-CARRIED).  @sum is the outside report 28's program (finding 11),
// in generic form; @mean divides before storing; @max_then_scale and
// @load_between are rejected with the reason.
func.func @sum(%C: memref<16xf32>, %D: memref<1xf32>) {
  %z = arith.constant 0.0 : f32
  %r = affine.for %i = 0 to 16 iter_args(%acc = %z) -> f32 {
    %a = "affine.load"(%C, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32>, index) -> f32
    %b = arith.addf %acc, %a : f32
    affine.yield %b : f32
  }
  "affine.store"(%r, %D) <{map = affine_map<() -> (0)>}> : (f32, memref<1xf32>) -> ()
  return
}

func.func @mean(%C: memref<16xf32>, %D: memref<2xf32>) {
  %z = arith.constant 0.0 : f32
  %n = arith.constant 16.0 : f32
  %r:2 = affine.for %i = 0 to 16 iter_args(%acc = %z, %sq = %z) -> (f32, f32) {
    %a = "affine.load"(%C, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32>, index) -> f32
    %b = arith.addf %acc, %a : f32
    %p = arith.mulf %a, %a : f32
    %q = arith.addf %sq, %p : f32
    affine.yield %b, %q : f32, f32
  }
  %m = arith.divf %r#0, %n : f32
  "affine.store"(%m, %D) <{map = affine_map<() -> (0)>}> : (f32, memref<2xf32>) -> ()
  %v = arith.divf %r#1, %n : f32
  "affine.store"(%v, %D) <{map = affine_map<() -> (1)>}> : (f32, memref<2xf32>) -> ()
  return
}

func.func @max_then_scale(%C: memref<16xf32>, %D: memref<16xf32>) {
  %z = arith.constant 0.0 : f32
  %r = affine.for %i = 0 to 16 iter_args(%acc = %z) -> f32 {
    %a = "affine.load"(%C, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32>, index) -> f32
    %b = arith.maximumf %acc, %a : f32
    affine.yield %b : f32
  }
  affine.for %i = 0 to 16 {
    %a = "affine.load"(%C, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32>, index) -> f32
    %s = arith.divf %a, %r : f32
    "affine.store"(%s, %D, %i) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<16xf32>, index) -> ()
  }
  return
}

func.func @load_between(%C: memref<16xf32>, %D: memref<1xf32>) {
  %z = arith.constant 0.0 : f32
  %r = affine.for %i = 0 to 16 iter_args(%acc = %z) -> f32 {
    %a = "affine.load"(%C, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32>, index) -> f32
    %b = arith.addf %acc, %a : f32
    affine.yield %b : f32
  }
  %old = "affine.load"(%D) <{map = affine_map<() -> (0)>}> : (memref<1xf32>) -> f32
  %t = arith.addf %r, %old : f32
  "affine.store"(%t, %D) <{map = affine_map<() -> (0)>}> : (f32, memref<1xf32>) -> ()
  return
}

// In a loop that stages data (a NEM loop): one task per iteration, its index an index_arg.
func.func @per_row(%C: memref<4x16xf32>, %D: memref<4xf32>) {
  %z = arith.constant 0.0 : f32
  affine.for %r = 0 to 4 {
    %t = memref.alloc() : memref<16xf32, 2>
    affine.for %j = 0 to 16 {
      %a = "affine.load"(%C, %r, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<4x16xf32>, index, index) -> f32
      "affine.store"(%a, %t, %j) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<16xf32, 2>, index) -> ()
    }
    %s = affine.for %i = 0 to 16 iter_args(%acc = %z) -> f32 {
      %a = "affine.load"(%t, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32, 2>, index) -> f32
      %b = arith.addf %acc, %a : f32
      affine.yield %b : f32
    }
    "affine.store"(%s, %D, %r) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<4xf32>, index) -> ()
  }
  return
}
