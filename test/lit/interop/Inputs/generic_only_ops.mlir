// Ops xDSL 0.74 defines without their custom syntax, in upstream's custom form.
func.func @cast(%C: memref<16xf32>, %D: memref<16xf32>) {
  %c = memref.cast %C : memref<16xf32> to memref<?xf32>
  affine.for %i = 0 to 16 {
    %a = affine.load %c[%i] : memref<?xf32>
    affine.store %a, %D[%i] : memref<16xf32>
  }
  return
}

func.func @parallel(%A: memref<16x16xf32>, %B: memref<16x16xf32>, %n: index) {
  affine.parallel (%i, %j) = (0, 0) to (16, 16) step (2, 4) {
    %a = affine.load %A[%i, %j] : memref<16x16xf32>
    affine.store %a, %B[%j, %i] : memref<16x16xf32>
  }
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%k) = (%c0) to (%n) step (%c1) {
    %r = memref.rank %A : memref<16x16xf32>
    scf.reduce
  }
  return
}
