// Graph constructs the lowering cannot take are located errors naming the
// reason (issue 12): never "unsupported operation" or a traceback.
// RUN: nem-opt %s --split-input-file --verify-diagnostics -p 'lower-to-nem{device=npm_pro_x1}'

// D-LOW-RESHAPE: a collapsed group must be contiguous (its source named by its type:
// the check runs in nem-rewrite-views, before buffers are named, D-LOW-VIEW-OP).
func.func @collapse_strided(%x: memref<4x8xf32>, %y: memref<16xf32>) {
  %s = memref.subview %x[0, 0] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  // expected-error@+1 {{cannot lower 'memref.collapse_shape': collapsing dimensions [0, 1] of memref<4x4xf32, strided<[8, 1]>> that are not contiguous (strides [8, 1])}}
  %c = memref.collapse_shape %s [[0, 1]] : memref<4x4xf32, strided<[8, 1]>> into memref<16xf32, strided<[1]>>
  memref.copy %c, %y : memref<16xf32, strided<[1]>> to memref<16xf32>
  return
}

// -----

// D-LOW-ELEM: i64 (an argmax's index output) is rejected with the decision named.
func.func @argmax_i64(%x: memref<4x8xf32>, %idx: memref<4xi64>) {
  // expected-error@-1 {{cannot lower 'func.func': element type i64 has no NEM equivalent (D-LOW-ELEM: NEM elements are at most 32 bits wide)}}
  return
}

// -----

// D-LOW-VIEW: a memref.view offset must be a whole number of elements.
func.func @view_misaligned(%y: memref<4xf32, 2>) {
  %c2 = arith.constant 2 : index
  %a = memref.alloc() : memref<64xi8, 2>
  // expected-error@+1 {{cannot lower 'memref.view': not supported: memref.view at byte offset 2 that is not a multiple of the element size (4 bytes) (D-LOW-VIEW)}}
  %v = memref.view %a[%c2][] : memref<64xi8, 2> to memref<4xf32, 2>
  memref.copy %v, %y : memref<4xf32, 2> to memref<4xf32, 2>
  return
}

// -----

// D-LOW-VIEW: a dynamic subview size must be a constant where it is lowered.
func.func @subview_dynamic(%x: memref<8x8xf32>, %y: memref<8x8xf32>) {
  affine.for %i = 0 to 8 {
    // expected-error@+1 {{cannot lower 'memref.subview': not supported: a memref.subview size (%i) that is not constant here (D-LOW-VIEW: NEM regions have static sizes)}}
    %s = memref.subview %x[0, 0] [%i, 8] [1, 1] : memref<8x8xf32> to memref<?x8xf32, strided<[8, 1]>>
    %t = memref.subview %y[0, 0] [%i, 8] [1, 1] : memref<8x8xf32> to memref<?x8xf32, strided<[8, 1]>>
    memref.copy %s, %t : memref<?x8xf32, strided<[8, 1]>> to memref<?x8xf32, strided<[8, 1]>>
  }
  return
}

// -----

// D-LOW-VIEW: so must a dynamic memref.view size (a constant one is fine:
// preload_script.test).
func.func @view_dynamic(%x: memref<256xi8, 2>, %y: memref<256xi8, 2>) {
  affine.for %i = 1 to 8 {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    // expected-error@+1 {{cannot lower 'memref.view': not supported: a memref.view size (%i) that is not constant here (D-LOW-VIEW: NEM regions have static sizes)}}
    %v = memref.view %x[%c0][%c8, %i] : memref<256xi8, 2> to memref<?x?xf32, 2>
    %w = memref.view %y[%c0][%c8, %i] : memref<256xi8, 2> to memref<?x?xf32, 2>
    memref.copy %v, %w : memref<?x?xf32, 2> to memref<?x?xf32, 2>
  }
  return
}
