// RUN: not nem-opt %s -p nem-verify 2>&1 | filecheck %s
// RUN: not nem-opt %s -t nem 2>&1 | filecheck %s
// A device directive in generic MLIR needs both its form (device_kind) and
// its operand (device); one without the other is rejected when the program
// op verifies, not an internal error wh