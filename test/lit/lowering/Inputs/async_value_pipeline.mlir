// Hand-written async.execute pipeline passing memrefs as !async.value
// (D-LOW-ASYNC-VALUE), valid upstream MLIR (mlir-opt accepts it):
//   %va: a buffer allocated inside the producing execute's body,
//   %vb: a buffer defined outside the execute,
//   %vs: a subview (rows 64..127 of %o) yielded by the consumer execute,
// consumed as body operands (`%va as %a2`) and through async.await.
// Z = X + Y, through the lower half of %o.
func.func @async_value(%X: memref<64x64xf32>, %Y: memref<64x64xf32>, %Z: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %n = arith.constant 4096 : index
  %tag = memref.alloc() : memref<3xi32>
  %b = memref.alloc() : memref<64x64xf32, 2>
  %o = memref.alloc() : memref<128x64xf32, 2>
  %t0, %va = async.execute -> !async.value<memref<64x64xf32, 2>> {
    %a = memref.alloc() : memref<64x64xf32, 2>
    affine.dma_start %X[%c0, %c0], %a[%c0, %c0], %tag[0], %n : memref<64x64xf32>, memref<64x64xf32, 2>, memref<3xi32>
    affine.dma_wait %tag[0], %n : memref<3xi32>
    async.yield %a : memref<64x64xf32, 2>
  }
  %t1, %vb = async.execute -> !async.value<memref<64x64xf32, 2>> {
    affine.dma_start %Y[%c0, %c0], %b[%c0, %c0], %tag[1], %n : memref<64x64xf32>, memref<64x64xf32, 2>, memref<3xi32>
    affine.dma_wait %tag[1], %n : memref<3xi32>
    async.yield %b : memref<64x64xf32, 2>
  }
  %t2, %vs = async.execute (%va as %a2: !async.value<memref<64x64xf32, 2>>, %vb as %b2: !async.value<memref<64x64xf32, 2>>) -> !async.value<memref<64x64xf32, strided<[64, 1], offset: 4096>, 2>> {
    %s = memref.subview %o[64, 0] [64, 64] [1, 1] : memref<128x64xf32, 2> to memref<64x64xf32, strided<[64, 1], offset: 4096>, 2>
    affine.for %i = 0 to 64 {
      affine.for %j = 0 to 64 {
        %u = affine.load %a2[%i, %j] : memref<64x64xf32, 2>
        %v = affine.load %b2[%i, %j] : memref<64x64xf32, 2>
        %w = arith.addf %u, %v : f32
        affine.store %w, %s[%i, %j] : memref<64x64xf32, strided<[64, 1], offset: 4096>, 2>
      }
    }
    async.yield %s : memref<64x64xf32, strided<[64, 1], offset: 4096>, 2>
  }
  %r = async.await %vs : !async.value<memref<64x64xf32, strided<[64, 1], offset: 4096>, 2>>
  affine.dma_start %r[%c0, %c0], %Z[%c0, %c0], %tag[2], %n : memref<64x64xf32, strided<[64, 1], offset: 4096>, 2>, memref<64x64xf32>, memref<3xi32>
  affine.dma_wait %tag[2], %n : memref<3xi32>
  return
}
