func.func @f() {
  %t = async.execute [%t] {
    async.yield
  }
  return
}
