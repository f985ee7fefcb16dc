// Hand-written async pipelines that a random sweep
// (test/unit/test_lowering_async_sweep.py) once lowered to racy NEM: the
// lowered program must pass nem-verify and give the same memory under every
// random schedule, with no race (D-LOW-ASYNC).
// RUN: nem-opt %s --split-input-file -p 'lower-to-nem{device=npm_pro_x1}' -t nem -o %t.nem
// RUN: nem-opt --split-input-file -f nem %t.nem -p nem-verify -o /dev/null 2>&1 | filecheck %s --check-prefix=VERIFY --allow-empty
// VERIFY-NOT: error
// RUN: csplit -s -z -f %t.part %t.nem '/^# -----/' '{*}'
// RUN: nem-run %t.part00 --random-inputs 1 --schedules 12 > %t.run
// RUN: nem-run %t.part01 --random-inputs 1 --schedules 12 >> %t.run
// RUN: nem-run %t.part02 --random-inputs 1 --schedules 12 >> %t.run
// RUN: filecheck %s < %t.run

// Two executes, each a fused relu(x + y) nest raised through a scratch buffer:
// one scratch buffer per execute (they run concurrently).
// CHECK: races: 0 distinct (over 12 schedules)
// CHECK-NEXT: final memory: identical across all schedules
func.func @fused(%X: memref<32xf32>, %Y: memref<32xf32>, %Z: memref<32xf32>) {
  %zero = arith.constant 0.0 : f32
  %t0 = async.execute {
    affine.for %i = 0 to 16 {
      %x = affine.load %X[%i] : memref<32xf32>
      %y = affine.load %Y[%i] : memref<32xf32>
      %s = arith.addf %x, %y : f32
      %r = arith.maximumf %s, %zero : f32
      affine.store %r, %Z[%i] : memref<32xf32>
    }
    async.yield
  }
  %t1 = async.execute {
    affine.for %i = 16 to 32 {
      %x = affine.load %X[%i] : memref<32xf32>
      %y = affine.load %Y[%i] : memref<32xf32>
      %s = arith.addf %x, %y : f32
      %r = arith.maximumf %s, %zero : f32
      affine.store %r, %Z[%i] : memref<32xf32>
    }
    async.yield
  }
  async.await %t0 : !async.token
  async.await %t1 : !async.token
  return
}

// -----
// A loop-carried token whose initial value is an execute doing a DMA: the
// execute is awaited before the loop (the first iteration depends on it).
// CHECK: races: 0 distinct (over 12 schedules)
// CHECK-NEXT: final memory: identical across all schedules
func.func @carried(%X: memref<128xf32>, %Y: memref<32xf32>, %Z: memref<128xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %yb = memref.alloc() : memref<32xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  %ty = async.execute {
    affine.dma_start %Y[%c0], %yb[%c0], %tag[0], %c32 : memref<32xf32>, memref<32xf32, 2>, memref<1xi32>
    affine.dma_wait %tag[0], %c32 : memref<1xi32>
    async.yield
  }
  %last = affine.for %i = 0 to 128 step 32 iter_args(%prev = %ty) -> (!async.token) {
    %xs = memref.subview %X[%i] [32] [1] : memref<128xf32> to memref<32xf32, strided<[1], offset: ?>>
    %zs = memref.subview %Z[%i] [32] [1] : memref<128xf32> to memref<32xf32, strided<[1], offset: ?>>
    %t = async.execute [%prev] {
      linalg.add ins(%xs, %yb : memref<32xf32, strided<[1], offset: ?>>, memref<32xf32, 2>) outs(%zs : memref<32xf32, strided<[1], offset: ?>>)
      async.yield
    }
    affine.yield %t : !async.token
  }
  async.await %last : !async.token
  return
}

// -----
// Independent executes writing column tiles of one buffer: their strided
// extents overlap under NEM's hazard rule (D-HAZ-ACCESS), so the second
// execute depends on the first.
// CHECK: races: 0 distinct (over 12 schedules)
// CHECK-NEXT: final memory: identical across all schedules
func.func @cols(%X: memref<8x32xf32>, %Z: memref<8x32xf32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c32 = arith.constant 32 : index
  %c128 = arith.constant 128 : index
  %a = memref.alloc() : memref<8x16xf32, 2>
  %b = memref.alloc() : memref<8x16xf32, 2>
  %tag = memref.alloc() : memref<4xi32>
  %t0 = async.execute {
    affine.dma_start %X[%c0, %c0], %a[%c0, %c0], %tag[0], %c128, %c32, %c16 : memref<8x32xf32>, memref<8x16xf32, 2>, memref<4xi32>
    affine.dma_wait %tag[0], %c128 : memref<4xi32>
    affine.dma_start %a[%c0, %c0], %Z[%c0, %c0], %tag[1], %c128, %c32, %c16 : memref<8x16xf32, 2>, memref<8x32xf32>, memref<4xi32>
    affine.dma_wait %tag[1], %c128 : memref<4xi32>
    async.yield
  }
  %t1 = async.execute {
    affine.dma_start %X[%c0, %c16], %b[%c0, %c0], %tag[2], %c128, %c32, %c16 : memref<8x32xf32>, memref<8x16xf32, 2>, memref<4xi32>
    affine.dma_wait %tag[2], %c128 : memref<4xi32>
    affine.dma_start %b[%c0, %c0], %Z[%c0, %c16], %tag[3], %c128, %c32, %c16 : memref<8x16xf32, 2>, memref<8x32xf32>, memref<4xi32>
    affine.dma_wait %tag[3], %c128 : memref<4xi32>
    async.yield
  }
  async.await %t0 : !async.token
  async.await %t1 : !async.token
  return
}
