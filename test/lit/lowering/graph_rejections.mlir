// Graph constructs the lowering cannot take are located errors naming the
// reason (issue 12): never "unsupported operation" or a traceback.
// RUN: nem-opt %s --split-input-file --verify-diagnostics -p 'lower-to-nem{device=npm_pro_x1}'

// D-LOW-RESHAPE: a collapsed group must be contiguous.
func.func @collapse_strided(%x: memref<4x8xf32>, %y: memref<16xf32>) {
  %s = memref.subview %x[0, 0] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  // expected-error@+1 {{cannot lower 'memref.collapse_shape': collapsing dimensions [0, 1] of x that are not contiguous (strides [8, 1])}}
  %c = memref.collapse_shape %s [[0, 1]] : memref<4x4xf32, strided<[8, 1]>> into memref<16xf32, strided<[1]>>
  memref.copy %c, %y : memref<16xf32, strided<[1]>> to memref<16xf32>
  return
}
