// nem-check-task-control-flow (D-LOW-TASK-CF) changes nothing: it leaves
// what the conversion never lowers op by op (its errors:
// task_control_flow_errors.mlir): a compute nest's body (its kernel runs
// it), a NEM loop of no iteration, a loop the conversion rejects first (it
// carries a value), a function it rejects first (an index argument), the
// functions it does not lower; and a re-rolled loop's last iteration, which
// the conversion lowers with the loop.
// RUN: nem-opt %s --split-input-file -p nem-check-task-control-flow | filecheck %s
// CHECK-LABEL: func.func @nested
// CHECK: scf.if
// CHECK: affine.for %j = 0 to 0 {
// CHECK-NEXT: memref.copy
// CHECK-NEXT: %t = arith.constant true
// CHECK-NEXT: scf.if
// CHECK: iter_args
// CHECK: scf.if
// CHECK: func.func private @helper
// CHECK: scf.if
func.func @nested(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %i = 0 to 64 {
    %v = affine.load %A[%i] : memref<64xf32>
    %c = arith.cmpf ogt, %v, %v : f32
    scf.if %c {
      affine.store %v, %B[%i] : memref<64xf32>
    }
  }
  affine.for %j = 0 to 0 {
    memref.copy %A, %B : memref<64xf32> to memref<64xf32>
    %t = arith.constant true
    scf.if %t {
    }
  }
  %s = arith.constant 1.0 : f32
  %r = affine.for %k = 0 to 4 iter_args(%acc = %s) -> (f32) {
    memref.copy %A, %B : memref<64xf32> to memref<64xf32>
    %t = arith.constant true
    scf.if %t {
    }
    affine.yield %acc : f32
  }
  return
}

func.func private @helper() {
  %t = arith.constant true
  scf.if %t {
  }
  return
}

// -----

// CHECK-LABEL: func.func @index_argument(%n: index)
// CHECK: scf.if
func.func @index_argument(%n: index) {
  %t = arith.constant true
  scf.if %t {
  }
  return
}

// -----

// a re-rolled loop's last iteration: the conversion lowers it with the loop
// CHECK-LABEL: func.func @last_iteration
// CHECK: } {nem.max_in_flight = 2 : i64}
// CHECK-NEXT: scf.execute_region {
// CHECK: }{nem.last_iteration}
func.func @last_iteration(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %i = 0 to 3 {
    memref.copy %A, %B : memref<64xf32> to memref<64xf32>
  } {nem.max_in_flight = 2 : i64}
  "scf.execute_region"() ({
    %last = arith.constant 2 : index
    memref.copy %B, %A : memref<64xf32> to memref<64xf32>
    scf.yield
  }) {nem.last_iteration} : () -> ()
  return
}
