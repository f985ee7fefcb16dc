// Fuzz campaign 2026-11-26 (seed 20261127): upstream MLIR aborted the process
// (SIGABRT) while generalizing; now run in a child process and reported (D-LOW-UPSTREAM).
// linalg.pooling_nhwc_max / _sum as a graph importer writes them (xDSL 0.74
// does not define them; upstream MLIR generalizes them first, D-LOW-UPSTREAM).
func.func @main(%x: memref<1x8x8x4xf16>, %y: memref<1x4x4x4xf16>, %s: memref<1x4x4x4xf16>) {
  %k = memref.alloc() : memref<2x2xf16>
  linalg.pooling_nhwc_max {dilations = dense<9223372036854775807> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
    ins(%x, %k : memref<1x8x8x4xf16>, memref<2x2xf16>) outs(%y : memref<1x4x4x4xf16>)
  linalg.pooling_nhwc_sum {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
    ins(%x, %k : memref<1x8x8x4xf16>, memref<2x2xf16>) outs(%s : memref<1x4x4x4xf16>)
  return
}
