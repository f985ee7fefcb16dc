// nem-drop-async-groups (D-LOW-ASYNC-GROUPS): the entry function's
// async.create_group, async.add_to_group and async.await_all ops are erased
// (what a group orders is data: nem-synthesize-deps orders it), so the
// conversion's table has no entry for them; the executes stay, other
// functions keep their groups (the conversion lowers the entry only).
// RUN: nem-opt %s -p nem-drop-async-groups | filecheck %s --check-prefix=DROP
// DROP-LABEL: func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
// DROP-NEXT: %c2 = arith.constant 2 : index
// DROP-NEXT: affine.for %i = 0 to 2 {
// DROP-NEXT: %t = async.execute {
// DROP-NEXT: memref.copy %x, %y : memref<64xf32> to memref<64xf32>
// DROP-NEXT: async.yield
// DROP-NEXT: }
// DROP-NEXT: }
// DROP-NEXT: func.return
// DROP-LABEL: func.func @other(
// DROP-NEXT: %c1 = arith.constant 1 : index
// DROP-NEXT: %g = async.create_group %c1 : !async.group
// DROP-NEXT: async.await_all %g
//
// entry=other: that function's instead.
// RUN: nem-opt %s -p 'nem-drop-async-groups{entry=other}' | filecheck %s --check-prefix=OTHER
// OTHER-LABEL: func.func @main(
// OTHER: async.create_group
// OTHER: async.add_to_group
// OTHER: async.await_all
// OTHER-LABEL: func.func @other(
// OTHER-NEXT: %c1 = arith.constant 1 : index
// OTHER-NEXT: func.return
//
// lower-to-nem: the copies of the executes, nothing of the group.
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem | filecheck %s --check-prefix=LOWER
// LOWER: loop i in [0..1]
// LOWER-NEXT: copy{{[0-9]+}} = transfer.sync(dst=region(y, 0, 256) elem=f32, shape=[64], layout=C, src=region(x, 0, 256) elem=f32, shape=[64], layout=C)
//
// The position add_to_group returns has no NEM value: an error at the op.
// RUN: not nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 entry=used}' -t nem 2>&1 | filecheck %s --check-prefix=USED
// USED: async_groups.mlir:69:3: error: cannot lower 'async.add_to_group': not supported: the position async.add_to_group returns is used; NEM has no groups, what they order is synthesized from the data (D-LOW-ASYNC-GROUPS)
// USED: fix: drop the use of the result

func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c2 = arith.constant 2 : index
  %g = async.create_group %c2 : !async.group
  affine.for %i = 0 to 2 {
    %t = async.execute {
      memref.copy %x, %y : memref<64xf32> to memref<64xf32>
      async.yield
    }
    %k = async.add_to_group %t, %g : !async.token
  }
  async.await_all %g
  return
}

func.func @other() {
  %c1 = arith.constant 1 : index
  %g = async.create_group %c1 : !async.group
  async.await_all %g
  return
}

func.func @used(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %g = async.create_group %c1 : !async.group
  %t = async.execute {
    memref.copy %x, %y : memref<64xf32> to memref<64xf32>
    async.yield
  }
  %i = async.add_to_group %t, %g : !async.token
  %s = memref.subview %x[%i] [8] [1] : memref<64xf32> to memref<8xf32, strided<[1], offset: ?>>
  %d = memref.subview %y[0] [8] [1] : memref<64xf32> to memref<8xf32, strided<[1]>>
  memref.copy %s, %d : memref<8xf32, strided<[1], offset: ?>> to memref<8xf32, strided<[1]>>
  async.await_all %g
  return
}
