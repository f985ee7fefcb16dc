// A nest or linalg op whose output overlaps an input read at other points
// stays an escape-hatch task, which runs in MLIR's order (D-LOW-ALIAS):
// raised tasks read every input before they write.  @matmul_into_operand
// and @linalg_matmul_into_operand are the outside report 28's finding 2
// (B[i,j] += A[i,k] * B[k,j]), @carried its finding 4 (A[i+1] = A[i] + A[i]).
// @in_place, @disjoint_halves and @disjoint_subviews are still raised.
func.func @matmul_into_operand(%A: memref<4x4xf32>, %B: memref<4x4xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 4 {
      affine.for %k = 0 to 4 {
        %a = "affine.load"(%A, %i, %k) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<4x4xf32>, index, index) -> f32
        %b = "affine.load"(%B, %k, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<4x4xf32>, index, index) -> f32
        %c = "affine.load"(%B, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<4x4xf32>, index, index) -> f32
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        "affine.store"(%s, %B, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (f32, memref<4x4xf32>, index, index) -> ()
      }
    }
  }
  return
}

func.func @linalg_matmul_into_operand(%A: memref<4x4xf32>, %B: memref<4x4xf32>) {
  linalg.matmul ins(%A, %B : memref<4x4xf32>, memref<4x4xf32>) outs(%B : memref<4x4xf32>)
  return
}

func.func @carried(%A: memref<16xf32>) {
  affine.for %i = 0 to 15 {
    %a = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32>, index) -> f32
    %b = arith.addf %a, %a : f32
    "affine.store"(%b, %A, %i) <{map = affine_map<(d0) -> (d0 + 1)>}> : (f32, memref<16xf32>, index) -> ()
  }
  return
}

func.func @row_broadcast(%A: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %a = "affine.load"(%A, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (memref<4x8xf32>, index, index) -> f32
      %b = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0, 0)>}> : (memref<4x8xf32>, index) -> f32
      %s = arith.addf %a, %b : f32
      "affine.store"(%s, %A, %i, %j) <{map = affine_map<(d0, d1) -> (d0, d1)>}> : (f32, memref<4x8xf32>, index, index) -> ()
    }
  }
  return
}

func.func @in_place(%C: memref<16xf32>, %X: memref<16xf32>) {
  affine.for %i = 0 to 16 {
    %c = "affine.load"(%C, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32>, index) -> f32
    %x = "affine.load"(%X, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32>, index) -> f32
    %p = arith.mulf %c, %x : f32
    %s = arith.addf %p, %c : f32
    "affine.store"(%s, %C, %i) <{map = affine_map<(d0) -> (d0)>}> : (f32, memref<16xf32>, index) -> ()
  }
  return
}

func.func @disjoint_halves(%A: memref<16xf32>) {
  affine.for %i = 0 to 8 {
    %a = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xf32>, index) -> f32
    %b = arith.addf %a, %a : f32
    "affine.store"(%b, %A, %i) <{map = affine_map<(d0) -> (d0 + 8)>}> : (f32, memref<16xf32>, index) -> ()
  }
  return
}

func.func @disjoint_subviews(%A: memref<8x8xf32>) {
  %top = memref.subview %A[0, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  %bottom = memref.subview %A[4, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1], offset: 32>>
  linalg.add ins(%top, %top : memref<4x8xf32, strided<[8, 1]>>, memref<4x8xf32, strided<[8, 1]>>) outs(%bottom : memref<4x8xf32, strided<[8, 1], offset: 32>>)
  return
}
