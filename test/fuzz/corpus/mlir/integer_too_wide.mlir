func.func @f() {
  %c = arith.constant 99999999999999999999999 : i32
  return
}
