// RUN: nem-opt %s --split-input-file --verify-diagnostics -p nem-check-tokens
// RULE: TASK-03
// Hand-written IR can wait on a task that depends on a task issued after the
// wait: the wait blocks that task's issue forever (decision D-TOK-DEADLOCK).
builtin.module {
  "nem.program"() ({
    %0 = arith.constant 64 : index
    %B = "nem.buffer"(%0) <{name = "B"}> : (index) -> !nem.buffer<#nem.level<L2>>
    %1 = arith.constant 0 : index
    %2 = arith.constant 4 : index
    %R = "nem.region"(%B, %1, %2) <{name = "R", binding = "decl", operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (!nem.buffer<#nem.level<L2>>, index, index) -> !nem.region<#nem.level<L2>, none, none, none, none, none>
    %3 = arith.constant 8 : index
    %4 = arith.constant 4 : index
    %S = "nem.region"(%B, %3, %4) <{name = "S", binding = "decl", operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (!nem.buffer<#nem.level<L2>>, index, index) -> !nem.region<#nem.level<L2>, none, none, none, none, none>
    %t1 = "nem.transfer"(%S, %R, %t2) <{token = "t1", operandSegmentSizes = array<i32: 1, 1, 1>}> : (!nem.region<#nem.level<L2>, none, none, none, none, none>, !nem.region<#nem.level<L2>, none, none, none, none, none>, !nem.token) -> !nem.token
    // expected-error@+1 {{deadlock: this wait waits for t1 (transfer.async), which can only become ready after t2 (transfer.async), a task issued after this statement [TASK-03]}}
    "nem.wait"(%t1) : (!nem.token) -> ()
    // expected-note@+1 {{t2 (transfer.async) is issued here}}
    %t2 = "nem.transfer"(%R, %S) <{token = "t2", operandSegmentSizes = array<i32: 1, 1, 0>}> : (!nem.region<#nem.level<L2>, none, none, none, none, none>, !nem.region<#nem.level<L2>, none, none, none, none, none>) -> !nem.token
  }) : () -> ()
}

// -----
// The wait is before the awaited task itself: no "t1, which can only become
// ready after t1" (the message names the late task once).
builtin.module {
  "nem.program"() ({
    %0 = arith.constant 64 : index
    %B = "nem.buffer"(%0) <{name = "B"}> : (index) -> !nem.buffer<#nem.level<L2>>
    %1 = arith.constant 0 : index
    %2 = arith.constant 4 : index
    %R = "nem.region"(%B, %1, %2) <{name = "R", binding = "decl", operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (!nem.buffer<#nem.level<L2>>, index, index) -> !nem.region<#nem.level<L2>, none, none, none, none, none>
    %3 = arith.constant 8 : index
    %4 = arith.constant 4 : index
    %S = "nem.region"(%B, %3, %4) <{name = "S", binding = "decl", operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (!nem.buffer<#nem.level<L2>>, index, index) -> !nem.region<#nem.level<L2>, none, none, none, none, none>
    // expected-error@+1 {{deadlock: this wait waits for t1 (transfer.async), a task issued after this statement [TASK-03]}}
    "nem.wait"(%t1) : (!nem.token) -> ()
    // expected-note@+1 {{t1 (transfer.async) is issued here}}
    %t1 = "nem.transfer"(%S, %R) <{token = "t1", operandSegmentSizes = array<i32: 1, 1, 0>}> : (!nem.region<#nem.level<L2>, none, none, none, none, none>, !nem.region<#nem.level<L2>, none, none, none, none, none>) -> !nem.token
  }) : () -> ()
}
