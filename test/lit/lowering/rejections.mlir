// Every rejection names the op, its location and the reason (never a
// traceback, never silently wrong output).
// RUN: nem-opt %s --split-input-file --verify-diagnostics -p 'lower-to-nem{device=npm_pro_x1}'

func.func @dyn(%A: memref<?x64xf32>) {
  // expected-error@-1 {{cannot lower 'func.func': dynamic shape memref<?x64xf32> is not supported}}
  return
}

// -----

func.func @dyn_alloc(%n: index) {
  // expected-error@-1 {{cannot lower 'func.func': index argument #0 has no NEM equivalent}}
  return
}

// -----

func.func @unknown(%A: memref<64xf32>) {
  %c = arith.constant 1.0 : f32
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{cannot lower 'memref.store': a scalar access outside a loop nest has no NEM equivalent}}
  memref.store %c, %A[%c0] : memref<64xf32>
  return
}

// -----

func.func @nonaffine(%A: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %n = arith.constant 4096 : index
  %buf = memref.alloc() : memref<64x64xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  affine.for %i = 0 to 4 {
    // expected-error@+1 {{cannot lower 'arith.muli': product of two non-constant indices is not affine}}
    %sq = arith.muli %i, %i : index
    affine.dma_start %A[%sq, %c0], %buf[%c0, %c0], %tag[0], %n : memref<64x64xf32>, memref<64x64xf32, 2>, memref<1xi32>
    affine.dma_wait %tag[0], %n : memref<1xi32>
  }
  return
}

// -----

func.func @ambiguous(%A: memref<64xf32>, %B: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %n = arith.constant 64 : index
  %a = memref.alloc() : memref<64xf32, 2>
  %b = memref.alloc() : memref<64xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  affine.dma_start %A[%c0], %a[%c0], %tag[0], %n : memref<64xf32>, memref<64xf32, 2>, memref<1xi32>
  // expected-error@+1 {{cannot lower 'affine.dma_start': this DMA reuses a tag slot whose previous DMA has not been waited (ambiguous pairing)}}
  affine.dma_start %B[%c0], %b[%c0], %tag[0], %n : memref<64xf32>, memref<64xf32, 2>, memref<1xi32>
  affine.dma_wait %tag[0], %n : memref<1xi32>
  return
}

// -----

func.func @unpaired(%A: memref<64xf32>) {
  %n = arith.constant 64 : index
  %tag = memref.alloc() : memref<2xi32>
  // expected-error@+1 {{cannot lower 'affine.dma_wait': no dma_start with this tag and index is pending}}
  affine.dma_wait %tag[1], %n : memref<2xi32>
  return
}

// -----

func.func @partial(%A: memref<100xf32>) {
  %n = arith.constant 32 : index
  %a = memref.alloc() : memref<32xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  affine.for %i = 0 to 100 step 32 {
    // expected-error@+1 {{cannot lower 'affine.for': max/min loop bounds (partial tiles) are not supported}}
    affine.for %j = 0 to min affine_map<(d0) -> (32, 100 - d0)>(%i) {
      affine.dma_start %A[%i], %a[%j], %tag[0], %n : memref<100xf32>, memref<32xf32, 2>, memref<1xi32>
      affine.dma_wait %tag[0], %n : memref<1xi32>
    }
  }
  return
}

// -----

func.func @space(%A: memref<64xf32>) {
  // expected-error@+1 {{cannot lower 'memref.alloc': memory space 7 is not mapped to a NEM level}}
  %a = memref.alloc() : memref<64xf32, 7>
  %n = arith.constant 64 : index
  %c0 = arith.constant 0 : index
  %tag = memref.alloc() : memref<1xi32>
  affine.dma_start %A[%c0], %a[%c0], %tag[0], %n : memref<64xf32>, memref<64xf32, 7>, memref<1xi32>
  affine.dma_wait %tag[0], %n : memref<1xi32>
  return
}

// -----

func.func @f64(%A: memref<64xf64>) {
  // expected-error@-1 {{element type f64 has no NEM equivalent}}
  return
}

// -----

func.func @carried_index(%X: memref<128xf32>, %Z: memref<128xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error@+1 {{cannot lower 'affine.for': not supported: a loop-carried value of type index in a loop that moves data (NEM loops carry no values)}}
  %r = affine.for %i = 0 to 128 step 32 iter_args(%acc = %c0) -> (index) {
    %xs = memref.subview %X[%i] [32] [1] : memref<128xf32> to memref<32xf32, strided<[1], offset: ?>>
    %zs = memref.subview %Z[%i] [32] [1] : memref<128xf32> to memref<32xf32, strided<[1], offset: ?>>
    memref.copy %xs, %zs : memref<32xf32, strided<[1], offset: ?>> to memref<32xf32, strided<[1], offset: ?>>
    affine.yield %acc : index
  }
  return
}

// -----

func.func private @helper() {
  // expected-error@-1 {{cannot lower 'func.func': no public func.func to lower}}
  return
}

// -----

// An async.execute under affine.if: conditionals exist only inside compute
// kernels, not between tasks.
func.func @cond_execute(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %i = 0 to 4 {
    // expected-error@+1 {{cannot lower 'affine.if': control flow other than affine.for is not supported at task level}}
    affine.if affine_set<(d0) : (d0 - 2 >= 0)>(%i) {
      %t = async.execute {
        memref.copy %A, %B : memref<64xf32> to memref<64xf32>
        async.yield
      }
      async.await %t : !async.token
    }
  }
  return
}

// -----

// A scalar loaded before a loop nest is loaded by the nest's kernel, later
// than MLIR loads it: an access to its memref in between is rejected.
func.func @scalar_changed(%S: memref<2xf32>, %A: memref<64xf32>, %B: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %s = affine.load %S[0] : memref<2xf32>
  affine.for %k = 0 to 2 {
    %v = affine.load %A[%k] : memref<64xf32>
    affine.store %v, %S[%k] : memref<2xf32>
  }
  // expected-error@+1 {{cannot lower 'affine.for': this loop nest uses the value loaded at}}
  affine.for %i = 0 to 64 {
    %a = affine.load %A[%i] : memref<64xf32>
    %m = arith.mulf %a, %s : f32
    affine.store %m, %B[%i] : memref<64xf32>
  }
  return
}

// -----

// A region past the end of its buffer that no access shows out of bounds
// (here a subview past the end of its memref; an access whose index leaves
// its memref is reported at the access by the conversion, D-LOW-BOUNDS:
// bounds.mlir) is reported by nem-check-lowered{declarations-only=true},
// before nem-synthesize-deps orders the tasks (a 65536-long k loop over
// 256-wide memrefs took 69 s to reach the final check,
// test/fuzz/corpus/mlir/matmul_k_loop_out_of_bounds.mlir).
// RULE: REG-02
func.func @oob(%A: memref<256xf32>, %B: memref<256xf32>) {
  %s = memref.subview %A[200] [100] [1] : memref<256xf32> to memref<100xf32, strided<[1], offset: 200>>
  // expected-error@+1 {{lowered NEM program fails its checks: inline region covers bytes [800, 1200) but buffer 'A' has 1024 bytes}}
  affine.for %i = 0 to 100 {
    %x = "affine.load"(%s, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<100xf32, strided<[1], offset: 200>>, index) -> f32
    %y = arith.addf %x, %x : f32
    "affine.store"(%y, %B, %i) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<256xf32>, index) -> ()
  }
  return
}
