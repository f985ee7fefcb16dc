// An access whose index leaves a dimension of its memref (not only the whole
// memref) is a located error at the access, raised nest or escape-hatch
// task alike (D-LOW-BOUNDS; outside report 28, finding 5: a raised nest
// gave EXT-01 "make the extent at least 240 bytes", an escape-hatch nest
// was accepted and failed at run time blaming the input data).  Only what
// is certain is judged: an access under a conditional, or in a loop whose
// trip count is not a constant, is not.
// RUN: nem-opt %s --split-input-file --verify-diagnostics -p 'lower-to-nem{device=npm_pro_x1}' -o /dev/null
// RUN: not nem-opt %s --split-input-file -p 'lower-to-nem{device=npm_pro_x1}' -o /dev/null 2>&1 | filecheck %s

// The report's raised nest (oob3.mlir): %j runs to 9 on a dimension of 8.
// CHECK: bounds.mlir:20:7: error: cannot lower 'affine.load': out-of-bounds access: index 1 of %A : memref<8x8xf32> ranges from 0 to 9, outside dimension 1 of size 8 (D-LOW-BOUNDS)
// CHECK-NEXT: {{^}}      %a = "affine.load"(%A, %i, %j)
// CHECK-NEXT: {{^}}      ^
// CHECK-NEXT: fix: keep index 1 within [0, 8): check the bounds of loop %j at 18:5 and the indices of this access (an access out of bounds has no defined result in MLIR)
func.func @add(%A: memref<8x8xf32>, %B: memref<8x8xf32>, %C: memref<8x8xf32>) {
  affine.for %i = 0 to 6 {
    affine.for %j = 0 to 10 {
      // expected-error@+1 {{cannot lower 'affine.load': out-of-bounds access: index 1 of %A : memref<8x8xf32> ranges from 0 to 9, outside dimension 1 of size 8 (D-LOW-BOUNDS)}}
      %a = "affine.load"(%A, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<8x8xf32>, index, index) -> f32
      // expected-error@+1 {{index 1 of %B : memref<8x8xf32> ranges from 0 to 9}}
      %b = "affine.load"(%B, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<8x8xf32>, index, index) -> f32
      %s = arith.addf %a, %b : f32
      // expected-error@+1 {{cannot lower 'affine.store': out-of-bounds access: index 1 of %C : memref<8x8xf32> ranges from 0 to 9}}
      "affine.store"(%s, %C, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (f32, memref<8x8xf32>, index, index) -> ()
    }
  }
  return
}

// -----

// The report's escape-hatch nest (oob4.mlir), a row reduction of exp.
func.func @red(%A: memref<8x8xf32>, %S: memref<8xf32>) {
  affine.for %i = 0 to 6 {
    affine.for %j = 0 to 10 {
      // expected-error@+1 {{cannot lower 'affine.load': out-of-bounds access: index 1 of %A : memref<8x8xf32> ranges from 0 to 9, outside dimension 1 of size 8 (D-LOW-BOUNDS)}}
      %a = "affine.load"(%A, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<8x8xf32>, index, index) -> f32
      %s = "affine.load"(%S, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<8xf32>, index) -> f32
      %e = math.exp %a : f32
      %t = arith.addf %s, %e : f32
      "affine.store"(%t, %S, %i) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<8xf32>, index) -> ()
    }
  }
  return
}

// -----

// Past the whole memref (it was BUF-02 on the NEM program, in NEM terms),
// and below 0.
func.func @whole(%A: memref<256xf32>, %B: memref<256xf32>) {
  affine.for %i = 0 to 512 {
    // expected-error@+1 {{index 0 of %A : memref<256xf32> ranges from 0 to 511, outside dimension 0 of size 256}}
    %x = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<256xf32>, index) -> f32
    %y = arith.addf %x, %x : f32
    // expected-error@+1 {{index 0 of %B : memref<256xf32> ranges from -1 to 510, outside dimension 0 of size 256}}
    "affine.store"(%y, %B, %i) <{map = affine_map<(d0) -> (d0 - 1)>}> : (f32, memref<256xf32>, index) -> ()
  }
  return
}

// -----

// A tile loop (the index is the tile's offset plus the point's) and an
// allocation, named by its op since xDSL drops `_3` from `%buf_3`.
// CHECK: fix: keep index 0 within [0, 64): check the bounds of loop %ii at 71:5 and the indices of this access
func.func @tiles(%A: memref<64xf32>) {
  %buf_3 = memref.alloc() : memref<64xf32>
  affine.for %i = 0 to 64 step 16 {
    affine.for %ii = affine_map<(d0) -> (d0)>(%i) to affine_map<(d0) -> (d0 + 16)>(%i) {
      // expected-error@+1 {{index 0 of %buf (memref.alloc at 69:3) : memref<64xf32> ranges from 1 to 64, outside dimension 0 of size 64}}
      %x = "affine.load"(%buf_3, %ii) <{map = affine_map<(d0) -> (d0 + 1)>}> : (memref<64xf32>, index) -> f32
      "affine.store"(%x, %A, %ii) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<64xf32>, index) -> ()
    }
  }
  return
}

// -----

// A scalar load outside any loop nest (its value is loaded by the kernel).
func.func @scalar(%S: memref<8xf32>, %A: memref<16xf32>) {
  // expected-error@+1 {{index 0 of %S : memref<8xf32> is 8, outside dimension 0 of size 8}}
  %s = "affine.load"(%S) <{map = affine_map<() -> (8)>}> : (memref<8xf32>) -> f32
  affine.for %i = 0 to 16 {
    %a = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32>, index) -> f32
    %m = arith.mulf %a, %s : f32
    "affine.store"(%m, %A, %i) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<16xf32>, index) -> ()
  }
  return
}

// -----

// Not judged: an access under a conditional, in a loop of no iteration.
func.func @guarded(%A: memref<8xf32>, %B: memref<16xf32>) {
  affine.for %i = 0 to 16 {
    affine.if affine_set<(d0) : (7 - d0 >= 0)>(%i) {
      %a = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<8xf32>, index) -> f32
      "affine.store"(%a, %B, %i) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<16xf32>, index) -> ()
    }
    affine.for %j = 0 to 0 {
      %c = "affine.load"(%A, %j) <{map = affine_map<(d0) -> (d0 + 100)>}> : (memref<8xf32>, index) -> f32
      "affine.store"(%c, %B, %i) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<16xf32>, index) -> ()
    }
  }
  return
}
