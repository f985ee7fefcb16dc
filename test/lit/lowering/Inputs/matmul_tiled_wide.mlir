// A tile loop of 4 trips marked `nem.all_in_flight = 4`, as the tile stage of
// nem-compile marks a short compute-bound tile loop whose slots fit L1
// (D-COMPILE-TILE-TIME, session 37): the output of `pipeline_tiles.test`'s
// tiling with the mark added (D-LOW-PIPE-BODY).
module {
  func.func @main(%arg0: memref<8x16xf32>, %arg1: memref<16x8xf32>, %arg2: memref<8x8xf32>) {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c2 = arith.constant 2 : index
    scf.for %arg3 = %c0 to %c8 step %c2 {
      %subview = memref.subview %arg0[%arg3, 0] [2, 16] [1, 1] : memref<8x16xf32> to memref<2x16xf32, strided<[16, 1], offset: ?>>
      %subview_0 = memref.subview %arg2[%arg3, 0] [2, 8] [1, 1] : memref<8x8xf32> to memref<2x8xf32, strided<[8, 1], offset: ?>>
      %alloc = memref.alloc() : memref<128xi8, 2>
      %view = memref.view %alloc[%c0][] : memref<128xi8, 2> to memref<2x16xf32, 2>
      %alloc_1 = memref.alloc() : memref<512xi8, 2>
      %view_2 = memref.view %alloc_1[%c0][] : memref<512xi8, 2> to memref<16x8xf32, 2>
      %alloc_3 = memref.alloc() : memref<64xi8, 2>
      %view_4 = memref.view %alloc_3[%c0][] : memref<64xi8, 2> to memref<2x8xf32, 2>
      linalg.copy ins(%subview : memref<2x16xf32, strided<[16, 1], offset: ?>>) outs(%view : memref<2x16xf32, 2>)
      linalg.copy ins(%arg1 : memref<16x8xf32>) outs(%view_2 : memref<16x8xf32, 2>)
      linalg.copy ins(%subview_0 : memref<2x8xf32, strided<[8, 1], offset: ?>>) outs(%view_4 : memref<2x8xf32, 2>)
      linalg.matmul ins(%view, %view_2 : memref<2x16xf32, 2>, memref<16x8xf32, 2>) outs(%view_4 : memref<2x8xf32, 2>)
      linalg.copy ins(%view_4 : memref<2x8xf32, 2>) outs(%subview_0 : memref<2x8xf32, strided<[8, 1], offset: ?>>)
      memref.dealloc %alloc : memref<128xi8, 2>
      memref.dealloc %alloc_1 : memref<512xi8, 2>
      memref.dealloc %alloc_3 : memref<64xi8, 2>
    } {nem.all_in_flight = 4 : i64}
    return
  }
}

