// linalg.softmax, which xDSL 0.74 lacks, parses in both upstream forms and
// is raised to one NEM softmax task (D-LOW-SOFTMAX); where the device has no
// softmax variant for the element type (no shipped device has f32) it is a
// located error naming the fix, not an escape-hatch kernel (the kernel
// interpreter has no linalg.softmax either).
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 remarks=true entry=custom}' -t nem 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=REMARK < %t.err
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 entry=generic}' -t nem | filecheck %s --check-prefix=GENERIC
// RUN: not nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 entry=wide}' -t nem 2>&1 | filecheck %s --check-prefix=F32

func.func @custom(%x: memref<4x16xf16, 2>, %y: memref<4x16xf16, 2>) {
  linalg.softmax dimension(1) ins(%x : memref<4x16xf16, 2>) outs(%y : memref<4x16xf16, 2>)
  return
}
// CHECK: softmax1 = softmax.async in region(x, 0, 128) elem=f16, shape=[4, 16]{{.*}} out region(y, 0, 128) elem=f16, shape=[4, 16]{{.*}} axis=1
// REMARK: remark: lowered @custom to NEM; raised: linalg.softmax at 12:3 -> softmax; fell back to compute: none

func.func @generic(%x: memref<4x16xf16, 2>, %y: memref<4x16xf16, 2>) {
  "linalg.softmax"(%x, %y) <{dimension = 0 : i64}> : (memref<4x16xf16, 2>, memref<4x16xf16, 2>) -> ()
  return
}
// GENERIC: softmax1 = softmax.async in region(x, 0, 128) elem=f16, shape=[4, 16]{{.*}} axis=0

func.func @wide(%x: memref<4x16xf32, 2>, %y: memref<4x16xf32, 2>) {
  linalg.softmax dimension(1) ins(%x : memref<4x16xf32, 2>) outs(%y : memref<4x16xf32, 2>)
  return
}
// F32: linalg_softmax.mlir:25:3: error: cannot lower 'linalg.softmax': not supported: no softmax variant for f32 on device npm_pro_x1 (D-LOW-SOFTMAX)
// F32: fix: decompose it upstream first
