// Fuzz campaign 2026-11-26 (seed 20261127): upstream MLIR aborted the process
// (SIGABRT) while generalizing; now run in a child process and reported (D-LOW-UPSTREAM).
// linalg.map (xDSL 0.74 does not define it).
func.func @main(%x: memref<4x8xf32>, %z: memref<4x8xf32>, %y: memref<4x8xf32>) {
  linalg.map { f16df } ins(%x, %z : memref<4x8xf32>, memref<4x8xf32>) outs(%y : memref<4x8xf32>)
  return
}
xf32>) {
  linalg.map { f16df } ins(%x, %z : memref<4x8xf32>, memref<4x8xf32>) outs(%y : memref<4x8xf32>)
  return
}
