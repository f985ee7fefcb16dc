// Found by the fuzz campaign of 2026-11-27 (an internal MemoryError): a
// bias broadcast along a loop of 2^63 - 1 iterations was built as one concat
// of that many operands (D-LOW-BCAST-CONCAT now stops at 1024 copies).
// Elementwise nests with a broadcast operand, as a user writes them (a bias
// add, softmax's shift by the row max): the operand is copied to the
// output's shape by transfers, then the ops run (D-LOW-BCAST-OPERAND).
// @transposed is a near miss: its operand is indexed in the other order.
func.func @bias_relu(%x: memref<4x8xf32>, %b: memref<8xf32>, %y: memref<4x8xf32>) {
  %z = arith.constant 0.0 : f32
  affine.for %i = 0 to 9223372036854775807 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %c = affine.load %b[%j] : memref<8xf32>
      %s = arith.addf %v, %c : f32
      %r = arith.maximumf %s, %z : f32
      affine.store %r, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}

func.func @shift_exp(%x: memref<4x8xf32>, %m: memref<4x1xf32>, %y: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %c = affine.load %m[%i, 0] : memref<4x1xf32>
      %d = arith.subf %v, %c : f32
      %e = math.exp %d : f32
      affine.store %e, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}

func.func @transposed(%x: memref<4x4xf32>, %t: memref<4x4xf32>, %y: memref<4x4xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      %v = affine.load %x[%i, %j] : memref<4x4xf32>
      %c = affine.load %t[%j, %i] : memref<4x4xf32>
      %s = arith.addf %v, %c : f32
      affine.store %s, %y[%i, %j] : memref<4x4xf32>
    }
  }
  return
}
