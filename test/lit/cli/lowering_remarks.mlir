// The lowering's summary remark is opt-in (decision D-OPT-REMARKS): a
// --verify-diagnostics test of a successful lowering needs no expected-remark,
// and the same RUN line FileChecks the lowered program.
// RUN: nem-opt %s --verify-diagnostics -p 'lower-to-nem{device=npm_pro_x1}' -t nem | filecheck %s
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem -o /dev/null 2>&1 | filecheck %s --allow-empty --check-prefix=QUIET
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 remarks=true}' -t nem -o /dev/null 2>&1 | filecheck %s --check-prefix=REMARK
// RUN: nem-opt %s -p 'convert-affine-to-nem{remarks=true}' -t nem -o /dev/null 2>&1 | filecheck %s --check-prefix=REMARK

func.func @add(%X: memref<64xf32>, %Y: memref<64xf32>, %Z: memref<64xf32>) {
  linalg.add ins(%X, %Y : memref<64xf32>, memref<64xf32>) outs(%Z : memref<64xf32>)
  return
}
// CHECK: program add:
// CHECK: add.async in region(X, 0, 256) elem=f32, shape=[64], layout=C, region(Y, 0, 256) elem=f32, shape=[64], layout=C out region(Z, 0, 256)
// REMARK: lowering_remarks.mlir:9:1: remark: lowered @add to NEM; raised: linalg.add at 10:3 -> add; fell back to compute: none
// QUIET-NOT: {{.}}
