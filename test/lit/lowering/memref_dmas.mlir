// nem-raise-memref-dmas (D-LOW-DMA): the entry function's memref.dma_start and
// memref.dma_wait become affine.dma_start / affine.dma_wait with identity maps
// (the same indices, the tag before the count, the stride operands kept), each
// naming the op the user wrote, so the conversion's table has one handler for
// each DMA op; other functions keep theirs.
// RUN: nem-opt %s -p nem-raise-memref-dmas | filecheck %s --check-prefix=RAISE
// RAISE-LABEL: func.func @main(
// RAISE: affine.for %i = 0 to 8 {
// RAISE-NEXT: affine.dma_start %x[%i, %c0], %b[%c0, %c0], %tag[%c0], %c16, %c64, %c16 {nem_lowering.replaces = "memref.dma_start"} : memref<8x64xf32>, memref<2x16xf32, 2 : i64>, memref<2xi32>
// RAISE-NEXT: affine.dma_wait %tag[%c0], %c16 {nem_lowering.replaces = "memref.dma_wait"} : memref<2xi32>
// RAISE-NEXT: affine.dma_start %b[%c0, %c0], %y[%i, %c0], %tag[%c1], %c16 {nem_lowering.replaces = "memref.dma_start"}
// RAISE-NEXT: affine.dma_wait %tag[%c1], %c16 {nem_lowering.replaces = "memref.dma_wait"}
// RAISE-LABEL: func.func private @other(
// RAISE-NEXT: %c0 = arith.constant 0 : index
// RAISE-NEXT: memref.dma_wait %tag[%c0], %c0 : memref<1xi32>
//
// lower-to-nem: a strided load of a row's first 16 elements and the store back.
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem | filecheck %s --check-prefix=LOWER
// LOWER: loop i in [0..7]:
// LOWER-NEXT: dma1 = transfer.async(dst=region(b, 0, 64) elem=f32, shape=[16], layout=C, src=region(x, i * 256, 64) elem=f32, shape=[1, 16], layout=MN)
// LOWER-NEXT: dma2 = transfer.async(dst=region(y, i * 256, 64) elem=f32, shape=[16], layout=C, src=region(b, 0, 64) elem=f32, shape=[16], layout=C, deps=[dma1])
// LOWER-NEXT: wait(dma2)
//
// A diagnostic at a raised DMA names the memref op written, at its line.
// RUN: not nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 entry=bad}' 2>&1 | filecheck %s --check-prefix=BAD
// BAD: memref_dmas.mlir:49:5: error: cannot lower 'memref.dma_start': the element count of a DMA must be a constant

func.func @main(%x: memref<8x64xf32>, %y: memref<8x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %b = memref.alloc() : memref<2x16xf32, 2>
  %tag = memref.alloc() : memref<2xi32>
  affine.for %i = 0 to 8 {
    memref.dma_start %x[%i, %c0], %b[%c0, %c0], %c16, %tag[%c0], %c64, %c16 : memref<8x64xf32>, memref<2x16xf32, 2>, memref<2xi32>
    memref.dma_wait %tag[%c0], %c16 : memref<2xi32>
    memref.dma_start %b[%c0, %c0], %y[%i, %c0], %c16, %tag[%c1] : memref<2x16xf32, 2>, memref<8x64xf32>, memref<2xi32>
    memref.dma_wait %tag[%c1], %c16 : memref<2xi32>
  }
  return
}

func.func @bad(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %b = memref.alloc() : memref<64xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  affine.for %n = 1 to 4 {
    memref.dma_start %x[%c0], %b[%c0], %n, %tag[%c0] : memref<64xf32>, memref<64xf32, 2>, memref<1xi32>
    memref.dma_wait %tag[%c0], %n : memref<1xi32>
  }
  return
}

func.func private @other(%tag: memref<1xi32>) {
  %c0 = arith.constant 0 : index
  memref.dma_wait %tag[%c0], %c0 : memref<1xi32>
  return
}
