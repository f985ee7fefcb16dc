// nem-inline-async-executes (D-LOW-ASYNC-INLINE): the entry function's
// async.execute ops become nem_lowering.scope ops holding their bodies (the
// conversion lowers a scope in place, with scratch buffers of its own), one
// result per memref or index payload; body arguments and await results are
// the payloads; dependencies and the tokens NEM loops carry are dropped (what
// they order is data, which nem-synthesize-deps orders); awaits go; every
// loop around a rewritten op is marked nem_lowering.structural.  Other
// functions keep their async ops (the conversion lowers the entry only).
// RUN: nem-opt %s -p nem-inline-async-executes | filecheck %s --check-prefix=INLINE
// INLINE-LABEL: func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
// INLINE-NEXT: %c16 = arith.constant 16 : index
// INLINE-NEXT: %va = "nem_lowering.scope"() ({
// INLINE-NEXT: %a = memref.alloc() : memref<64xf32, 2 : i64>
// INLINE-NEXT: memref.copy %x, %a : memref<64xf32> to memref<64xf32, 2 : i64>
// INLINE-NEXT: "nem_lowering.yield"(%a) {nem_lowering.replaces = "async.yield"} : (memref<64xf32, 2 : i64>) -> ()
// INLINE-NEXT: }) {nem_lowering.replaces = "async.execute"} : () -> memref<64xf32, 2 : i64>
// INLINE-NEXT: %n = "nem_lowering.scope"() ({
// INLINE-NEXT: "nem_lowering.yield"(%c16) {nem_lowering.replaces = "async.yield"} : (index) -> ()
// INLINE-NEXT: }) {nem_lowering.replaces = "async.execute"} : () -> index
// INLINE-NEXT: affine.for %i = 0 to 4 {
// INLINE-NEXT: "nem_lowering.scope"() ({
// INLINE-NEXT: affine.for %j = 0 to 16 {
// INLINE-NEXT: %v = affine.load %va[%i * 16 + %j] : memref<64xf32, 2 : i64>
// INLINE-NEXT: %r = arith.addf %v, %v : f32
// INLINE-NEXT: affine.store %r, %y[%i * 16 + %j] : memref<64xf32>
// INLINE-NEXT: }
// INLINE-NEXT: "nem_lowering.yield"() {nem_lowering.replaces = "async.yield"} : () -> ()
// INLINE-NEXT: }) {nem_lowering.replaces = "async.execute"} : () -> ()
// INLINE-NEXT: } {nem_lowering.structural}
// INLINE-NEXT: memref.copy %va, %x : memref<64xf32, 2 : i64> to memref<64xf32>
// INLINE-NEXT: func.return
// INLINE-LABEL: func.func @other() {
// INLINE-NEXT: %t = async.execute {
// INLINE-NEXT: async.yield
// INLINE-NEXT: }
// INLINE-NEXT: async.await %t : !async.token
//
// entry=other: that function's instead.
// RUN: nem-opt %s -p 'nem-inline-async-executes{entry=other}' | filecheck %s --check-prefix=OTHER
// OTHER-LABEL: func.func @main(
// OTHER: async.execute [%t0] -> !async.value<index>
// OTHER: async.await %va : !async.value<memref<64xf32, 2 : i64>>
// OTHER-LABEL: func.func @other() {
// OTHER-NEXT: "nem_lowering.scope"() ({
// OTHER-NEXT: "nem_lowering.yield"() {nem_lowering.replaces = "async.yield"} : () -> ()
// OTHER-NEXT: }) {nem_lowering.replaces = "async.execute"} : () -> ()
// OTHER-NEXT: func.return
//
// lower-to-nem: the scopes' tasks in place, the loop a NEM loop, the payload
// %va the view of buffer a throughout; nothing of the tokens.
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem | filecheck %s --check-prefix=LOWER
// LOWER: buffer a : L1[0] (size=256, align=64)
// LOWER-NEXT: copy1 = transfer.sync(dst=region(a, 0, 256) elem=f32, shape=[64], layout=C, src=region(x, 0, 256) elem=f32, shape=[64], layout=C)
// LOWER: loop i in [0..3]:
// LOWER-NEXT: add2 = add.async in region(a, i * 64, 64) elem=f32, shape=[16], layout=C, region(a, i * 64, 64) elem=f32, shape=[16], layout=C out region(y, i * 64, 64) elem=f32, shape=[16], layout=C
// LOWER-NEXT: wait(add2)
// LOWER-NEXT: endloop
// LOWER: copy3 = transfer.sync(dst=region(x, 0, 256) elem=f32, shape=[64], layout=C, src=region(a, 0, 256) elem=f32, shape=[64], layout=C)

func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c16 = arith.constant 16 : index
  %t0, %va = async.execute -> !async.value<memref<64xf32, 2>> {
    %a = memref.alloc() : memref<64xf32, 2>
    memref.copy %x, %a : memref<64xf32> to memref<64xf32, 2>
    async.yield %a : memref<64xf32, 2>
  }
  %t1, %n = async.execute [%t0] -> !async.value<index> {
    async.yield %c16 : index
  }
  %last = affine.for %i = 0 to 4 iter_args(%prev = %t1) -> (!async.token) {
    %t = async.execute [%prev] (%va as %a2: !async.value<memref<64xf32, 2>>, %n as %m: !async.value<index>) {
      affine.for %j = 0 to 16 {
        %v = affine.load %a2[%i * 16 + %j] : memref<64xf32, 2>
        %r = arith.addf %v, %v : f32
        affine.store %r, %y[%i * 16 + %j] : memref<64xf32>
      }
      async.yield
    }
    affine.yield %t : !async.token
  }
  async.await %last : !async.token
  %b = async.await %va : !async.value<memref<64xf32, 2>>
  memref.copy %b, %x : memref<64xf32, 2> to memref<64xf32>
  return
}

func.func @other() {
  %t = async.execute {
    async.yield
  }
  async.await %t : !async.token
  return
}
