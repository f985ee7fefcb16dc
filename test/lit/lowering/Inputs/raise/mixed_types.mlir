// Named linalg contractions whose inputs are narrower than their output,
// and a convolution with upstream's default (omitted) strides and
// dilations, as mlir-opt prints them (D-LOW-LINALG-NAMED).
func.func @mm_i8(%a: memref<16x32xi8>, %b: memref<32x24xi8>, %c: memref<16x24xi32>) {
  linalg.matmul ins(%a, %b : memref<16x32xi8>, memref<32x24xi8>) outs(%c : memref<16x24xi32>)
  return
}

func.func @conv_f16_f32(%x: memref<1x6x6x4xf16>, %w: memref<3x3x4x8xf16>, %y: memref<1x4x4x8xf32>) {
  linalg.conv_2d_nhwc_hwcf ins(%x, %w : memref<1x6x6x4xf16>, memref<3x3x4x8xf16>) outs(%y : memref<1x4x4x8xf32>)
  return
}

func.func @conv_default_strides(%x: memref<1x4x6x6xf32>, %w: memref<8x4x3x3xf32>, %y: memref<1x8x4x4xf32>) {
  linalg.conv_2d_nchw_fchw ins(%x, %w : memref<1x4x6x6xf32>, memref<8x4x3x3xf32>) outs(%y : memref<1x8x4x4xf32>)
  return
}
