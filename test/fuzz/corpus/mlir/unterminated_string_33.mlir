func.func @f() {
  "x"() {a = "abcdefghijklmnopqrstuvwxyz\\\\\\
