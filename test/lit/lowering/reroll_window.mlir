// A loop under a window other than nem-reroll-pipelines' 2 is rejected at the
// loop: the conversion gives the buffers of a loop under a window two slots
// (D-LOW-PIPE).
// RUN: not nem-opt %s -p 'convert-affine-to-nem{device=npm_pro_x1}' 2>&1 | filecheck %s
// CHECK: reroll_window.mlir:11:3: error: cannot lower 'affine.for': nem.max_in_flight = 3 : i64: the conversion gives the buffers of a loop under a window two slots, so the window must be 2
// CHECK: fix: write nem.max_in_flight = 2 : i64, or leave the window to nem-reroll-pipelines

func.func @window(%a: memref<64xf32>) {
  %c16 = arith.constant 16 : index
  %buf = memref.alloc() : memref<2x16xf32, 2>
  affine.for %i = 0 to 64 step 16 {
    %t = memref.alloc() : memref<1xi32>
    affine.dma_start %a[%i], %buf[(%i floordiv 16) mod 2, 0], %t[0], %c16 : memref<64xf32>, memref<2x16xf32, 2>, memref<1xi32>
    affine.dma_wait %t[0], %c16 : memref<1xi32>
  } {nem.max_in_flight = 3 : i64}
  return
}
