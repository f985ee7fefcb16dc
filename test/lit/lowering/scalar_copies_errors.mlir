// A one-element copy out of bounds (D-LOW-BOUNDS): lower-to-nem reports it
// at the access, the load's first, as before nem-raise-scalar-copies
// (D-LOW-SCALAR-COPY), which moves the pair into a nem_lowering.element_copy.
// RUN: nem-opt %s --split-input-file --verify-diagnostics -p 'lower-to-nem{device=npm_pro_x1}'

func.func @load_out(%A: memref<8xf32>, %B: memref<4xf32, 2>) {
  // expected-error@+1 {{cannot lower 'affine.load': out-of-bounds access}}
  %v = affine.load %A[8] : memref<8xf32>
  affine.store %v, %B[9] : memref<4xf32, 2>
  return
}

// -----

func.func @store_out(%A: memref<8xf32>, %B: memref<4xf32, 2>) {
  affine.for %i = 0 to 4 {
    %a = memref.alloc() : memref<2xf32, 2>
    %v = affine.load %A[%i] : memref<8xf32>
    // expected-error@+1 {{cannot lower 'affine.store': out-of-bounds access}}
    affine.store %v, %a[%i] : memref<2xf32, 2>
  }
  return
}

// -----

// A write between the load and the store (a copy into A): the copy, one
// transfer at the store, would read the new value; rejected at the write,
// not miscompiled (before the pass the conversion lowered it, silently
// reading A after the memref.copy).
func.func @write_between(%A: memref<8xf32>, %C: memref<8xf32>, %B: memref<4xf32, 2>) {
  %v = affine.load %A[0] : memref<8xf32>
  // expected-error@+1 {{not supported: this op may write memory between the load and the store of a one-element copy}}
  memref.copy %C, %A : memref<8xf32> to memref<8xf32>
  affine.store %v, %B[0] : memref<4xf32, 2>
  return
}
