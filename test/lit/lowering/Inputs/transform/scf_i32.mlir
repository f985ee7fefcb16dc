// An scf.for over i32 (valid upstream): no NEM loop variable.
func.func @main(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %c8 step %c1 : i32 {
    %j = arith.index_cast %i : i32 to index
    %v = memref.load %x[%j] : memref<8xf32>
    memref.store %v, %x[%j] : memref<8xf32>
  }
  return
}
