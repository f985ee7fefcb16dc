// Fuzz case (mlir target, stop 27): the upstream tiled matmul fixture with
// its k loop mutated to run 65536 over 256-wide memrefs, out of bounds.
// lower-to-nem spent 69 s in nem-synthesize-deps before the final check
// rejected it; nem-check-lowered{declarations-only=true} then rejected it
// before the tasks were ordered (BUF-02/REG-02, under a second), and the
// conversion now rejects it at the first access past its memref
// (D-LOW-BOUNDS).
#map = affine_map<(d0) -> (d0)>
#map1 = affine_map<(d0) -> (d0 + 32)>
module {
  func.func @matmul(%arg0: memref<256x256xf32>, %arg1: memref<256x256xf32>, %arg2: memref<256x256xf32>) {
    %c65536 = arith.constant 65536 : index
    %c0 = arith.constant 0 : index
    %c65536_0 = arith.constant 65536 : index
    %c0_1 = arith.constant 0 : index
    %c65536_2 = arith.constant 65536 : index
    %c0_3 = arith.constant 0 : index
    %c65536_4 = arith.constant 65536 : index
    %c0_5 = arith.constant 0 : index
    %c0_6 = arith.constant 0 : index
    %alloc = memref.alloc() : memref<256x256xf32, 2>
    %alloc_7 = memref.alloc() : memref<1xi32>
    affine.dma_start %arg0[%c0_5, %c0_5], %alloc[%c0_5, %c0_5], %alloc_7[%c0_5], %c65536_4 : memref<256x256xf32>, memref<256x256xf32, 2>, memref<1xi32>
    affine.dma_wait %alloc_7[%c0_5], %c65536_4 : memref<1xi32>
    %alloc_8 = memref.alloc() : memref<256x256xf32, 2>
    %alloc_9 = memref.alloc() : memref<1xi32>
    affine.dma_start %arg1[%c0_3, %c0_3], %alloc_8[%c0_3, %c0_3], %alloc_9[%c0_3], %c65536_2 : memref<256x256xf32>, memref<256x256xf32, 2>, memref<1xi32>
    affine.dma_wait %alloc_9[%c0_3], %c65536_2 : memref<1xi32>
    %alloc_10 = memref.alloc() : memref<256x256xf32, 2>
    %alloc_11 = memref.alloc() : memref<1xi32>
    affine.dma_start %arg2[%c0_1, %c0_1], %alloc_10[%c0_1, %c0_1], %alloc_11[%c0_1], %c65536_0 : memref<256x256xf32>, memref<256x256xf32, 2>, memref<1xi32>
    affine.dma_wait %alloc_11[%c0_1], %c65536_0 : memref<1xi32>
    %alloc_12 = memref.alloc() : memref<1xi32>
    affine.for %arg3 = 0 to 256 step 32 {
      affine.for %arg4 = 0 to 256 step 32 {
        affine.for %arg5 = 0 to 65536 step 32 {
          affine.for %arg6 = #map(%arg3) to #map1(%arg3) {
            affine.for %arg7 = #map(%arg4) to #map1(%arg4) {
              affine.for %arg8 = #map(%arg5) to #map1(%arg5) {
                %0 = affine.load %alloc[%arg6, %arg8] : memref<256x256xf32, 2>
                %1 = affine.load %alloc_8[%arg8, %arg7] : memref<256x256xf32, 2>
                %2 = affine.load %alloc_10[%arg6, %arg7] : memref<256x256xf32, 2>
                %3 = arith.mulf %0, %1 : f32
                %4 = arith.addf %2, %3 : f32
                affine.store %4, %alloc_10[%arg6, %arg7] : memref<256x256xf32, 2>
              }
            }
          }
        }
      }
    }
    affine.dma_start %alloc_10[%c0, %c0], %arg2[%c0, %c0], %alloc_12[%c0], %c65536 : memref<256x256xf32, 2>, memref<256x256xf32>, memref<1xi32>
    affine.dma_wait %alloc_12[%c0], %c65536 : memref<1xi32>
    memref.dealloc %alloc_12 : memref<1xi32>
    memref.dealloc %alloc_11 : memref<1xi32>
    memref.dealloc %alloc_10 : memref<256x256xf32, 2>
    memref.dealloc %alloc_9 : memref<1xi32>
    memref.dealloc %alloc_8 : memref<256x256xf32, 2>
    memref.dealloc %alloc_7 : memref<1xi32>
    memref.dealloc %alloc : memref<256x256xf32, 2>
    return
  }
}

