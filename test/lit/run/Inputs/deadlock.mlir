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
    "nem.wait"(%t1) : (!nem.token) -> ()
    %t2 = "nem.transfer"(%R, %S) <{token = "t2", operandSegmentSizes = array<i32: 1, 1, 0>}> : (!nem.region<#nem.level<L2>, none, none, none, none, none>, !nem.region<#nem.level<L2>, none, none, none, none, none>) -> !nem.token
  }) : () -> ()
}
