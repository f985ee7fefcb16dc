// issue 12 reproducer (nem-compile, any broadcast operand such as a [C, 1, 1]
// bias or a reduction's kept size-1 dimension): -affine-data-copy-generate
// and -canonicalize leave a constant index as a map symbol, printed
// `symbol(%c0)`, which xDSL 0.74's affine parser rejected ("Expected
// primary expression"); nem's parser takes it as upstream does
// (D-XDSL-AFFINE-SSA).
func.func @main(%y: memref<3x1xf32>, %z: memref<3x1xf32>) {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %buf = memref.alloc() : memref<3x1xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  affine.dma_start %y[0, symbol(%c0)], %buf[%c0, %c0], %tag[%c0], %c3 : memref<3x1xf32>, memref<3x1xf32, 2>, memref<1xi32>
  affine.dma_wait %tag[%c0], %c3 : memref<1xi32>
  affine.dma_start %buf[%c0, %c0], %z[%c0, %c0], %tag[%c0], %c3 : memref<3x1xf32, 2>, memref<3x1xf32>, memref<1xi32>
  affine.dma_wait %tag[%c0], %c3 : memref<1xi32>
  return
}
