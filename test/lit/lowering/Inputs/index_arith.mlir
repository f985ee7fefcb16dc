// Index arithmetic in arith, as `-lower-affine` and scf tiling write it, in
// loops the conversion lowers one by one (nem-fold-index-arith, D-LOW-AFFINE;
// the differential test test_lowering_fold_index_arith.py lowers each
// function with and without the pass).
func.func @tiled_copies(%x: memref<256xf32>, %y: memref<256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c4 step %c1 {
    %t = memref.alloc() : memref<16xf32, 2>
    scf.for %j = %c0 to %c4 step %c1 {
      %o0 = arith.muli %i, %c16 : index
      %o1 = arith.muli %c4, %j : index
      %o = arith.addi %o0, %o1 : index
      %s = memref.subview %x[%o] [4] [1] : memref<256xf32> to memref<4xf32, strided<[1], offset: ?>>
      %tj = arith.muli %j, %c4 : index
      %ts = memref.subview %t[%tj] [4] [1] : memref<16xf32, 2> to memref<4xf32, strided<[1], offset: ?>, 2>
      memref.copy %s, %ts : memref<4xf32, strided<[1], offset: ?>> to memref<4xf32, strided<[1], offset: ?>, 2>
    }
    %r = arith.subi %c4, %i : index
    %r1 = arith.subi %r, %c1 : index
    %d = arith.muli %r1, %c16 : index
    %ys = memref.subview %y[%d] [16] [1] : memref<256xf32> to memref<16xf32, strided<[1], offset: ?>>
    memref.copy %t, %ys : memref<16xf32, 2> to memref<16xf32, strided<[1], offset: ?>>
  }
  return
}
func.func @divisions(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  affine.for %i = 0 to 16 {
    %q = arith.divsi %i, %c4 : index
    %r = arith.remsi %i, %c4 : index
    %u = arith.divui %i, %c2 : index
    %v = arith.remui %i, %c8 : index
    %w = arith.ceildivsi %i, %c3 : index
    %f = arith.floordivsi %i, %c8 : index
    %a = affine.apply affine_map<(d0, d1) -> (d0 * 4 + d1)>(%r, %q)
    %b = arith.addi %u, %v : index
    %e = arith.addi %w, %f : index
    %be = arith.addi %b, %e : index
    %xs = memref.subview %x[%a] [1] [1] : memref<64xf32> to memref<1xf32, strided<[1], offset: ?>>
    %ys = memref.subview %y[%be] [1] [1] : memref<64xf32> to memref<1xf32, strided<[1], offset: ?>>
    memref.copy %xs, %ys : memref<1xf32, strided<[1], offset: ?>> to memref<1xf32, strided<[1], offset: ?>>
  }
  return
}
func.func @dma_arith(%x: memref<256xf32>, %y: memref<256xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %a = memref.alloc() : memref<64xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  affine.for %i = 0 to 4 {
    %o = arith.muli %i, %c64 : index
    %p = affine.apply affine_map<(d0)[s0] -> (d0 + s0)>(%o)[%c32]
    %q = arith.subi %p, %c32 : index
    affine.dma_start %x[%q], %a[%c0], %tag[%c0], %c64 : memref<256xf32>, memref<64xf32, 2>, memref<1xi32>
    affine.dma_wait %tag[%c0], %c64 : memref<1xi32>
    affine.dma_start %a[%c0], %y[%o], %tag[%c0], %c64 : memref<64xf32, 2>, memref<256xf32>, memref<1xi32>
    affine.dma_wait %tag[%c0], %c64 : memref<1xi32>
  }
  return
}
func.func @one_tile(%x: memref<64xf32>, %y: memref<64xf32>) {
  affine.for %t = 0 to 1 {
    affine.for %i = 0 to 4 {
      %o = arith.muli %t, %i : index
      %c2 = arith.constant 2 : index
      %t2 = arith.addi %t, %c2 : index
      %d = arith.divsi %i, %t2 : index
      %xs = memref.subview %x[%o] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1], offset: ?>>
      %ys = memref.subview %y[%d] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1], offset: ?>>
      memref.copy %xs, %ys : memref<16xf32, strided<[1], offset: ?>> to memref<16xf32, strided<[1], offset: ?>>
    }
  }
  return
}
func.func @shifted(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c4 = arith.constant 4 : index
  affine.for %i = -4 to 12 {
    %s = arith.addi %i, %c4 : index
    %q = arith.divsi %s, %c4 : index
    %xs = memref.subview %x[%s] [4] [1] : memref<64xf32> to memref<4xf32, strided<[1], offset: ?>>
    %ys = memref.subview %y[%q] [4] [1] : memref<64xf32> to memref<4xf32, strided<[1], offset: ?>>
    memref.copy %xs, %ys : memref<4xf32, strided<[1], offset: ?>> to memref<4xf32, strided<[1], offset: ?>>
  }
  return
}
