// memref.global + memref.get_global (what -one-shot-bufferize makes of
// tensor constants): one DDR buffer per global, named after it; the initial
// contents go to the weights=FILE.npz archive that nem-run --input loads
// (D-LOW-GLOBAL).  The global syntax is upstream's (mlir-opt round-trips it).
// REQUIRES: mlir-opt
// RUN: mlir-opt %s -o /dev/null
// RUN: nem-opt %s | mlir-opt -o /dev/null
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 weights="%t.npz" remarks=true}' -t nem -o %t.nem 2>&1 | filecheck %s --check-prefix=REMARK
// REMARK: initial contents of w, bias written to {{.*}}.npz
// RUN: filecheck %s < %t.nem
// CHECK: buffer w : DDR (size=24, align=64)
// CHECK: buffer bias : DDR (size=8, align=64)
// CHECK: buffer state : DDR (size=8, align=64)
// CHECK: matmul.async in region(x, 0, 24) elem=f32, shape=[2, 3], layout=MK, region(w, 0, 24) elem=f32, shape=[3, 2], layout=KN
// RUN: nem-opt %t.nem -p nem-verify -o /dev/null 2>&1 | filecheck %s --allow-empty --check-prefix=VERIFY
// VERIFY-NOT: {{.}}
// x = [[1, 1, 1], [0, 1, 2]] (raw f32 bytes), y = x @ w + bias:
// RUN: %python -c "import numpy as np; np.save('%t.x.npy', np.array([[1, 1, 1], [0, 1, 2]], np.float32))"
// RUN: nem-run %t.nem --input %t.npz --input x=%t.x.npy --output y=%t.y.npy --schedules 2
// RUN: %python -c "import numpy as np; print(np.load('%t.y.npy').reshape(-1).tolist())" | filecheck %s --check-prefix=Y
// Y: [9.5, 12.25, 13.5, 16.75]
// Without weights= the contents would be lost: an error at the global.
// RUN: not nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem 2>&1 | filecheck %s --check-prefix=NOW
// NOW: globals.mlir:26:1: error: cannot lower 'memref.global': memref.global @w has initial contents, which a .nem program cannot hold (D-LOW-GLOBAL)
// NOW: fix: pass weights=FILE.npz to lower-to-nem and run with nem-run --input FILE.npz
memref.global "private" constant @w : memref<3x2xf32> = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.5]]> {alignment = 64 : i64}
memref.global "private" constant @bias : memref<2xf32> = dense<[0.5, -0.25]>
memref.global "private" @state : memref<2xf32> = uninitialized
func.func @main(%x: memref<2x3xf32>, %y: memref<2x2xf32>) {
  %w = memref.get_global @w : memref<3x2xf32>
  %b = memref.get_global @bias : memref<2xf32>
  %s = memref.get_global @state : memref<2xf32>
  %w2 = memref.get_global @w : memref<3x2xf32>
  affine.for %i = 0 to 2 {
    affine.for %j = 0 to 2 {
      %bj = affine.load %b[%j] : memref<2xf32>
      affine.store %bj, %y[%i, %j] : memref<2x2xf32>
    }
  }
  affine.for %i = 0 to 2 {
    affine.for %j = 0 to 2 {
      affine.for %k = 0 to 3 {
        %a = affine.load %x[%i, %k] : memref<2x3xf32>
        %c = affine.load %w2[%k, %j] : memref<3x2xf32>
        %acc = affine.load %y[%i, %j] : memref<2x2xf32>
        %p = arith.mulf %a, %c : f32
        %q = arith.addf %acc, %p : f32
        affine.store %q, %y[%i, %j] : memref<2x2xf32>
      }
    }
  }
  affine.for %j = 0 to 2 {
    %v = affine.load %y[0, %j] : memref<2x2xf32>
    affine.store %v, %s[%j] : memref<2xf32>
  }
  return
}
