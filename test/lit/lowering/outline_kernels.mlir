// nem-outline-kernels (D-LOW-OUTLINE): a loop nest or linalg op that escapes on every target, at the
// top level or in a loop the conversion keeps as a NEM loop (the index values it takes from around it
// are its index operands), becomes a `nem_lowering.kernel` holding its func.func @kernel, with the
// remark's `what` and `why`; one whose decision needs the conversion (a view's box, a loop peeled per
// copy, an index value the pass does not evaluate) is left to it. Lowering either prints the same .nem.
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

// -----

// A nest in a tile loop (D-LOW-TILES): the loop variable is its index operand.
// CHECK-LABEL: func.func @tiled(
// CHECK:      affine.for %t = 0 to 32 step 8 {
// CHECK-NEXT:   "nem_lowering.kernel"(%A, %B, %t) <{what = "loop nest at {{[0-9]+}}:5", why = "a strided or skewed access", operandSegmentSizes = array<i32: 1, 1, 1>}> ({
// CHECK-NEXT:     func.func @kernel(%0: memref<32xf32>, %1: memref<32xf32>, %2: index) {
// CHECK-NEXT:       affine.for %i = 0 to 8 {
// CHECK-NEXT:         %a = affine.load %0[%2 * -1 + 31 + %i * -1] : memref<32xf32>
// CHECK-NEXT:         affine.store %a, %1[%2 + %i] : memref<32xf32>
func.func @tiled(%A: memref<32xf32>, %B: memref<32xf32>) {
  affine.for %t = 0 to 32 step 8 {
    affine.for %i = 0 to 8 {
      %a = affine.load %A[31 - %t - %i] : memref<32xf32>
      affine.store %a, %B[%t + %i] : memref<32xf32>
    }
  }
  return
}

// -----

// An offset computed in the tile loop (affine.apply) is an index operand too.
// CHECK-LABEL: func.func @offset(
// CHECK:      %o = affine.apply
// CHECK-NEXT: "nem_lowering.kernel"(%A, %B, %o) <{what = "loop nest at {{[0-9]+}}:5", why = "a strided or skewed access", operandSegmentSizes = array<i32: 1, 1, 1>}> ({
func.func @offset(%A: memref<32xf32>, %B: memref<32xf32>) {
  affine.for %t = 0 to 4 {
    %o = affine.apply affine_map<(d0) -> (d0 * 8)>(%t)
    affine.for %i = 0 to 8 {
      %a = affine.load %A[31 - %o - %i] : memref<32xf32>
      affine.store %a, %B[%o + %i] : memref<32xf32>
    }
  }
  return
}

// -----

// An index value the pass does not evaluate (arith on index): left to the conversion.
// CHECK-LABEL: func.func @unevaluated(
// CHECK-NOT:  nem_lowering.kernel
// CHECK:      affine.for %i = 0 to 8 {
func.func @unevaluated(%A: memref<32xf32>, %B: memref<32xf32>) {
  affine.for %t = 0 to 32 step 8 {
    %o = arith.addi %t, %t : index
    affine.for %i = 0 to 8 {
      %a = affine.load %A[31 - %i] : memref<32xf32>
      affine.store %a, %B[%o + %i - %t] : memref<32xf32>
    }
  }
  return
}

// -----

// A linalg op whose operands are buffers of their own (no view is asked for).
// CHECK-LABEL: func.func @reduction(
// CHECK:      "nem_lowering.kernel"(%A, %S) <{what = "linalg.generic at {{[0-9]+}}:3", why = "a sum over whole axes, not a sliding window{{.*}}", operandSegmentSizes = array<i32: 1, 1, 0>}> ({
// CHECK-NEXT:   func.func @kernel(%0: memref<4x8xf32>, %1: memref<4xf32>) {
// CHECK-NEXT:     linalg.generic
func.func @reduction(%A: memref<4x8xf32>, %S: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%A : memref<4x8xf32>) outs(%S : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %out, %in : f32
    linalg.yield %0 : f32
  }
  return
}
