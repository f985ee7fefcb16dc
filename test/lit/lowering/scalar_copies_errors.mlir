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
