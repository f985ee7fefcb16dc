func.func @f() {
  %a = arith.addi %a, %a : index
  return
}
