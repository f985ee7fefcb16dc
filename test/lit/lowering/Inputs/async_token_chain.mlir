// Hand-written: a token carried across iterations (iter_args); each
// iteration's execute depends on the previous one, the result is awaited.
func.func @chain(%X: memref<128xf32>, %Z: memref<128xf32>) {
  %t0 = async.execute {
    async.yield
  }
  %last = affine.for %i = 0 to 128 step 32 iter_args(%prev = %t0) -> (!async.token) {
    %xa = memref.alloc() : memref<32xf32, 2>
    %xs = memref.subview %X[%i] [32] [1] : memref<128xf32> to memref<32xf32, strided<[1], offset: ?>>
    %zs = memref.subview %Z[%i] [32] [1] : memref<128xf32> to memref<32xf32, strided<[1], offset: ?>>
    %t = async.execute [%prev] {
      memref.copy %xs, %xa : memref<32xf32, strided<[1], offset: ?>> to memref<32xf32, 2>
      memref.copy %xa, %zs : memref<32xf32, 2> to memref<32xf32, strided<[1], offset: ?>>
      async.yield
    }
    affine.yield %t : !async.token
  }
  async.await %last : !async.token
  return
}
