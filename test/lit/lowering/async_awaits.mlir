// nem-drop-token-awaits (D-LOW-ASYNC-AWAITS): the entry function's awaits of
// tokens are erased (what an await orders is data: nem-synthesize-deps orders
// it), and every loop around one is marked nem_lowering.structural, so the
// conversion still makes it a NEM loop (loops.is_structural); an await of an
// !async.value stays (its result is the payload's alias), and other functions
// keep their awaits (the conversion lowers the entry only).
// RUN: nem-opt %s -p nem-drop-token-awaits | filecheck %s --check-prefix=DROP
// DROP-LABEL: func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
// DROP-NEXT: %t = async.execute {
// DROP-NEXT: memref.copy %x, %y : memref<64xf32> to memref<64xf32>
// DROP-NEXT: async.yield
// DROP-NEXT: }
// DROP-NEXT: affine.for %i = 0 to 4 {
// DROP-NEXT: affine.for %j = 0 to 16 {
// DROP-NEXT: %v = affine.load %x[%i * 16 + %j] : memref<64xf32>
// DROP-NEXT: %r = arith.addf %v, %v : f32
// DROP-NEXT: affine.store %r, %y[%i * 16 + %j] : memref<64xf32>
// DROP-NEXT: }
// DROP-NEXT: } {nem_lowering.structural}
// DROP-NEXT: %u, %w = async.execute -> !async.value<memref<64xf32>> {
// DROP-NEXT: async.yield %x : memref<64xf32>
// DROP-NEXT: }
// DROP-NEXT: %m = async.await %w : !async.value<memref<64xf32>>
// DROP-NEXT: memref.copy %m, %y : memref<64xf32> to memref<64xf32>
// DROP-NEXT: func.return
// DROP-LABEL: func.func @other() {
// DROP: async.await %t : !async.token
//
// entry=other: that function's instead.
// RUN: nem-opt %s -p 'nem-drop-token-awaits{entry=other}' | filecheck %s --check-prefix=OTHER
// OTHER-LABEL: func.func @main(
// OTHER: async.await %t : !async.token
// OTHER: async.await %u : !async.token
// OTHER-LABEL: func.func @other() {
// OTHER-NEXT: %t = async.execute {
// OTHER-NEXT: async.yield
// OTHER-NEXT: }
// OTHER-NEXT: func.return
//
// lower-to-nem: the loop that held the await stays a NEM loop, one add per
// iteration; nothing of the awaits.
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem | filecheck %s --check-prefix=LOWER
// LOWER: copy1 = transfer.sync(dst=region(y, 0, 256) elem=f32, shape=[64], layout=C, src=region(x, 0, 256) elem=f32, shape=[64], layout=C)
// LOWER: loop i in [0..3]:
// LOWER-NEXT: add2 = add.async in region(x, i * 64, 64) elem=f32, shape=[16], layout=C, region(x, i * 64, 64) elem=f32, shape=[16], layout=C out region(y, i * 64, 64) elem=f32, shape=[16], layout=C
// LOWER-NEXT: wait(add2)
// LOWER-NEXT: endloop
// LOWER: copy3 = transfer.sync(dst=region(y, 0, 256) elem=f32, shape=[64], layout=C, src=region(x, 0, 256) elem=f32, shape=[64], layout=C)

func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
  %t = async.execute {
    memref.copy %x, %y : memref<64xf32> to memref<64xf32>
    async.yield
  }
  affine.for %i = 0 to 4 {
    async.await %t : !async.token
    affine.for %j = 0 to 16 {
      %v = affine.load %x[%i * 16 + %j] : memref<64xf32>
      %r = arith.addf %v, %v : f32
      affine.store %r, %y[%i * 16 + %j] : memref<64xf32>
    }
  }
  %u, %w = async.execute -> !async.value<memref<64xf32>> {
    async.yield %x : memref<64xf32>
  }
  %m = async.await %w : !async.value<memref<64xf32>>
  async.await %u : !async.token
  memref.copy %m, %y : memref<64xf32> to memref<64xf32>
  return
}

func.func @other() {
  %t = async.execute {
    async.yield
  }
  async.await %t : !async.token
  return
}
