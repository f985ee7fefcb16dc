// Hand-written: linalg.conv_2d_nhwc_hwcf on L1 (memory space 2) buffers, f16.
// memref.copy uses upstream custom syntax (frontends/nem/frontends/upstream_dialects/memref_copy.py).
func.func @conv(%x: memref<1x10x10x8xf16>, %w: memref<3x3x8x16xf16>, %y: memref<1x8x8x16xf16>) {
  %xl = memref.alloc() : memref<1x10x10x8xf16, 2>
  %wl = memref.alloc() : memref<3x3x8x16xf16, 2>
  %yl = memref.alloc() : memref<1x8x8x16xf16, 2>
  memref.copy %x, %xl : memref<1x10x10x8xf16> to memref<1x10x10x8xf16, 2>
  memref.copy %w, %wl : memref<3x3x8x16xf16> to memref<3x3x8x16xf16, 2>
  memref.copy %y, %yl : memref<1x8x8x16xf16> to memref<1x8x8x16xf16, 2>
  linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
    ins(%xl, %wl : memref<1x10x10x8xf16, 2>, memref<3x3x8x16xf16, 2>)
    outs(%yl : memref<1x8x8x16xf16, 2>)
  memref.copy %yl, %y : memref<1x8x8x16xf16, 2> to memref<1x8x8x16xf16>
  return
}
