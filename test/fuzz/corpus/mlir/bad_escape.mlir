func.func @f() attributes {a = "abc\qdef"} {
  return
}
