// RUN: nem-opt %s --split-input-file --verify-diagnostics -p nem-verify
// Region types in IR from MLIR, which no front end parsed: the static
// verifier checks what the .nem grammar and the builder enforce (these used
// to crash it with an internal error).

// RULE: TYPE-01
builtin.module {
  "nem.program"() ({
    %0 = arith.constant 64 : index
    %B = "nem.buffer"(%0) <{name = "B"}> : (index) -> !nem.buffer<#nem.level<L2>>
    %1 = arith.constant 0 : index
    %2 = arith.constant 16 : index
    %s = arith.constant 2 : index
    // expected-error@+1 {{region 'R' has element type f80, which is not a NEM element type [TYPE-01]}}
    %R = "nem.region"(%B, %1, %2, %s) <{name = "R", binding = "decl", operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}> : (!nem.buffer<#nem.level<L2>>, index, index, index) -> !nem.region<#nem.level<L2>, f80, array<i64: 2>, "A", none, none>
  }) : () -> ()
}

// -----
// RULE: GRAM-08
// A typed region without a shape (a transfer between two of them).
builtin.module {
  "nem.program"() ({
    %0 = arith.constant 64 : index
    %B = "nem.buffer"(%0) <{name = "B"}> : (index) -> !nem.buffer<#nem.level<L2>>
    %1 = arith.constant 0 : index
    %2 = arith.constant 8 : index
    // expected-error@+1 {{region 'R' has an element type but not a shape and exactly one of layout and strides [GRAM-08]}}
    %R = "nem.region"(%B, %1, %2) <{name = "R", binding = "decl", operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (!nem.buffer<#nem.level<L2>>, index, index) -> !nem.region<#nem.level<L2>, f16, none, none, none, none>
    %3 = arith.constant 16 : index
    %4 = arith.constant 4 : index
    %S = "nem.region"(%B, %3, %2, %4) <{name = "S", binding = "decl", operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}> : (!nem.buffer<#nem.level<L2>>, index, index, index) -> !nem.region<#nem.level<L2>, f16, array<i64: 4>, "C", none, none>
    %t = "nem.transfer"(%S, %R) <{token = "t", operandSegmentSizes = array<i32: 1, 1, 0>}> : (!nem.region<#nem.level<L2>, f16, array<i64: 4>, "C", none, none>, !nem.region<#nem.level<L2>, f16, none, none, none, none>) -> !nem.token
  }) : () -> ()
}

// -----
// RULE: GRAM-08
// A typed region with both a layout and strides.
builtin.module {
  "nem.program"() ({
    %0 = arith.constant 64 : index
    %B = "nem.buffer"(%0) <{name = "B"}> : (index) -> !nem.buffer<#nem.level<L2>>
    %1 = arith.constant 0 : index
    %2 = arith.constant 8 : index
    %4 = arith.constant 4 : index
    %5 = arith.constant 1 : index
    // expected-error@+1 {{[GRAM-08]}}
    %R = "nem.region"(%B, %1, %2, %4, %5) <{name = "R", binding = "decl", operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}> : (!nem.buffer<#nem.level<L2>>, index, index, index, index) -> !nem.region<#nem.level<L2>, f16, array<i64: 4>, "C", array<i64: 1>, none>
  }) : () -> ()
}
