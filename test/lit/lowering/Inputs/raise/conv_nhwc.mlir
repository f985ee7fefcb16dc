// An NHWC convolution with a bias broadcast and a fill, as a graph importer
// writes it; conv_nest.test turns it into affine loop nests with mlir-opt.
func.func @main(%x: memref<1x6x6x3xf32>, %w: memref<3x3x3x4xf32>, %b: memref<4xf32>, %y: memref<1x4x4x4xf32>, %z: memref<1x4x4x4xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  linalg.broadcast ins(%b : memref<4xf32>) outs(%y : memref<1x4x4x4xf32>) dimensions = [0, 1, 2]
  linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%x, %w : memref<1x6x6x3xf32>, memref<3x3x3x4xf32>) outs(%y : memref<1x4x4x4xf32>)
  linalg.fill ins(%cst : f32) outs(%z : memref<1x4x4x4xf32>)
  return
}
