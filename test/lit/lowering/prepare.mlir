// The passes that prepare a function for convert-affine-to-nem, each on its
// own MLIR output (issue 36, step 1; lower-to-nem runs them before the
// conversion, convert-affine-to-nem alone runs them itself, D-LOW-SCF).
//
// nem-raise-scf-for: a constant-step scf.for over index becomes an
// affine.for, its constant bounds folded into the maps, a bound value a
// symbol (D-LOW-SCF), naming the op it replaced (`nem_lowering.replaces`, the
// name diagnostics give); an scf.for over i32 is left for the conversion to reject.
// RUN: nem-opt %s -p nem-raise-scf-for | filecheck %s --check-prefix=RAISE
// RAISE-LABEL: func.func @main(
// RAISE: %dead = arith.constant 99999999999999999999999 : i128
// RAISE: affine.for %i = 0 to 8 step 2 {
// RAISE-NEXT: %v = memref.load %x[%i] : memref<8xf32>
// RAISE-NEXT: memref.store %v, %x[%i] : memref<8xf32>
// RAISE-NEXT: } {nem_lowering.replaces = "scf.for"}
// RAISE-NOT: scf.for %
// RAISE-LABEL: func.func private @sym(
// RAISE: affine.for %i = 0 to %n {
// RAISE-LABEL: func.func private @narrow(
// RAISE: scf.for %i = %c0 to %c8 step %c1 : i32 {
//
// nem-drop-dead-arith: the entry's unused arith ops go (a chain of them in
// one walk), other functions keep theirs (D-LOW-DEAD-ARITH).
// RUN: nem-opt %s -p nem-drop-dead-arith | filecheck %s --check-prefix=DROP
// DROP-LABEL: func.func @main(
// DROP-NOT: %dead
// DROP: scf.for %i = %c0 to %c8 step %c2 {
// DROP-LABEL: func.func private @big(
// DROP: %unused = arith.addi
//
// nem-check-input-ranges: the out-of-range constant of a dead op is gone
// once nem-drop-dead-arith has run, the IR unchanged; a live one is a
// located error (D-INT-RANGE).
// RUN: nem-opt %s -p nem-drop-dead-arith,nem-check-input-ranges | filecheck %s --check-prefix=RANGE
// RANGE-LABEL: func.func @main(
// RANGE-NEXT: %c0 = arith.constant 0 : index
// RUN: not nem-opt %s -p nem-check-input-ranges 2>&1 | filecheck %s --check-prefix=DEAD
// DEAD: prepare.mlir:55:3: error: cannot lower 'arith.constant': value = 99999999999999999999999 is outside NEM's 64-bit integers (D-INT-RANGE)
// RUN: not nem-opt %s -p 'nem-drop-dead-arith{entry=big},nem-check-input-ranges{entry=big}' 2>&1 | filecheck %s --check-prefix=BIG
// BIG: prepare.mlir:86:3: error: cannot lower 'memref.alloc': memref<4611686018427387904xi8> is larger than NEM's 64-bit sizes (D-INT-RANGE)
// BIG-NEXT: %m = memref.alloc() : memref<4611686018427387904xi8>
// BIG: fix: use smaller shapes
// RUN: not nem-opt %s -p 'nem-check-input-ranges{entry=none}' 2>&1 | filecheck %s --check-prefix=ENTRY
// ENTRY: error: cannot lower 'func.func': no func.func @none (option entry)
//
// convert-affine-to-nem alone prepares its input as lower-to-nem does.
// RUN: nem-opt %s -p convert-affine-to-nem -t nem | filecheck %s --check-prefix=CONVERT
// CONVERT: program main:
// CONVERT: compute{{[0-9]+}} = compute.async

func.func @main(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c2 = arith.constant 2 : index
  %dead = arith.constant 99999999999999999999999 : i128
  scf.for %i = %c0 to %c8 step %c2 {
    %v = memref.load %x[%i] : memref<8xf32>
    memref.store %v, %x[%i] : memref<8xf32>
  }
  return
}

func.func private @sym(%x: memref<8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<8xf32>
    memref.store %v, %x[%i] : memref<8xf32>
  }
  return
}

func.func private @narrow(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %c8 step %c1 : i32 {
    %j = arith.index_cast %i : i32 to index
    %v = memref.load %x[%j] : memref<8xf32>
    memref.store %v, %x[%j] : memref<8xf32>
  }
  return
}

func.func private @big(%x: memref<8xi8>, %k: index) -> index {
  %m = memref.alloc() : memref<4611686018427387904xi8>
  %unused = arith.addi %k, %k : index
  return %k : index
}
