// RUN: not nem-opt %s 2>&1 | filecheck %s
// RULE: LOOP-03
// The nem.loop op verifier rejects @max_in_flight(N < 1) in IR from any
// producer (here generic MLIR), with the rule of semantics.window_error.
// CHECK: loop03_op_verifier.mlir:10:5: error: invalid MLIR: 'nem.loop': @max_in_flight(0) must be at least 1 [LOOP-03]
builtin.module {
  "nem.program"() <{sym_name = "p"}> ({
    %0 = arith.constant 0 : index
    %1 = arith.constant 3 : index
    "nem.loop"(%0, %1) <{iv_name = "i", decorators = [#nem.max_in_flight<#builtin.int<0>>]}> ({
    ^bb0(%i: index):
    }) : (index, index) -> ()
  }) : () -> ()
}
