// An identity-map, all-parallel linalg.generic whose body is a tree of
// elementwise ops over its operands is raised, one task per op, inner results
// in hoisted scratch buffers (D-LOW-RAISE); a scalar constant operand is a
// splat (D-LOW-SPLAT), except for ops where it would change what a NaN
// gives (escape hatch); a memref with an explicit identity
// affine-map layout is a plain buffer.
// RUN: nem-opt %s --split-input-file -p 'lower-to-nem{device=npm_pro_x1 remarks=true}' -t nem 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=REMARK < %t.err

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @add(%X: memref<64x32xf32, #id>, %Y: memref<64x32xf32>, %Z: memref<64x32xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%X, %Y : memref<64x32xf32, #id>, memref<64x32xf32>) outs(%Z : memref<64x32xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}
// REMARK: remark: lowered @add to NEM; raised: linalg.generic at {{[0-9]+}}:3 -> add; fell back to compute: none
// CHECK: buffer X : DDR (size=8192, align=64)
// CHECK: add.async in region(X, 0, 8192) elem=f32, shape=[64, 32], layout=MN, region(Y, 0, 8192) elem=f32, shape=[64, 32], layout=MN out region(Z, 0, 8192) elem=f32, shape=[64, 32], layout=MN

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @addrelu(%X: memref<64x32xf32>, %Y: memref<64x32xf32>, %Z: memref<64x32xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%X, %Y : memref<64x32xf32>, memref<64x32xf32>) outs(%Z : memref<64x32xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %s = arith.addf %x, %y : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  }
  return
}
// REMARK: remark: lowered @addrelu to NEM; raised: linalg.generic at {{[0-9]+}}:3 -> add + relu; fell back to compute: none
// The add computes in Z, which no input reads, and the relu in place over it
// (D-LOW-TREE-INPLACE): no scratch buffer.
// CHECK-NOT: buffer DDR_tmp
// CHECK: [[A:add[0-9]+]] = add.async in region(X, 0, 8192) elem=f32, shape=[64, 32], layout=MN, region(Y, 0, 8192) elem=f32, shape=[64, 32], layout=MN out region(Z, 0, 8192)
// CHECK-NEXT: relu.async in region(Z, 0, 8192) elem=f32, shape=[64, 32], layout=MN out region(Z, 0, 8192) elem=f32, shape=[64, 32], layout=MN deps=[[[A]]]

// -----

// A tree with a leaf that reads the output Z: its chain does not compute in Z
// (only where no leaf reads the output's buffer, D-LOW-TREE-INPLACE): the add
// writes one scratch buffer, the exp computes in place over it, the relu
// writes Z.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @addrelu_in_place(%X: memref<64x32xf32>, %Z: memref<64x32xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%X, %Z : memref<64x32xf32>, memref<64x32xf32>) outs(%Z : memref<64x32xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %s = arith.addf %x, %y : f32
    %e = math.exp %s : f32
    %zero = arith.constant 0.0 : f32
    %r = arith.maximumf %e, %zero : f32
    linalg.yield %r : f32
  }
  return
}
// REMARK: remark: lowered @addrelu_in_place to NEM; raised: linalg.generic at {{[0-9]+}}:3 -> add + exp + relu; fell back to compute: none
// CHECK: buffer [[T:DDR_tmp[0-9]+]] : DDR (size=8192, align=64)
// CHECK-NOT: buffer DDR_tmp
// CHECK: [[A:add[0-9]+]] = add.async in region(X, 0, 8192) elem=f32, shape=[64, 32], layout=MN, region(Z, 0, 8192) elem=f32, shape=[64, 32], layout=MN out region([[T]], 0, 8192)
// CHECK-NEXT: [[E:exp[0-9]+]] = exp.async in region([[T]], 0, 8192) elem=f32, shape=[64, 32], layout=MN out region([[T]], 0, 8192)
// CHECK-NEXT: relu.async in region([[T]], 0, 8192) elem=f32, shape=[64, 32], layout=MN out region(Z, 0, 8192) elem=f32, shape=[64, 32], layout=MN deps=[[[E]]]

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @scale(%X: memref<64x32xf32>, %Z: memref<64x32xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%X : memref<64x32xf32>) outs(%Z : memref<64x32xf32>) {
  ^bb0(%x: f32, %z: f32):
    %two = arith.constant 2.0 : f32
    %r = arith.mulf %x, %two : f32
    linalg.yield %r : f32
  }
  return
}
// REMARK: remark: lowered @scale to NEM; raised: linalg.generic at {{[0-9]+}}:3 -> clamp + mul; fell back to compute: none{{$}}
// CHECK: clamp1 = clamp.async in region(X, 0, 8192) elem=f32, shape=[64, 32], layout=MN out region(DDR_tmp0, 0, 8192) elem=f32, shape=[64, 32], layout=MN min=2.0 max=2.0
// CHECK-NEXT: mul2 = mul.async in region(X, 0, 8192) elem=f32, shape=[64, 32], layout=MN, region(DDR_tmp0, 0, 8192) elem=f32, shape=[64, 32], layout=MN out region(Z, 0, 8192)

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @maxnum(%X: memref<64x32xf32>, %Z: memref<64x32xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%X : memref<64x32xf32>) outs(%Z : memref<64x32xf32>) {
  ^bb0(%x: f32, %z: f32):
    %two = arith.constant 2.0 : f32
    %r = arith.maxnumf %x, %two : f32
    linalg.yield %r : f32
  }
  return
}
// REMARK: remark: lowered @maxnum to NEM; raised: none; fell back to compute: linalg.generic at [[G:[0-9]+]]:3{{$}}
// REMARK: remark: linalg.generic at [[G]]:3 not raised, runs as an escape-hatch task (compute op="mlir.kernel"): 'arith.maxnumf' in the linalg.generic body (it returns the non-NaN operand, NEM max/min propagate a NaN: D-LOW-MAXNUM){{$}}
// CHECK: compute.async in region(X, 0, 8192) {{.*}} op="mlir.kernel"
