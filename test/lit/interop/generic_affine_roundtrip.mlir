// nem-opt's generic form of affine IR is upstream MLIR: an access's loop
// indices are dims of its map and `symbol(%n)` a symbol, as upstream reads
// them (D-XDSL-AFFINE-SSA; xDSL 0.74 made every index a symbol, which
// mlir-opt rejects: "operand cannot be used as a symbol").
//
// REQUIRES: mlir-opt
// RUN: mlir-opt %s -o %t.upstream.mlir
// RUN: nem-opt %s --print-op-generic | mlir-opt | diff %t.upstream.mlir -
// RUN: nem-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// mlir-opt's generic form reads back into the same program
// RUN: mlir-opt %s --mlir-print-op-generic | nem-opt - --print-op-generic | mlir-opt | diff %t.upstream.mlir -
// and nem-opt's custom form too
// RUN: nem-opt %s | mlir-opt | diff %t.upstream.mlir -
// RUN: nem-opt %s | mlir-opt | nem-opt - | filecheck %s

// GENERIC: "affine.load"(%A, %i, %k) <{map = affine_map<(d0, d1) -> (d0, d1)>}>
// GENERIC: "affine.store"(%s, %C, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}>
// GENERIC: "affine.load"(%A, %i, %n, %c0) <{map = affine_map<(d0)[s0, s1] -> ((d0 + s0), ((s1 * 2) + d0))>}>
// GENERIC: "affine.store"(%v, %A, %i, %c0) <{map = affine_map<(d0)[s0] -> (s0, (d0 floordiv 2))>}>

// CHECK: affine.load %{{.*}}[%[[I:[a-z0-9_]+]], %{{[a-z0-9_]+}}] : memref<64x32xf32>
// CHECK: affine.store %{{.*}}, %{{.*}}[%[[I]], %{{[a-z0-9_]+}}] : memref<64x48xf32>
// CHECK: affine.load %{{.*}}[%[[J:[a-z0-9_]+]] + symbol(%{{.*}}), %[[J]] + symbol(%{{.*}}) * 2] : memref<64x32xf32>
// CHECK: affine.store %{{.*}}, %{{.*}}[symbol(%{{.*}}), %[[J]] floordiv 2] : memref<64x32xf32>

func.func @matmul(%A: memref<64x32xf32>, %B: memref<32x48xf32>, %C: memref<64x48xf32>) {
  affine.for %i = 0 to 64 {
    affine.for %j = 0 to 48 {
      affine.for %k = 0 to 32 {
        %a = affine.load %A[%i, %k] : memref<64x32xf32>
        %b = affine.load %B[%k, %j] : memref<32x48xf32>
        %c = affine.load %C[%i, %j] : memref<64x48xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<64x48xf32>
      }
    }
  }
  return
}

func.func @symbols(%A: memref<64x32xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  affine.for %i = 0 to 32 {
    %v = affine.load %A[%i + symbol(%n), symbol(%c0) * 2 + %i] : memref<64x32xf32>
    affine.store %v, %A[symbol(%c0), %i floordiv 2] : memref<64x32xf32>
  }
  return
}
