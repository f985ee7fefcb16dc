// linalg.generic ops whose body only yields an input or a constant, as the
// transform-dialect route leaves layout changes, bias broadcasts and padding
// fills (D-LOW-BCAST, D-LOW-COPYNEST, D-LOW-FILL): transfers and clamps.
// @in_place is a near miss (a copy within one buffer).
#nchw = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#to_nhwc = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1, d2)>
#chan = affine_map<(d0, d1, d2, d3) -> (d3)>
func.func @transpose(%x: memref<1x3x4x4xf32>, %y: memref<1x4x4x3xf32>) {
  linalg.generic {indexing_maps = [#to_nhwc, #nchw],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<1x3x4x4xf32>) outs(%y : memref<1x4x4x3xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

func.func @bias(%b: memref<8xf32>, %y: memref<1x2x2x8xf32>) {
  linalg.generic {indexing_maps = [#chan, #nchw],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%b : memref<8xf32>) outs(%y : memref<1x2x2x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @copy(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

func.func @fill(%y: memref<4x8xf32>) {
  %c = arith.constant 1.5 : f32
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<4x8xf32>) {
  ^bb0(%out: f32):
    linalg.yield %c : f32
  }
  return
}

func.func @in_place(%x: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%x : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

// Broadcasts along a dimension stored inside a copied one (ONNX Expand
// [3,1] -> [2,3,2]): doubling in place would copy between interleaved byte
// extents (HAZ-02), so the innermost one is one concat; @two_inner (two such
// dimensions) and @long_inner (more copies than one concat takes) broadcast
// into a scratch first.
#inner_src = affine_map<(d0, d1, d2) -> (d1, 0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @inner(%x: memref<3x1xf32>, %y: memref<2x3x2xf32>) {
  linalg.generic {indexing_maps = [#inner_src, #id3],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<3x1xf32>) outs(%y : memref<2x3x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

#two_src = affine_map<(d0, d1, d2, d3, d4) -> (d1, d3)>
#id5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
func.func @two_inner(%x: memref<3x4xf32>, %y: memref<2x3x2x4x2xf32>) {
  linalg.generic {indexing_maps = [#two_src, #id5],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<3x4xf32>) outs(%y : memref<2x3x2x4x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

#long_src = affine_map<(d0, d1) -> (d0)>
func.func @long_inner(%x: memref<3xf32>, %y: memref<3x1100xf32>) {
  linalg.generic {indexing_maps = [#long_src, #id],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<3xf32>) outs(%y : memref<3x1100xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

// Two levels of concats (D-LOW-BCAST-CONCAT): 17 copies (prime) are a concat
// of 5, one of 2 blocks of 5 and a transfer of the last 2; 112 are a concat
// of 7 more copies of the row and one of 13 blocks of 8.
#lev_src = affine_map<(d0, d1, d2) -> (d2)>
func.func @levels(%x: memref<4xf32>, %y: memref<112x17x4xf32>) {
  linalg.generic {indexing_maps = [#lev_src, #id3],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<4xf32>) outs(%y : memref<112x17x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}
