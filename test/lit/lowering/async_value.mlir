// !async.value<T> through lower-to-nem (D-LOW-ASYNC-VALUE).  A memref payload
// is the view of the memref the execute yields: the await result and the body
// argument bound to a value operand (`%va as %a2`) are that same NEM region,
// and what the tokens ordered is data: nem-synthesize-deps orders each task
// after the tasks it conflicts with (a value's consumer after its producer).
// split-transfers=false: one transfer per copy (the 16 KiB copies made once would split over the DMAs, D-NEM-SPLIT-TRANSFERS); the subject is the async ordering
// RUN: nem-opt %S/Inputs/async_value_pipeline.mlir -p 'lower-to-nem{device=npm_pro_x1 split-transfers=false}' -t nem 2>/dev/null | filecheck %s
// RUN: nem-opt %S/Inputs/async_value_pipeline.mlir -p 'lower-to-nem{device=npm_pro_x1 split-transfers=false}' -t nem 2>/dev/null | nem-opt -f nem -p nem-verify -o /dev/null
// CHECK: buffer X : DDR (size=16384, align=64)
// CHECK: buffer b : L1[0] (size=16384, align=64)
// CHECK: buffer o : L1[0] (size=32768, align=64)
// CHECK: buffer a : L1[0] (size=16384, align=64)
// the alloc yielded by the first execute and the outer buffer yielded by the second:
// CHECK: [[A:dma[0-9]+]] = transfer.async(dst=region(a, 0, 16384) {{.*}} src=region(X, 0, 16384) elem=f32, shape=[64, 64], layout=MN)
// CHECK-NEXT: [[B:dma[0-9]+]] = transfer.async(dst=region(b, 0, 16384) {{.*}} src=region(Y, 0, 16384) elem=f32, shape=[64, 64], layout=MN)
// the body arguments %a2, %b2 are regions of a and b; the yielded subview is rows 64.. of o:
// CHECK-NEXT: [[C:add[0-9]+]] = add.async in region(a, 0, 16384) {{.*}}, region(b, 0, 16384) {{.*}} out region(o, 16384, 16384) elem=f32, shape=[64, 64], layout=MN deps=[[[A]], [[B]]]
// the await of %vs needs nothing: its result is the same region of o, which the
// write-back reads after the add:
// CHECK-NEXT: [[D:dma[0-9]+]] = transfer.async(dst=region(Z, 0, 16384) {{.*}} src=region(o, 16384, 16384) elem=f32, shape=[64, 64], layout=MN, deps=[[[C]]])
// CHECK-NEXT: wait([[D]])
// The async ops round-trip through nem-opt in upstream's custom syntax:
// RUN: nem-opt %S/Inputs/async_value_pipeline.mlir | filecheck %s --check-prefix=RT
// RT: %t0, %va = async.execute -> !async.value<memref<64x64xf32, 2{{( : i64)?}}>> {
// RT: async.yield %a : memref<64x64xf32, 2{{( : i64)?}}>
// RT: %t2, %vs = async.execute (%va as %a2: !async.value<memref<64x64xf32, 2{{( : i64)?}}>>, %vb as %b2: !async.value<memref<64x64xf32, 2{{( : i64)?}}>>) -> !async.value<memref<64x64xf32, strided<[64, 1], offset: 4096>, 2{{( : i64)?}}>> {
// RT: %r = async.await %vs : !async.value<memref<64x64xf32, strided<[64, 1], offset: 4096>, 2{{( : i64)?}}>>
//
// A scalar payload that is used has no NEM equivalent: rejected at the
// execute that produces it (the chunks below).
// RUN: nem-opt %s --split-input-file --verify-diagnostics -p 'lower-to-nem{device=npm_pro_x1 split-transfers=false}'

func.func @scalar_await(%X: memref<64xf32>) {
  // expected-error@+1 {{cannot lower 'async.execute': not supported: result #1 of type !async.value<f32> is used; a scalar !async.value has no NEM equivalent (NEM tasks exchange data only through buffers)}}
  %t, %v = async.execute -> !async.value<f32> {
    %c = arith.constant 2.0 : f32
    async.yield %c : f32
  }
  %s = async.await %v : !async.value<f32>
  affine.for %i = 0 to 64 {
    %x = affine.load %X[%i] : memref<64xf32>
    %y = arith.mulf %x, %s : f32
    affine.store %y, %X[%i] : memref<64xf32>
  }
  return
}

// -----

// used only inside another execute's body
func.func @scalar_operand(%X: memref<64xf32>) {
  // expected-error@+1 {{cannot lower 'async.execute': not supported: result #2 of type !async.value<i32> is used}}
  %t, %m, %v = async.execute -> (!async.value<memref<64xf32>>, !async.value<i32>) {
    %c = arith.constant 2 : i32
    async.yield %X, %c : memref<64xf32>, i32
  }
  %t2 = async.execute (%v as %s: !async.value<i32>) {
    affine.for %i = 0 to 64 {
      %x = affine.load %X[%i] : memref<64xf32>
      %f = arith.sitofp %s : i32 to f32
      %y = arith.mulf %x, %f : f32
      affine.store %y, %X[%i] : memref<64xf32>
    }
    async.yield
  }
  async.await %t2 : !async.token
  return
}
