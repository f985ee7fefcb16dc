// nem-drop-memref-hints (D-LOW-MEMREF-HINTS): the entry function's
// memref.dealloc ops are erased and a memref.assume_alignment's uses take its
// operand, so the conversion's table has no entry for either; other
// functions keep theirs (the conversion lowers the entry only).
// RUN: nem-opt %s -p nem-drop-memref-hints | filecheck %s --check-prefix=DROP
// DROP-LABEL: func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
// DROP-NEXT: %t = memref.alloc() : memref<64xf32, 2 : i64>
// DROP-NEXT: memref.copy %x, %t : memref<64xf32> to memref<64xf32, 2 : i64>
// DROP-NEXT: affine.for %i = 0 to 64 {
// DROP: memref.copy %t, %y : memref<64xf32, 2 : i64> to memref<64xf32>
// DROP-NEXT: func.return
// DROP-LABEL: func.func private @other(
// DROP-NEXT: %a = memref.assume_alignment %x, 64 : memref<64xf32>
// DROP-NEXT: memref.dealloc %a : memref<64xf32>
//
// entry=other: that function's instead.
// RUN: nem-opt %s -p 'nem-drop-memref-hints{entry=other}' | filecheck %s --check-prefix=OTHER
// OTHER-LABEL: func.func @main(
// OTHER: memref.dealloc %t
// OTHER-LABEL: func.func private @other(
// OTHER-NEXT: func.return
//
// lower-to-nem: the aligned memref is the argument's buffer (an error before
// the pass: the driver bound no view to the alignment's result).
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem | filecheck %s --check-prefix=LOWER
// LOWER: buffer x : DDR (size=256, align=64)
// LOWER: buffer t : L1[0] (size=256, align=64)
// LOWER: copy1 = transfer.sync(dst=region(t, 0, 256) elem=f32, shape=[64], layout=C, src=region(x, 0, 256) elem=f32, shape=[64], layout=C)
// LOWER-NEXT: max2 = max.async in region(t, 0, 256)

func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
  %a = memref.assume_alignment %x, 64 : memref<64xf32>
  %t = memref.alloc() : memref<64xf32, 2>
  memref.copy %a, %t : memref<64xf32> to memref<64xf32, 2>
  affine.for %i = 0 to 64 {
    %v = affine.load %t[%i] : memref<64xf32, 2>
    %r = arith.maximumf %v, %v : f32
    affine.store %r, %t[%i] : memref<64xf32, 2>
  }
  memref.copy %t, %y : memref<64xf32, 2> to memref<64xf32>
  memref.dealloc %t : memref<64xf32, 2>
  return
}

func.func private @other(%x: memref<64xf32>) {
  %a = memref.assume_alignment %x, 64 : memref<64xf32>
  memref.dealloc %a : memref<64xf32>
  return
}
