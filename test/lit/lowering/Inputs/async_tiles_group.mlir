// Hand-written async pipeline in a loop: per tile, two loads (memref.copy of
// subviews), an add that depends on both and a write-back, each an
// async.execute; every write-back joins a group awaited after the loop.
func.func @tiles(%X: memref<128x64xf32>, %Y: memref<128x64xf32>, %Z: memref<128x64xf32>) {
  %c4 = arith.constant 4 : index
  %g = async.create_group %c4 : !async.group
  affine.for %i = 0 to 128 step 32 {
    %xa = memref.alloc() : memref<32x64xf32, 2>
    %ya = memref.alloc() : memref<32x64xf32, 2>
    %za = memref.alloc() : memref<32x64xf32, 2>
    %xs = memref.subview %X[%i, 0] [32, 64] [1, 1] : memref<128x64xf32> to memref<32x64xf32, strided<[64, 1], offset: ?>>
    %ys = memref.subview %Y[%i, 0] [32, 64] [1, 1] : memref<128x64xf32> to memref<32x64xf32, strided<[64, 1], offset: ?>>
    %zs = memref.subview %Z[%i, 0] [32, 64] [1, 1] : memref<128x64xf32> to memref<32x64xf32, strided<[64, 1], offset: ?>>
    %t0 = async.execute {
      memref.copy %xs, %xa : memref<32x64xf32, strided<[64, 1], offset: ?>> to memref<32x64xf32, 2>
      async.yield
    }
    %t1 = async.execute {
      memref.copy %ys, %ya : memref<32x64xf32, strided<[64, 1], offset: ?>> to memref<32x64xf32, 2>
      async.yield
    }
    %t2 = async.execute [%t0, %t1] {
      linalg.add ins(%xa, %ya : memref<32x64xf32, 2>, memref<32x64xf32, 2>) outs(%za : memref<32x64xf32, 2>)
      async.yield
    }
    %t3 = async.execute [%t2] {
      memref.copy %za, %zs : memref<32x64xf32, 2> to memref<32x64xf32, strided<[64, 1], offset: ?>>
      async.yield
    }
    %k = async.add_to_group %t3, %g : !async.token
  }
  async.await_all %g
  return
}
