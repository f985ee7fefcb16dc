// A tiled matmul (test/lit/lowering/Inputs/matmul_tiled.mlir) with a chain of
// unused index multiplications in its point loop (the mlir fuzz campaign,
// seed 20261129): see test/lit/hostile/dead_index_chain.test.
#map = affine_map<(d0, d1) -> (d0)>
#map1 = affine_map<(d0, d1) -> (d1)>
#map2 = affine_map<(d0) -> (d0)>
#map3 = affine_map<(d0) -> (d0 + 32)>
module {
  func.func @matmul(%arg0: memref<256x256xf32>, %arg1: memref<256x256xf32>, %arg2: memref<256x256xf32>) {
    %c1024 = arith.constant 1024 : index
    %c256 = arith.constant 256 : index
    %c32 = arith.constant 32 : index
    %c0 = arith.constant 0 : index
    %c1024_0 = arith.constant 1024 : index
    %c256_1 = arith.constant 256 : index
    %c32_2 = arith.constant 32 : index
    %c0_3 = arith.constant 0 : index
    %c1024_4 = arith.constant 1024 : index
    %c256_5 = arith.constant 256 : index
    %c32_6 = arith.constant 32 : index
    %c0_7 = arith.constant 0 : index
    %c1024_8 = arith.constant 1024 : index
    %c256_9 = arith.constant 256 : index
    %c32_10 = arith.constant 32 : index
    %c0_11 = arith.constant 0 : index
    %c0_12 = arith.constant 0 : index
    affine.for %arg3 = 0 to 256 step 32 {
      affine.for %arg4 = 0 to 256 step 32 {
        %0 = affine.apply #map(%arg3, %arg4)
        %1 = affine.apply #map1(%arg3, %arg4)
        %alloc = memref.alloc() : memref<32x32xf32, 2>
        %alloc_13 = memref.alloc() : memref<1xi32>
        affine.dma_start %arg2[%arg3, %arg4], %alloc[%c0_3, %c0_3], %alloc_13[%c0_3], %c1024_0, %c256_1, %c32_2 : memref<256x256xf32>, memref<32x32xf32, 2>, memref<1xi32>
        affine.dma_wait %alloc_13[%c0_3], %c1024_0 : memref<1xi32>
        %alloc_14 = memref.alloc() : memref<1xi32>
        affine.for %arg5 = 0 to 256 step 32 {
          %4 = affine.apply #map(%arg3, %arg5)
          %5 = affine.apply #map1(%arg3, %arg5)
          %alloc_15 = memref.alloc() : memref<32x32xf32, 2>
          %alloc_16 = memref.alloc() : memref<1xi32>
          affine.dma_start %arg0[%arg3, %arg5], %alloc_15[%c0_11, %c0_11], %alloc_16[%c0_11], %c1024_8, %c256_9, %c32_10 : memref<256x256xf32>, memref<32x32xf32, 2>, memref<1xi32>
          affine.dma_wait %alloc_16[%c0_11], %c1024_8 : memref<1xi32>
          %6 = affine.apply #map(%arg5, %arg4)
          %7 = affine.apply #map1(%arg5, %arg4)
          %alloc_17 = memref.alloc() : memref<32x32xf32, 2>
          %alloc_18 = memref.alloc() : memref<1xi32>
          affine.dma_start %arg1[%arg5, %arg4], %alloc_17[%c0_7, %c0_7], %alloc_18[%c0_7], %c1024_4, %c256_5, %c32_6 : memref<256x256xf32>, memref<32x32xf32, 2>, memref<1xi32>
          affine.dma_wait %alloc_18[%c0_7], %c1024_4 : memref<1xi32>
          affine.for %arg6 = #map2(%arg3) to #map3(%arg3) {
            affine.for %arg7 = #map2(%arg4) to #map3(%arg4) {
              affine.for %arg8 = #map2(%arg5) to #map3(%arg5) {
                %8 = affine.load %alloc_15[-%arg3 + %arg6, -%arg5 + %arg8] : memref<32x32xf32, 2>
                %9 = affine.load %alloc_17[-%arg5 + %arg8, -%arg4 + %arg7] : memref<32x32xf32, 2>
                %10 = affine.load %alloc[-%arg3 + %arg6, -%arg4 + %arg7] : memref<32x32xf32, 2>
                %11 = arith.mulf %8, %9 : f32
                %12 = arith.addf %10, %11 : f32
                affine.store %12, %alloc[-%arg3 + %arg6, -%arg4 + %arg7] : memref<32x32xf32, 2>
              }
%c1 = arith.muli %c0, %c0 : index
%c2 = arith.muli %c1, %c1 : index
%c3 = arith.muli %c2, %c2 : index
%c4 = arith.muli %c3, %c3 : index
%c5 = arith.muli %c4, %c4 : index
%c6 = arith.muli %c5, %c5 : index
%c7 = arith.muli %c6, %c6 : index
%c8 = arith.muli %c7, %c7 : index
%c9 = arith.muli %c8, %c8 : index
%c10 = arith.muli %c9, %c9 : index
            }
          }
          memref.dealloc %alloc_18 : memref<1xi32>
          memref.dealloc %alloc_17 : memref<32x32xf32, 2>
          memref.dealloc %alloc_16 : memref<1xi32>
          memref.dealloc %alloc_15 : memref<32x32xf32, 2>
        }
        %2 = affine.apply #map(%arg3, %arg4)
        %3 = affine.apply #map1(%arg3, %arg4)
        affine.dma_start %alloc[%c0, %c0], %arg2[%arg3, %arg4], %alloc_14[%c0], %c1024, %c256, %c32 : memref<32x32xf32, 2>, memref<256x256xf32>, memref<1xi32>
        affine.dma_wait %alloc_14[%c0], %c1024 : memref<1xi32>
        memref.dealloc %alloc_14 : memref<1xi32>
        memref.dealloc %alloc_13 : memref<1xi32>
        memref.dealloc %alloc : memref<32x32xf32, 2>
      }
    }
    return
  }
}

