// A nest that is neither a matmul nor a tree of elementwise ops over loads
// (here: maxnumf, which drops NaNs: D-LOW-MAXNUM) becomes a
// `compute` escape-hatch task carrying its kernel (generic MLIR text), with
// the outer index values as index_args; linalg named ops are raised.
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 remarks=true}' -t nem 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=REMARK < %t.err
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem 2>/dev/null | nem-opt -f nem -p nem-verify-static -o /dev/null

func.func @fma(%X: memref<128x64xf32>, %Z: memref<128x64xf32>, %W: memref<32x32xf32>, %V: memref<32x32xf32>) {
  %c0 = arith.constant 0 : index
  %n = arith.constant 2048 : index
  %x = memref.alloc() : memref<32x64xf32, 2>
  %z = memref.alloc() : memref<32x64xf32, 2>
  %tag = memref.alloc() : memref<2xi32>
  affine.for %t = 0 to 128 step 32 {
    affine.dma_start %X[%t, %c0], %x[%c0, %c0], %tag[0], %n : memref<128x64xf32>, memref<32x64xf32, 2>, memref<2xi32>
    affine.dma_wait %tag[0], %n : memref<2xi32>
    affine.for %i = 0 to 32 {
      affine.for %j = 0 to 64 {
        %a = affine.load %x[%i, %j] : memref<32x64xf32, 2>
        %p = arith.mulf %a, %a : f32
        %h = arith.constant 0.5 : f32
        %s = arith.maxnumf %p, %h : f32
        affine.store %s, %z[%i, %j] : memref<32x64xf32, 2>
      }
    }
    affine.dma_start %z[%c0, %c0], %Z[%t, %c0], %tag[1], %n : memref<32x64xf32, 2>, memref<128x64xf32>, memref<2xi32>
    affine.dma_wait %tag[1], %n : memref<2xi32>
  }
  linalg.add ins(%W, %W : memref<32x32xf32>, memref<32x32xf32>) outs(%V : memref<32x32xf32>)
  linalg.matmul ins(%W, %W : memref<32x32xf32>, memref<32x32xf32>) outs(%V : memref<32x32xf32>)
  return
}
// CHECK: loop t in [0..3]:
// CHECK: [[T:dma[0-9]+]] = transfer.async(dst=region(x, 0, 8192) elem=f32, shape=[32, 64], layout=MN, src=region(X, t * 8192, 8192) elem=f32, shape=[2048], layout=C)
// CHECK-NEXT: [[K:compute[0-9]+]] = compute.async in region(x, 0, 8192) elem=f32, shape=[32, 64], layout=MN out region(z, 0, 8192) elem=f32, shape=[32, 64], layout=MN deps=[[[T]]] op="mlir.kernel" kernel="\"func.func\"() <{{.*}}function_type = (memref<32x64xf32>, memref<32x64xf32>) -> ()
// CHECK-SAME: \"arith.mulf\"
// CHECK-NEXT: transfer.async(dst=region(Z, t * 8192, 8192) {{.*}} deps=[[[K]]])
// CHECK: add.async in region(W, 0, 4096) elem=f32, shape=[32, 32], layout=MN, region(W, 0, 4096) elem=f32, shape=[32, 32], layout=MN out region(V, 0, 4096)
// CHECK: matmul.async in region(W, 0, 4096) elem=f32, shape=[32, 32], layout=MK, region(W, 0, 4096) elem=f32, shape=[32, 32], layout=KN out region(DDR_acc
// REMARK: remark: lowered @fma to NEM; raised: linalg.add at {{.*}} -> add, linalg.matmul at {{.*}} -> matmul + add (accumulation); fell back to compute: loop nest at [[NEST:[0-9]+:[0-9]+]]{{$}}
// REMARK: fallback_and_linalg.mlir:[[NEST]]: remark: loop nest at [[NEST]] not raised, runs as an escape-hatch task (compute op="mlir.kernel"): 'arith.maxnumf' in the nest body (it returns the non-NaN operand, NEM max/min propagate a NaN: D-LOW-MAXNUM){{$}}
