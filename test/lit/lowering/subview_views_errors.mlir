// nem-rewrite-views' refusals of a memref.subview (D-LOW-VIEW-OP, session 27),
// at the subview: a source whose type has dynamic strides, also behind its
// casts (a view's strides are static; the conversion took the source's
// view's, which a memref.view of a size that is no arith.constant has where
// it is lowered only: here 8, then 4 in the peeled last tile), and dynamic steps.
// RUN: nem-opt %s --split-input-file --verify-diagnostics -p 'lower-to-nem{device=npm_pro_x1}'

func.func @of_a_dynamic_size_view(%y: memref<2x4xf32>) {
  %a = memref.alloc() : memref<64xi8>
  %c0 = arith.constant 0 : index
  affine.for %j = 0 to 12 step 8 {
    %n = affine.min affine_map<(d0) -> (-d0 + 12, 8)>(%j)
    %v = memref.view %a[%c0][%n] : memref<64xi8> to memref<2x?xf32>
    // expected-error@+1 {{not supported: memref.subview of a memref with dynamic strides (memref<2x?xf32>) (D-LOW-VIEW-OP: a view's strides are static)}}
    %s = memref.subview %v[0, 0] [2, 4] [1, 1] : memref<2x?xf32> to memref<2x4xf32, strided<[?, 1]>>
    memref.copy %s, %y : memref<2x4xf32, strided<[?, 1]>> to memref<2x4xf32>
  }
  return
}

// -----

func.func @dynamic_steps(%x: memref<4x8xf32>, %y: memref<2x4xf32>) {
  %c2 = arith.constant 2 : index
  // expected-error@+1 {{not supported: dynamic strides in memref.subview (D-LOW-VIEW)}}
  %s = memref.subview %x[0, 0] [2, 4] [1, %c2] : memref<4x8xf32> to memref<2x4xf32, strided<[8, ?]>>
  memref.copy %s, %y : memref<2x4xf32, strided<[8, ?]>> to memref<2x4xf32>
  return
}
