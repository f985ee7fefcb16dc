// nem-fold-index-arith (D-LOW-AFFINE): arith index arithmetic in the loops
// the conversion lowers one by one becomes affine.apply, constants folded
// into the maps and applies composed (as MLIR's affine.apply
// canonicalization); what is not affine here stays for the conversion.
// RUN: nem-opt %s -p 'nem-fold-index-arith{entry=main}' | filecheck %s
// CHECK-LABEL: func.func @main
// CHECK:        affine.for %i = 0 to 4 {
// CHECK-NEXT:     %o0 = affine.apply affine_map<(d0) -> ((d0 * 16))> (%i)
// CHECK-NEXT:     affine.for %j = 0 to 4 {
// CHECK-NEXT:       %o1 = affine.apply affine_map<(d0) -> ((d0 * 4))> (%j)
// CHECK-NEXT:       %o = affine.apply affine_map<(d0, d1) -> (((d0 * 16) + (d1 * 4)))> (%i, %j)
// CHECK-NEXT:       %p = affine.apply affine_map<(d0, d1) -> ((((d0 * 32) + (d1 * 8)) + 3))> (%i, %j)
// Divisions of a non-negative index; floordivsi of any.  The loop of %k
// starts at -2: a signed division of its variable is left.
// CHECK:        affine.for %l = 0 to 8 {
// CHECK-NEXT:     %q = affine.apply affine_map<(d0) -> ((d0 floordiv 4))> (%l)
// CHECK-NEXT:     %r = affine.apply affine_map<(d0) -> ((d0 mod 4))> (%l)
// CHECK-NEXT:     %w = affine.apply affine_map<(d0) -> (((d0 + 2) floordiv 3))> (%l)
// CHECK-NEXT:     %l5 = affine.apply affine_map<(d0) -> ((d0 + -5))> (%l)
// CHECK-NEXT:     %f = affine.apply affine_map<(d0) -> (((d0 + -5) floordiv 2))> (%l)
// An operand of a min (through an apply) is folded too: the peeling decision
// reads arith as it reads applies (session 34; left as written in session 33).
// CHECK-NEXT:     %e = affine.apply affine_map<(d0) -> ((d0 + 4))> (%l)
// CHECK-NEXT:     %e2 = affine.apply affine_map<(d0) -> (((d0 * 2) + 8))> (%l)
// CHECK:          %n = arith.divsi %k, %c4 : index
// A product of two indices, a division by 0 and arith on i32: left; the
// product of the first by a constant takes it as an operand.
// CHECK:          %sq = arith.muli %l, %l : index
// CHECK-NEXT:     %z = arith.divsi %l, %c0 : index
// CHECK-NEXT:     %m = affine.apply affine_map<(d0) -> ((d0 * 4))> (%sq)
// CHECK-NEXT:     %g = arith.addi %fi, %fi : i32
// Only in the loops lowered one by one: the pure nest (a kernel) keeps its arith.
// CHECK:        affine.for %a = 0 to 16 {
// CHECK-NEXT:     %b = arith.addi %a, %c1 : index
// Only the entry's.
// CHECK-LABEL: func.func @other
// CHECK-NEXT:   %c = arith.constant 1 : index
// CHECK-NEXT:   %d = arith.addi %c, %c : index
func.func @main(%x: memref<512xf32>, %y: memref<512xf32>, %fi: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c16 = arith.constant 16 : index
  affine.for %i = 0 to 4 {
    %o0 = arith.muli %i, %c16 : index
    affine.for %j = 0 to 4 {
      %o1 = arith.muli %c4, %j : index
      %o = arith.addi %o0, %o1 : index
      %p = affine.apply affine_map<(d0)[s0] -> (d0 * 2 + s0)>(%o)[%c3]
      %s = memref.subview %x[%p] [4] [1] : memref<512xf32> to memref<4xf32, strided<[1], offset: ?>>
      %t = memref.subview %y[%o] [4] [1] : memref<512xf32> to memref<4xf32, strided<[1], offset: ?>>
      memref.copy %s, %t : memref<4xf32, strided<[1], offset: ?>> to memref<4xf32, strided<[1], offset: ?>>
    }
  }
  affine.for %l = 0 to 8 {
    %q = arith.divsi %l, %c4 : index
    %r = arith.remui %l, %c4 : index
    %w = arith.ceildivsi %l, %c3 : index
    %l5 = arith.subi %l, %c5 : index
    %f = arith.floordivsi %l5, %c2 : index
    %e = arith.addi %l, %c4 : index
    %e2 = affine.apply affine_map<(d0) -> (d0 * 2)>(%e)
    %mn = affine.min affine_map<(d0) -> (100, d0)>(%e2)
    affine.for %k = -2 to 2 {
      %n = arith.divsi %k, %c4 : index
      memref.copy %x, %y : memref<512xf32> to memref<512xf32>
    }
    %sq = arith.muli %l, %l : index
    %z = arith.divsi %l, %c0 : index
    %m = arith.muli %sq, %c4 : index
    %g = arith.addi %fi, %fi : i32
    memref.copy %x, %y : memref<512xf32> to memref<512xf32>
  }
  affine.for %a = 0 to 16 {
    %b = arith.addi %a, %c1 : index
    %v = affine.load %x[%b] : memref<512xf32>
    affine.store %v, %y[%a] : memref<512xf32>
  }
  return
}
func.func @other() -> index {
  %c = arith.constant 1 : index
  %d = arith.addi %c, %c : index
  return %d : index
}
