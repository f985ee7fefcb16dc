// nem-rewrite-views (D-LOW-VIEW-OP): memref.collapse_shape, expand_shape and
// cast of the entry function become nem_lowering.view ops of their source
// (a reshape with its static layout, a cast without one: its source's view;
// subviews: subview_views.mlir), each keeping its result type and naming
// the op it replaced (the conversion's messages name that one); a reshape inside a pure loop nest (one
// compute task, its kernel printed as written) and other functions keep
// theirs.  The conversion lowers the view ops by one handler.
// RUN: nem-opt %s -p nem-rewrite-views | filecheck %s --check-prefix=VIEW
// VIEW-LABEL: func.func @main(%x: memref<2x3x4xf32>, %y: memref<2x6xf32>, %z: memref<2x2x3xf32>) {
// VIEW-NEXT: %[[V:.*]] = "nem_lowering.view"(%x) <{shape = array<i64: 2, 12>, strides = array<i64: 12, 1>, replaces = "memref.collapse_shape"}> : (memref<2x3x4xf32>) -> memref<2x12xf32>
// VIEW-NEXT: %[[C:.*]] = "nem_lowering.view"(%[[V]]) <{replaces = "memref.cast"}> : (memref<2x12xf32>) -> memref<?x12xf32>
// VIEW-NEXT: %[[S:.*]] = "nem_lowering.view"(%[[C]]) <{shape = array<i64: 2, 6>, strides = array<i64: 12, 1>, replaces = "memref.subview"}> : (memref<?x12xf32>) -> memref<2x6xf32, strided<[12, 1]>>
// VIEW-NEXT: memref.copy %[[S]], %y
// VIEW-NEXT: %[[E:.*]] = "nem_lowering.view"(%y) <{shape = array<i64: 2, 2, 3>, strides = array<i64: 6, 3, 1>, replaces = "memref.expand_shape"}> : (memref<2x6xf32>) -> memref<2x2x3xf32>
// VIEW-NEXT: memref.copy %[[E]], %z
// VIEW-LABEL: func.func @nest(
// VIEW: memref.collapse_shape %u
// VIEW-LABEL: func.func @other(
// VIEW-NEXT: memref.collapse_shape %x
//
// entry=nest: the reshape in the pure nest stays; entry=other: that one's is rewritten.
// RUN: nem-opt %s -p 'nem-rewrite-views{entry=nest}' | filecheck %s --check-prefix=NEST
// NEST-LABEL: func.func @nest(
// NEST-NEXT: affine.for
// NEST-NEXT: memref.collapse_shape %u
// RUN: nem-opt %s -p 'nem-rewrite-views{entry=other}' | filecheck %s --check-prefix=OTHER
// OTHER-LABEL: func.func @other(
// OTHER-NEXT: "nem_lowering.view"(%x) <{shape = array<i64: 2, 12>, strides = array<i64: 12, 1>, replaces = "memref.collapse_shape"}>
//
// lower-to-nem: the views address the arguments' buffers.
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem | filecheck %s --check-prefix=LOWER
// LOWER: transfer.sync(dst=region(y, 0, 48) elem=f32, shape=[2, 6], layout=MN, src=region(x, 0, 72) elem=f32, shape=[2, 6], strides=[12, 1])
// LOWER: transfer.sync(dst=region(z, 0, 48) elem=f32, shape=[2, 2, 3], layout=CHW, src=region(y, 0, 48) elem=f32, shape=[2, 2, 3], layout=CHW)
func.func @main(%x: memref<2x3x4xf32>, %y: memref<2x6xf32>, %z: memref<2x2x3xf32>) {
  %v = memref.collapse_shape %x [[0], [1, 2]] : memref<2x3x4xf32> into memref<2x12xf32>
  %c = memref.cast %v : memref<2x12xf32> to memref<?x12xf32>
  %s = memref.subview %c[0, 0] [2, 6] [1, 1] : memref<?x12xf32> to memref<2x6xf32, strided<[12, 1]>>
  memref.copy %s, %y : memref<2x6xf32, strided<[12, 1]>> to memref<2x6xf32>
  %e = memref.expand_shape %y [[0], [1, 2]] output_shape [2, 2, 3] : memref<2x6xf32> into memref<2x2x3xf32>
  memref.copy %e, %z : memref<2x2x3xf32> to memref<2x2x3xf32>
  return
}
func.func @nest(%w: memref<4x8xf32>, %u: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    %f = memref.collapse_shape %u [[0, 1]] : memref<4x8xf32> into memref<32xf32>
    affine.for %j = 0 to 8 {
      %a = affine.load %w[%i, %j] : memref<4x8xf32>
      affine.store %a, %f[%i * 8 + %j] : memref<32xf32>
    }
  }
  return
}
func.func @other(%x: memref<2x3x4xf32>) {
  %v = memref.collapse_shape %x [[0], [1, 2]] : memref<2x3x4xf32> into memref<2x12xf32>
  return
}
