func.func @f(%a: i32) -> i64 {
  // expected-error-re@+1 {{{{.*}}{{i32|i64}}{{.*}}}}
  return %a : i32
}
