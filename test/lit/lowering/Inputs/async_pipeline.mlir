// Hand-written async.execute pipeline: two independent DMA loads, a compute
// that depends on both, and a write-back that depends on the compute.
func.func @async_add(%X: memref<64x64xf32>, %Y: memref<64x64xf32>, %Z: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %n = arith.constant 4096 : index
  %a = memref.alloc() : memref<64x64xf32, 2>
  %b = memref.alloc() : memref<64x64xf32, 2>
  %o = memref.alloc() : memref<64x64xf32, 2>
  %tag = memref.alloc() : memref<3xi32>
  %t0 = async.execute {
    affine.dma_start %X[%c0, %c0], %a[%c0, %c0], %tag[0], %n : memref<64x64xf32>, memref<64x64xf32, 2>, memref<3xi32>
    affine.dma_wait %tag[0], %n : memref<3xi32>
    async.yield
  }
  %t1 = async.execute {
    affine.dma_start %Y[%c0, %c0], %b[%c0, %c0], %tag[1], %n : memref<64x64xf32>, memref<64x64xf32, 2>, memref<3xi32>
    affine.dma_wait %tag[1], %n : memref<3xi32>
    async.yield
  }
  %t2 = async.execute [%t0, %t1] {
    affine.for %i = 0 to 64 {
      affine.for %j = 0 to 64 {
        %u = affine.load %a[%i, %j] : memref<64x64xf32, 2>
        %v = affine.load %b[%i, %j] : memref<64x64xf32, 2>
        %w = arith.addf %u, %v : f32
        affine.store %w, %o[%i, %j] : memref<64x64xf32, 2>
      }
    }
    async.yield
  }
  %t3 = async.execute [%t2] {
    affine.dma_start %o[%c0, %c0], %Z[%c0, %c0], %tag[2], %n : memref<64x64xf32, 2>, memref<64x64xf32>, memref<3xi32>
    affine.dma_wait %tag[2], %n : memref<3xi32>
    async.yield
  }
  async.await %t3 : !async.token
  return
}
