// nem-check-task-control-flow (D-LOW-TASK-CF): an scf, cf, affine.if or
// affine.parallel op where the conversion lowers ops one by one (the entry
// function's block, a NEM loop's body, a scope's body, a re-rolled loop's last
// iteration) is rejected with the conversion's text at that op, the first in
// program order; inside a compute loop nest it stays (its kernel runs it).
// lower-to-nem reports them the same (rejections.mlir, scf_for.test);
// what the pass leaves: task_control_flow.mlir.
// RUN: nem-opt %s --split-input-file --verify-diagnostics -p nem-check-task-control-flow

func.func @if_at_top(%A: memref<64xf32>, %B: memref<64xf32>) {
  %c = arith.constant true
  // expected-error@+1 {{cannot lower 'scf.if': control flow other than affine.for is not supported at task level}}
  scf.if %c {
    memref.copy %A, %B : memref<64xf32> to memref<64xf32>
  }
  // the first in program order only
  cf.assert %c, "never"
  return
}

// -----

// in a NEM loop (it moves data): the first op of the body that is one
func.func @in_a_nem_loop(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %i = 0 to 4 {
    memref.copy %A, %B : memref<64xf32> to memref<64xf32>
    // expected-error@+1 {{cannot lower 'affine.if': control flow other than affine.for is not supported at task level}}
    affine.if affine_set<(d0) : (d0 - 2 >= 0)>(%i) {
      memref.copy %B, %A : memref<64xf32> to memref<64xf32>
    }
  }
  return
}

// -----

// an scf.for nem-raise-scf-for left says why (D-LOW-SCF)
func.func @scf_for_i32(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %c1 = arith.constant 1 : i32
  // expected-error@+1 {{cannot lower 'scf.for': scf.for is not supported here: its induction variable is i32, not index; a NEM loop needs an index variable and a constant positive step (D-LOW-SCF)}}
  scf.for %i = %c0 to %c8 step %c1 : i32 {
    %j = arith.index_cast %i : i32 to index
    %v = memref.load %x[%j] : memref<8xf32>
    memref.store %v, %x[%j] : memref<8xf32>
  }
  return
}

// -----

// in a scope (an async.execute nem-inline-async-executes inlined)
func.func @in_a_scope(%A: memref<64xf32>, %B: memref<64xf32>) {
  "nem_lowering.scope"() ({
    memref.copy %A, %B : memref<64xf32> to memref<64xf32>
    %t = arith.constant true
    // expected-error@+1 {{cannot lower 'cf.assert': control flow other than affine.for is not supported at task level}}
    cf.assert %t, "never"
    "nem_lowering.yield"() : () -> ()
  }) : () -> ()
  return
}

// -----

// an scf.execute_region that is not a re-rolled loop's last iteration
func.func @execute_region(%A: memref<64xf32>, %B: memref<64xf32>) {
  // expected-error@+1 {{cannot lower 'scf.execute_region': control flow other than affine.for is not supported at task level}}
  scf.execute_region {
    memref.copy %A, %B : memref<64xf32> to memref<64xf32>
    scf.yield
  }
  return
}

// -----

// a re-rolled loop's last iteration is lowered with the loop: a failure there
// is the loop's peeling's, at the iteration's first op (D-LOW-PIPE)
func.func @last_iteration(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %i = 0 to 3 {
    memref.copy %A, %B : memref<64xf32> to memref<64xf32>
  } {nem.max_in_flight = 2 : i64}
  "scf.execute_region"() ({
    %last = arith.constant 2 : index
    // expected-error@+1 {{cannot lower 'memref.copy': the epilogue of a pipelined loop that differs from its body (its last iteration) is lowered on its own: peeling the last iteration of the loop at}}
    memref.copy %B, %A : memref<64xf32> to memref<64xf32>
    %t = arith.constant true
    scf.if %t {
    }
    scf.yield
  }) {nem.last_iteration} : () -> ()
  return
}

