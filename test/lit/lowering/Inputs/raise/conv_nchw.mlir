// An NCHW / FCHW convolution (torch-mlir's layout), strided.
func.func @main(%x: memref<1x3x10x9xf32>, %w: memref<8x3x3x3xf32>, %y: memref<1x8x4x7xf32>) {
  linalg.conv_2d_nchw_fchw {dilations = dense<[1, 1]> : tensor<2xi64>, strides = dense<[2, 1]> : tensor<2xi64>}
    ins(%x, %w : memref<1x3x10x9xf32>, memref<8x3x3x3xf32>) outs(%y : memref<1x8x4x7xf32>)
  return
}
