func.func @f() {
  %c = arith.constant 1 : i32 : i32
  return
}
