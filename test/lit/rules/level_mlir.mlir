// RUN: not nem-opt %s -p 'nem-verify{device=npm_lite}' -t nem 2>&1 | filecheck %s
// RUN: sed 's/<L3>/<L2[1]>/g' %s | not nem-opt - 2>&1 | filecheck %s --check-prefix=INDEX
// RULE: GRAM-05
// A memory level in IR from MLIR is checked as the .nem grammar checks it:
// an unknown level is an error, not a buffer printed as invalid .nem.
// CHECK: level_mlir.mlir:12:78: error: cannot parse MLIR: 'L3' is not a memory level (DDR, L2, L1 or L1[k]) [GRAM-05]
// CHECK: fix: use one of DDR, L2, L1, L1[k]
// INDEX: error: cannot parse MLIR: 'L2[1]' is not a memory level: only L1 takes an engine index, L1[k] with k >= 0 [GRAM-05]
builtin.module {
  "nem.program"() <{sym_name = "p"}> ({
    %0 = arith.constant 64 : index
    %B = "nem.buffer"(%0) <{name = "B"}> : (index) -> !nem.buffer<#nem.level<L3>>
  }) : () -> ()
}
