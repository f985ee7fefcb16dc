// Grouped and depthwise convolutions as importers write them: the ONNX
// importer's linalg.conv_2d_nhwgc_gfhwc on [N, H, W, G, C/G] views
// (D-COMPILE-LAYOUT), torch-style NCHW grouped convs, depthwise named ops.
func.func @grouped(%x: memref<1x6x6x2x2xf32>, %w: memref<2x3x3x3x2xf32>, %y: memref<1x4x4x2x3xf32>) {
  linalg.conv_2d_nhwgc_gfhwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%x, %w : memref<1x6x6x2x2xf32>, memref<2x3x3x3x2xf32>) outs(%y : memref<1x4x4x2x3xf32>)
  return
}
func.func @depthwise(%x: memref<1x9x9x4x1xf32>, %w: memref<4x2x3x3x1xf32>, %y: memref<1x4x4x4x2xf32>) {
  linalg.conv_2d_nhwgc_gfhwc {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
    ins(%x, %w : memref<1x9x9x4x1xf32>, memref<4x2x3x3x1xf32>) outs(%y : memref<1x4x4x4x2xf32>)
  return
}
func.func @nchw(%x: memref<1x2x2x6x6xf32>, %w: memref<2x3x2x3x3xf32>, %y: memref<1x2x3x4x4xf32>) {
  linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%x, %w : memref<1x2x2x6x6xf32>, memref<2x3x2x3x3xf32>) outs(%y : memref<1x2x3x4x4xf32>)
  return
}
func.func @dw_hwc(%x: memref<1x6x6x4xf32>, %w: memref<3x3x4xf32>, %y: memref<1x4x4x4xf32>) {
  linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%x, %w : memref<1x6x6x4xf32>, memref<3x3x4xf32>) outs(%y : memref<1x4x4x4xf32>)
  return
}
func.func @fgchw(%x: memref<1x2x2x6x6xf32>, %w: memref<3x2x2x3x3xf32>, %y: memref<1x2x3x4x4xf32>) {
  linalg.conv_2d_ngchw_fgchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%x, %w : memref<1x2x2x6x6xf32>, memref<3x2x2x3x3xf32>) outs(%y : memref<1x2x3x4x4xf32>)
  return
}
