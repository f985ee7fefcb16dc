// nem-rewrite-views (D-LOW-VIEW-OP, session 29): a memref.view of the entry
// function becomes a byte view, a nem_lowering.view with `bytes`: its base
// the byte shift (an operand), its shape the result's sizes (a dynamic one,
// printed as i64's minimum, an operand: promote's arith.constants), no
// strides (row-major where the conversion lowers it).  Whether the shift is
// a whole number of elements from the source's base is the conversion's
// check, where the base is known: a pipelined tile loop's allocation is two
// slots, the second at byte 26 here.  A view in a pure nest stays.
// RUN: nem-opt %s -p nem-rewrite-views | filecheck %s --check-prefix=VIEW
// VIEW-LABEL: func.func @slots(
// VIEW: %a = memref.alloc() : memref<26xi8, 2 : i64>
// VIEW-NEXT: %v = "nem_lowering.view"(%a, %c0) <{shape = array<i64: 1, 6>, bytes, replaces = "memref.view", base = affine_map<(d0) -> (d0)>}> : (memref<26xi8, 2 : i64>, index) -> memref<1x6xf32, 2 : i64>
// VIEW-LABEL: func.func @promoted(
// VIEW: memref.view %a
// VIEW-LABEL: func.func @nest(
// VIEW: memref.view %a
// RUN: nem-opt %s -p 'nem-rewrite-views{entry=promoted}' | filecheck %s --check-prefix=PVIEW
// PVIEW-LABEL: func.func @promoted(
// PVIEW: %v = "nem_lowering.view"(%a, %c0, %c16, %c48) <{shape = array<i64: -9223372036854775808, -9223372036854775808>, bytes, replaces = "memref.view", base = affine_map<(d0) -> (d0)>}> : (memref<3072xi8, 2 : i64>, index, index, index) -> memref<?x?xf32, 2 : i64>
// PVIEW-NEXT: "nem_lowering.view"(%v, %c16, %c48) <{shape = array<i64: -9223372036854775808, -9223372036854775808>, strides = array<i64: 48, 1>, replaces = "memref.subview"}>
//
// RUN: nem-opt %s -p 'nem-rewrite-views{entry=nest}' | filecheck %s --check-prefix=NEST
// NEST-LABEL: func.func @nest(
// NEST-NEXT: %a = memref.alloc
// NEST-NEXT: %c0 = arith.constant
// NEST-NEXT: affine.for
// NEST-NEXT: memref.view %a
// The nest is one escape-hatch kernel, the view in it, on the whole of a (D-LOW-ESCAPE):
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 entry=nest}' -t nem | filecheck %s --check-prefix=NESTLOW
// NESTLOW: compute1 = compute.async in region(x, 0, 96) elem=f32, shape=[4, 6], layout=MN out region(a, 0, 96) elem=i8, shape=[96], layout=C op="mlir.kernel" kernel={{.*}}memref.view{{.*}}(memref<96xi8>, index) -> memref<4x6xf32>
//
// lower-to-nem: row i of x through the 24 bytes at the allocation's start, then to y;
// with pipeline-tiles, slot 1 starts at byte 26, no multiple of f32's 4 bytes.
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem | filecheck %s --check-prefix=LOWER
// LOWER: buffer a : L1[0] (size=26, align=64)
// LOWER: transfer.sync(dst=region(a, 0, 24) elem=f32, shape=[1, 6]
// LOWER: transfer.sync(dst=region(y, i * 24, 24) elem=f32, shape=[1, 6], layout=MN, src=region(a, 0, 24)
// RUN: not nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 pipeline-tiles=true}' 2>&1 | filecheck %s --check-prefix=PIPE
// PIPE: byte_views.mlir:{{[0-9]+}}:5: error: cannot lower 'memref.view': not supported: memref.view at byte offset 26*Mod(inner=1*i + 0, m=2) + 0 that is not a multiple of the element size (4 bytes) (D-LOW-VIEW)
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 entry=promoted}' -t nem | filecheck %s --check-prefix=PROM
// The pass's output is the conversion's input as it is (printed, parsed again):
// RUN: nem-opt %s -p 'nem-rewrite-views{entry=promoted}' | nem-opt -p 'convert-affine-to-nem{device=npm_pro_x1 entry=promoted}' -t nem | filecheck %s --check-prefix=PROM
// PROM: buffer a : L1[0] (size=3072, align=64)
// PROM: transfer.sync(dst=region(a, 0, 3072) elem=f32, shape=[16, 48], layout=MN, src=region(x, i * 3072, 3072) elem=f32, shape=[16, 48], layout=MN)
func.func @slots(%x: memref<4x6xf32>, %y: memref<4x6xf32>) {
  %c0 = arith.constant 0 : index
  affine.for %i = 0 to 4 {
    %a = memref.alloc() : memref<26xi8, 2>
    %v = memref.view %a[%c0][] : memref<26xi8, 2> to memref<1x6xf32, 2>
    %s = memref.subview %x[%i, 0] [1, 6] [1, 1] : memref<4x6xf32> to memref<1x6xf32, strided<[6, 1], offset: ?>>
    %d = memref.subview %y[%i, 0] [1, 6] [1, 1] : memref<4x6xf32> to memref<1x6xf32, strided<[6, 1], offset: ?>>
    memref.copy %s, %v : memref<1x6xf32, strided<[6, 1], offset: ?>> to memref<1x6xf32, 2>
    memref.copy %v, %d : memref<1x6xf32, 2> to memref<1x6xf32, strided<[6, 1], offset: ?>>
    memref.dealloc %a : memref<26xi8, 2>
  }
  return
}
func.func @promoted(%x: memref<32x48xf32>, %y: memref<16x48xf32, 2>) {
  %a = memref.alloc() : memref<3072xi8, 2>
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c48 = arith.constant 48 : index
  affine.for %i = 0 to 32 step 16 {
    %s = memref.subview %x[%i, 0] [16, 48] [1, 1] : memref<32x48xf32> to memref<16x48xf32, strided<[48, 1], offset: ?>>
    %v = memref.view %a[%c0][%c16, %c48] : memref<3072xi8, 2> to memref<?x?xf32, 2>
    %t = memref.subview %v[0, 0] [%c16, %c48] [1, 1] : memref<?x?xf32, 2> to memref<?x?xf32, strided<[?, 1]>, 2>
    %c = "memref.cast"(%t) : (memref<?x?xf32, strided<[?, 1]>, 2>) -> memref<16x48xf32, strided<[?, 1]>, 2>
    memref.copy %s, %c : memref<16x48xf32, strided<[48, 1], offset: ?>> to memref<16x48xf32, strided<[?, 1]>, 2>
  }
  return
}
func.func @nest(%x: memref<4x6xf32>) {
  %a = memref.alloc() : memref<96xi8>
  %c0 = arith.constant 0 : index
  affine.for %i = 0 to 4 {
    %v = memref.view %a[%c0][] : memref<96xi8> to memref<4x6xf32>
    affine.for %j = 0 to 6 {
      %e = affine.load %x[%i, %j] : memref<4x6xf32>
      affine.store %e, %v[%i, %j] : memref<4x6xf32>
    }
  }
  return
}
