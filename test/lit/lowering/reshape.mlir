// memref.collapse_shape / memref.expand_shape of contiguous memrefs are views
// of the same bytes (D-LOW-RESHAPE): no task, the consumers' regions address
// the source buffer with the reshaped shape and strides.  What nem-compile
// emits for ONNX Flatten / Reshape / MatMul on [1, S, D] and grouped convs.
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 remarks=true}' -t nem 2>&1 | filecheck %s
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem -o %t.nem
// RUN: nem-opt %t.nem -p nem-verify -o /dev/null 2>&1 | filecheck %s --allow-empty --check-prefix=VERIFY
// VERIFY-NOT: {{.}}
// RUN: nem-run %t.nem --random-inputs 1 --schedules 2 | filecheck %s --check-prefix=EXEC
// CHECK: remark: lowered @main to NEM; raised: {{.*}} -> matmul
// CHECK: matmul{{[0-9]*}} = matmul.async in region(x, 0, 96) elem=f32, shape=[2, 12], layout=MK, region(w, 0, 240) elem=f32, shape=[12, 5], layout=KN
// the expanded [2, 6] -> [2, 2, 3] view of y, copied into z:
// CHECK: transfer.sync(dst=region(z, 0, 48) elem=f32, shape=[2, 2, 3], layout=CHW, src=region(y2, 0, 48) elem=f32, shape=[2, 2, 3], layout=CHW)
// EXEC: tasks run: 3 per schedule
// EXEC: races: 0 distinct
// EXEC-NEXT: final memory: identical across all schedules
func.func @main(%x: memref<2x3x4xf32>, %w: memref<12x5xf32>, %y: memref<2x5xf32>,
                %y2: memref<2x6xf32>, %z: memref<2x2x3xf32>) {
  %v = memref.collapse_shape %x [[0], [1, 2]] : memref<2x3x4xf32> into memref<2x12xf32>
  affine.for %i = 0 to 2 {
    affine.for %j = 0 to 5 {
      affine.for %k = 0 to 12 {
        %a = affine.load %v[%i, %k] : memref<2x12xf32>
        %b = affine.load %w[%k, %j] : memref<12x5xf32>
        %c = affine.load %y[%i, %j] : memref<2x5xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %y[%i, %j] : memref<2x5xf32>
      }
    }
  }
  %e = memref.expand_shape %y2 [[0], [1, 2]] output_shape [2, 2, 3]
      : memref<2x6xf32> into memref<2x2x3xf32>
  memref.copy %e, %z : memref<2x2x3xf32> to memref<2x2x3xf32>
  return
}
