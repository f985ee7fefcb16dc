// nem-outline-kernels (D-LOW-OUTLINE): a top-level loop nest that escapes on
// every target becomes a `nem_lowering.kernel` holding its func.func @kernel,
// with the remark's `what` and `why`; a nest whose decision needs the
// conversion (a view's box for D-LOW-ALIAS, a loop peeled per copy) is left
// to it. Lowering the outlined ops prints the same .nem as lowering the nests.
// RUN: nem-opt %s --split-input-file -p nem-outline-kernels | filecheck %s
// RUN: nem-opt %s --split-input-file -p 'lower-to-nem{device=npm_pro_x1}' -t nem -o %t.nests.nem
// RUN: nem-opt %s --split-input-file -p nem-outline-kernels | nem-opt --split-input-file -p 'lower-to-nem{device=npm_pro_x1}' -t nem -o %t.kernels.nem
// RUN: diff %t.nests.nem %t.kernels.nem

// CHECK-LABEL: func.func @carried(
// CHECK:      "nem_lowering.kernel"(%C, %D) <{what = "loop nest at 23:3", why = "a value carried out of the loop (iter_args) is stored after it: the task runs the loop and the ops storing its result (D-LOW-CARRIED)", operandSegmentSizes = array<i32: 1, 1, 0>}> ({
// CHECK-NEXT:   func.func @kernel(%0: memref<16xf32>, %1: memref<1xf32>) {
// CHECK-NEXT:     %z_1 = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %r = affine.for %i = 0 to 16 iter_args(%acc = %z_1) -> (f32) {
// CHECK:          affine.store %r, %1[0] : memref<1xf32>
// CHECK-NEXT:     func.return
// CHECK-NEXT:   }
// CHECK-NEXT: }) : (memref<16xf32>, memref<1xf32>) -> ()
// CHECK-NEXT: func.return
func.func @carried(%C: memref<16xf32>, %D: memref<1xf32>) {
  %z = arith.constant 0.0 : f32
  %r = affine.for %i = 0 to 16 iter_args(%acc = %z) -> (f32) {
    %a = affine.load %C[%i] : memref<16xf32>
    %b = arith.addf %acc, %a : f32
    affine.yield %b : f32
  }
  affine.store %r, %D[0] : memref<1xf32>
  return
}

// -----

// CHECK-LABEL: func.func @reversed(
// CHECK:      "nem_lowering.kernel"(%A, %B) <{what = "loop nest at 38:3", why = "a strided or skewed access", operandSegmentSizes = array<i32: 1, 1, 0>}> ({
// CHECK:          affine.load %0[%i * -1 + 15] : memref<16xf32>
func.func @reversed(%A: memref<16xf32>, %B: memref<16xf32>) {
  affine.for %i = 0 to 16 {
    %a = affine.load %A[15 - %i] : memref<16xf32>
    affine.store %a, %B[%i] : memref<16xf32>
  }
  return
}

// -----

// A copy within one buffer: which buffer a memref is, is the MLIR's (MemrefRoots).
// CHECK-LABEL: func.func @aliasing(
// It reads no memref it does not write: its first out is an in too, the kernel's first argument.
// CHECK:      "nem_lowering.kernel"(%A, %A) <{what = "loop nest at 56:3", why = "a copy within one buffer", operandSegmentSizes = array<i32: 1, 1, 0>}> ({
// CHECK-NEXT:   func.func @kernel(%0: memref<17xf32>, %1: memref<17xf32>) {
// CHECK-NEXT:     affine.for %i = 0 to 16 {
// CHECK-NEXT:       %a = affine.load %0[%i] : memref<17xf32>
// CHECK-NEXT:       affine.store %a, %0[%i + 1] : memref<17xf32>
func.func @aliasing(%A: memref<17xf32>) {
  affine.for %i = 0 to 16 {
    %a = affine.load %A[%i] : memref<17xf32>
    affine.store %a, %A[%i + 1] : memref<17xf32>
  }
  return
}

// -----

// Overlapping boxes of one buffer (D-LOW-ALIAS): the boxes are the conversion's views.
// CHECK-LABEL: func.func @overlap(
// CHECK-NOT:  nem_lowering.kernel
// CHECK:      affine.for %i = 0 to 16 {
func.func @overlap(%A: memref<17xf32>) {
  affine.for %i = 0 to 16 {
    %a = affine.load %A[%i] : memref<17xf32>
    %b = arith.mulf %a, %a : f32
    affine.store %b, %A[%i + 1] : memref<17xf32>
  }
  return
}

// -----

// A nest in a tile loop whose last tile is partial is decided once per copy (D-LOW-PEEL).
// CHECK-LABEL: func.func @peeled(
// CHECK-NOT:  nem_lowering.kernel
// CHECK:      affine.for %t = 0 to 10 step 4 {
// CHECK-NEXT:   affine.for %i
func.func @peeled(%A: memref<10xf32>, %B: memref<10xf32>) {
  affine.for %t = 0 to 10 step 4 {
    affine.for %i = affine_map<(d0) -> (d0)>(%t) to min affine_map<(d0) -> (d0 + 4, 10)>(%t) {
      %a = affine.load %A[9 - %i] : memref<10xf32>
      affine.store %a, %B[%i] : memref<10xf32>
    }
  }
  return
}
