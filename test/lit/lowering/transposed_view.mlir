// A static memref.reinterpret_cast of a whole buffer is a view of its bytes
// with the cast's shape and strides (D-LOW-VIEW): what nem-compile makes of
// an NCHW graph input that a convolution reads as NHWC (D-COMPILE-LAYOUT,
// session 26). The copy into z transposes x on its way: one transfer whose
// source steps along x's channels 6 elements apart.
// nem-rewrite-views makes it a nem_lowering.view before the conversion (D-LOW-VIEW-OP):
// RUN: nem-opt %s -p nem-rewrite-views | filecheck %s --check-prefix=VIEW
// VIEW: "nem_lowering.view"(%x) <{shape = array<i64: 1, 2, 3, 4>, strides = array<i64: 24, 3, 1, 6>, replaces = "memref.reinterpret_cast"}> : (memref<1x4x2x3xf32>) -> memref<1x2x3x4xf32, strided<[24, 3, 1, 6]>>
// VIEW-NOT: reinterpret_cast
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem -o %t.nem
// RUN: filecheck %s < %t.nem
// RUN: nem-opt %t.nem -p nem-verify -o /dev/null 2>&1 | filecheck %s --allow-empty --check-prefix=VERIFY
// VERIFY-NOT: {{.}}
// RUN: nem-run %t.nem --random-inputs 1 --schedules 2 | filecheck %s --check-prefix=EXEC
// CHECK: transfer.sync(dst=region(z, 0, 96) elem=f32, shape=[1, 2, 3, 4], layout=NHWC, src=region(x, 0, 96) elem=f32, shape=[1, 2, 3, 4], strides=[24, 3, 1, 6])
// EXEC: races: 0 distinct
// EXEC-NEXT: final memory: identical across all schedules
func.func @main(%x: memref<1x4x2x3xf32>, %z: memref<1x2x3x4xf32>) {
  %v = memref.reinterpret_cast %x to offset: [0], sizes: [1, 2, 3, 4], strides: [24, 3, 1, 6]
      : memref<1x4x2x3xf32> to memref<1x2x3x4xf32, strided<[24, 3, 1, 6]>>
  memref.copy %v, %z : memref<1x2x3x4xf32, strided<[24, 3, 1, 6]>> to memref<1x2x3x4xf32>
  return
}
