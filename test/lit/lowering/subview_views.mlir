// nem-rewrite-views (D-LOW-VIEW-OP, session 27): a memref.subview of the
// entry function becomes a nem_lowering.view of its source: its base an
// affine map of the dynamic offsets (the source type's strides as
// coefficients; none when it is 0), its shape the kept sizes (a dynamic
// one, printed as i64's minimum, an operand the conversion needs constant
// where it lowers the view: the full tiles and the peeled last one), its
// strides the source's times the steps; the unit sizes a rank-reducing
// subview drops are dropped.  A subview in a pure nest stays (its task's
// kernel prints it); other functions keep theirs.
// RUN: nem-opt %s -p nem-rewrite-views | filecheck %s --check-prefix=VIEW
// VIEW-LABEL: func.func @tiles(%b: memref<48x40xf32>, %o: memref<48x40xf32>) {
// VIEW: %[[N:.*]] = affine.min
// VIEW-NEXT: %[[S:.*]] = "nem_lowering.view"(%b, %j, %[[N]]) <{shape = array<i64: 48, -9223372036854775808>, strides = array<i64: 40, 1>, replaces = "memref.subview", base = affine_map<(d0) -> (d0)>}> : (memref<48x40xf32>, index, index) -> memref<48x?xf32, strided<[40, 1], offset: ?>>
// VIEW-NEXT: %[[D:.*]] = "nem_lowering.view"(%o, %j, %[[N]]) <{shape = array<i64: 48, -9223372036854775808>, strides = array<i64: 40, 1>, replaces = "memref.subview", base = affine_map<(d0) -> (d0)>}>
// VIEW-NEXT: memref.copy %[[S]], %[[D]]
// VIEW-LABEL: func.func @rows(
// VIEW-NEXT: memref.subview %x[1, 1] [1, 6] [1, 2]
// VIEW-LABEL: func.func @nest(
// VIEW: memref.subview %x
//
// entry=rows: row 1's columns 1, 3, ..., 11 (the unit row dropped), then every other one of them.
// RUN: nem-opt %s -p 'nem-rewrite-views{entry=rows}' | filecheck %s --check-prefix=ROWS
// ROWS-LABEL: func.func @rows(
// ROWS-NEXT: %[[R:.*]] = "nem_lowering.view"(%x) <{shape = array<i64: 6>, strides = array<i64: 2>, replaces = "memref.subview", base = affine_map<() -> (13)>}> : (memref<4x12xf32>) -> memref<6xf32, strided<[2], offset: 13>>
// ROWS-NEXT: "nem_lowering.view"(%[[R]]) <{shape = array<i64: 3>, strides = array<i64: 4>, replaces = "memref.subview"}> : (memref<6xf32, strided<[2], offset: 13>>) -> memref<3xf32, strided<[4], offset: 13>>
// RUN: nem-opt %s -p 'nem-rewrite-views{entry=nest}' | filecheck %s --check-prefix=NEST
// NEST-LABEL: func.func @nest(
// NEST-NEXT: affine.for
// NEST-NEXT: memref.subview %x
//
// lower-to-nem: the full tiles' copy (32 columns) and the peeled last tile's (8 columns);
// the rows' elements 13, 17, 21.
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem | filecheck %s --check-prefix=LOWER
// LOWER: transfer.sync(dst=region(o, 0, 7648) elem=f32, shape=[48, 32], strides=[40, 1], src=region(b, 0, 7648) elem=f32, shape=[48, 32], strides=[40, 1])
// LOWER: transfer.sync(dst=region(o, 128, 7552) elem=f32, shape=[48, 8], strides=[40, 1], src=region(b, 128, 7552) elem=f32, shape=[48, 8], strides=[40, 1])
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 entry=rows}' -t nem | filecheck %s --check-prefix=RLOW
// RLOW: transfer.sync(dst=region(y, 0, 12) elem=f32, shape=[3], layout=C, src=region(x, 52, 36) elem=f32, shape=[3], strides=[4])
func.func @tiles(%b: memref<48x40xf32>, %o: memref<48x40xf32>) {
  affine.for %j = 0 to 40 step 32 {
    %0 = affine.min affine_map<(d0) -> (-d0 + 40, 32)>(%j)
    %s = memref.subview %b[0, %j] [48, %0] [1, 1] : memref<48x40xf32> to memref<48x?xf32, strided<[40, 1], offset: ?>>
    %d = memref.subview %o[0, %j] [48, %0] [1, 1] : memref<48x40xf32> to memref<48x?xf32, strided<[40, 1], offset: ?>>
    memref.copy %s, %d : memref<48x?xf32, strided<[40, 1], offset: ?>> to memref<48x?xf32, strided<[40, 1], offset: ?>>
  }
  return
}
func.func @rows(%x: memref<4x12xf32>, %y: memref<3xf32>) {
  %r = memref.subview %x[1, 1] [1, 6] [1, 2] : memref<4x12xf32> to memref<6xf32, strided<[2], offset: 13>>
  %w = memref.subview %r[0] [3] [2] : memref<6xf32, strided<[2], offset: 13>> to memref<3xf32, strided<[4], offset: 13>>
  memref.copy %w, %y : memref<3xf32, strided<[4], offset: 13>> to memref<3xf32>
  return
}
func.func @nest(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    %s = memref.subview %x[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    affine.for %j = 0 to 8 {
      %a = affine.load %s[%j] : memref<8xf32, strided<[1], offset: ?>>
      affine.store %a, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}
