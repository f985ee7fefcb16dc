// Hand-written: an i32 loop nest that is not a single elementwise op and uses
// the outer loop index, so it falls back to a `compute op="mlir.kernel"` task
// with index_args=[the outer index] (D-LOW-ESCAPE, D-RT-MLIR-KERNEL).
func.func @poly(%X: memref<128x64xi32>, %Z: memref<128x64xi32>) {
  %c0 = arith.constant 0 : index
  %n = arith.constant 2048 : index
  %x = memref.alloc() : memref<32x64xi32, 2>
  %z = memref.alloc() : memref<32x64xi32, 2>
  %tag = memref.alloc() : memref<2xi32>
  affine.for %t = 0 to 128 step 32 {
    affine.dma_start %X[%t, %c0], %x[%c0, %c0], %tag[0], %n : memref<128x64xi32>, memref<32x64xi32, 2>, memref<2xi32>
    affine.dma_wait %tag[0], %n : memref<2xi32>
    affine.for %i = 0 to 32 {
      affine.for %j = 0 to 64 {
        %a = affine.load %x[%i, %j] : memref<32x64xi32, 2>
        %r = affine.apply affine_map<(d0, d1) -> (d0 + d1)>(%t, %i)
        %ri = arith.index_cast %r : index to i32
        %p = arith.muli %a, %a : i32
        %s = arith.subi %p, %ri : i32
        affine.store %s, %z[%i, %j] : memref<32x64xi32, 2>
      }
    }
    affine.dma_start %z[%c0, %c0], %Z[%t, %c0], %tag[1], %n : memref<32x64xi32, 2>, memref<128x64xi32>, memref<2xi32>
    affine.dma_wait %tag[1], %n : memref<2xi32>
  }
  return
}
