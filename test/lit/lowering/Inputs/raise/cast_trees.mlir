// Elementwise bodies that mix casts into a larger tree (D-LOW-CAST-TREE),
// as nem-compile's importer writes them for f16 models (statistics in
// f32, D-COMPILE-F16), tiled by the affine route; then near misses.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @softmax_exp(%x: memref<1x2x8xf16>, %m: memref<1x2x1xf16>, %e: memref<1x2x8xf32>) {
  %cst_2 = arith.constant 0.353553385 : f32
  affine.for %arg13 = 0 to 1 {
    affine.for %arg14 = 0 to 2 {
      affine.for %arg15 = 0 to 8 {
        %0 = affine.load %x[%arg13, %arg14, %arg15] : memref<1x2x8xf16>
        %1 = affine.load %m[%arg13, %arg14, 0] : memref<1x2x1xf16>
        %2 = arith.extf %0 : f16 to f32
        %3 = arith.extf %1 : f16 to f32
        %4 = arith.subf %2, %3 : f32
        %5 = arith.mulf %4, %cst_2 : f32
        %6 = math.exp %5 : f32
        affine.store %6, %e[%arg13, %arg14, %arg15] : memref<1x2x8xf32>
      }
    }
  }
  return
}
func.func @softmax_div(%e: memref<1x2x8xf32>, %s: memref<1x2x1xf32>, %y: memref<1x2x8xf16>) {
  affine.for %arg13 = 0 to 1 {
    affine.for %arg14 = 0 to 2 {
      affine.for %arg15 = 0 to 8 {
        %0 = affine.load %e[%arg13, %arg14, %arg15] : memref<1x2x8xf32>
        %1 = affine.load %s[%arg13, %arg14, 0] : memref<1x2x1xf32>
        %2 = arith.divf %0, %1 : f32
        %3 = arith.truncf %2 : f32 to f16
        affine.store %3, %y[%arg13, %arg14, %arg15] : memref<1x2x8xf16>
      }
    }
  }
  return
}
func.func @layer_norm(%x: memref<1x2x16xf16>, %sum: memref<1x2x1xf32>, %sq: memref<1x2x1xf32>,
                      %g: memref<16xf16>, %b: memref<16xf16>, %y: memref<1x2x16xf16>) {
  %cst_5 = arith.constant 9.99999974E-6 : f32
  %cst_6 = arith.constant 6.250000e-02 : f32
  affine.for %arg13 = 0 to 1 {
    affine.for %arg14 = 0 to 2 {
      affine.for %arg15 = 0 to 16 {
        %0 = affine.load %x[%arg13, %arg14, %arg15] : memref<1x2x16xf16>
        %1 = affine.load %sum[%arg13, %arg14, 0] : memref<1x2x1xf32>
        %2 = affine.load %sq[%arg13, %arg14, 0] : memref<1x2x1xf32>
        %3 = affine.load %g[%arg15] : memref<16xf16>
        %4 = affine.load %b[%arg15] : memref<16xf16>
        %5 = arith.mulf %2, %cst_6 : f32
        %6 = arith.addf %5, %cst_5 : f32
        %7 = math.rsqrt %6 : f32
        %8 = arith.extf %0 : f16 to f32
        %9 = arith.mulf %1, %cst_6 : f32
        %10 = arith.subf %8, %9 : f32
        %11 = arith.mulf %10, %7 : f32
        %12 = arith.extf %3 : f16 to f32
        %13 = arith.mulf %11, %12 : f32
        %14 = arith.extf %4 : f16 to f32
        %15 = arith.addf %13, %14 : f32
        %16 = arith.truncf %15 : f32 to f16
        affine.store %16, %y[%arg13, %arg14, %arg15] : memref<1x2x16xf16>
      }
    }
  }
  return
}
func.func @acc_extf(%x: memref<4x8xf16>, %y: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %0 = affine.load %x[%i, %j] : memref<4x8xf16>
      %1 = affine.load %y[%i, %j] : memref<4x8xf32>
      %2 = arith.extf %0 : f16 to f32
      %3 = arith.addf %1, %2 : f32
      affine.store %3, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}
func.func @generic_mix(%a: memref<4x8xf16>, %c: memref<4x8xf32>, %y: memref<4x8xf16>) {
  linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %c : memref<4x8xf16>, memref<4x8xf32>) outs(%y : memref<4x8xf16>) {
  ^bb0(%in: f16, %in_0: f32, %out: f16):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.mulf %0, %in_0 : f32
    %2 = math.tanh %1 : f32
    %3 = arith.truncf %2 : f32 to f16
    linalg.yield %3 : f16
  }
  return
}
// Near misses: a reduction (row sum, as the importer's softmax/layer norm
// statistics), a cast NEM rounds otherwise, a rounding mode.
func.func @row_sum(%x: memref<1x2x16xf16>, %s: memref<1x2x1xf32>) {
  affine.for %arg13 = 0 to 1 {
    affine.for %arg14 = 0 to 2 {
      affine.for %arg15 = 0 to 16 {
        %0 = affine.load %x[%arg13, %arg14, %arg15] : memref<1x2x16xf16>
        %1 = affine.load %s[%arg13, %arg14, 0] : memref<1x2x1xf32>
        %2 = arith.extf %0 : f16 to f32
        %3 = arith.addf %1, %2 : f32
        affine.store %3, %s[%arg13, %arg14, 0] : memref<1x2x1xf32>
      }
    }
  }
  return
}
func.func @fptosi_tree(%x: memref<16xf16>, %y: memref<16xi8>) {
  %c = arith.constant 2.000000e+00 : f32
  affine.for %i = 0 to 16 {
    %0 = affine.load %x[%i] : memref<16xf16>
    %1 = arith.extf %0 : f16 to f32
    %2 = arith.mulf %1, %c : f32
    %3 = arith.fptosi %2 : f32 to i8
    affine.store %3, %y[%i] : memref<16xi8>
  }
  return
}
func.func @truncf_downward(%x: memref<16xf16>, %y: memref<16xf16>) {
  affine.for %i = 0 to 16 {
    %0 = affine.load %x[%i] : memref<16xf16>
    %1 = arith.extf %0 : f16 to f32
    %2 = math.exp %1 : f32
    %3 = arith.truncf %2 {roundingmode = 1 : i32} : f32 to f16
    affine.store %3, %y[%i] : memref<16xf16>
  }
  return
}
