module {
  func.func @main(%arg0: memref<1x6x16x16xf32>, %arg1: memref<8x6x3x3xf32>, %arg2: memref<1x8x6x6xf32>) {
    %cst = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x8x12x12xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<1x8x12x12xf32>)
    linalg.conv_2d_nchw_fchw {dilations = dense<2> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%arg0, %arg1 : memref<1x6x16x16xf32>, memref<8x6x3x3xf32>) outs(%alloc : memref<1x8x12x12xf32>)
    %alloc_0 = memref.alloc() {alignment = 64 : i64} : memref<2x2xf32>
    linalg.fill ins(%cst : f32) outs(%arg2 : memref<1x8x6x6xf32>)
    linalg.pooling_nchw_sum {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%alloc, %alloc_0 : memref<1x8x12x12xf32>, memref<2x2xf32>) outs(%arg2 : memref<1x8x6x6xf32>)
    return
  }

}
