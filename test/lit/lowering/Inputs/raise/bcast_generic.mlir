// Elementwise linalg.generic ops with a broadcast operand, as linalg
// (torch-mlir, tosa-to-linalg, nem-compile's importer) writes them: a bias
// add over NCHW, a shift by a row statistic, a 1xN operand read with a
// constant 0 index.  Each operand is copied to the output's shape, then the
// ops run (D-LOW-BCAST-OPERAND, D-LOW-RAISE).  @transposed and @reduction
// are near misses that stay escape-hatch tasks; @two_outputs is one tree per
// output, @reads_other_output a near miss (z reads the y that exp overwrites).
#nchw = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#chan = affine_map<(d0, d1, d2, d3) -> (d1)>
func.func @bias_relu(%x: memref<1x8x4x4xf32>, %b: memref<8xf32>, %y: memref<1x8x4x4xf32>) {
  linalg.generic {indexing_maps = [#nchw, #chan, #nchw],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %b : memref<1x8x4x4xf32>, memref<8xf32>) outs(%y : memref<1x8x4x4xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %s = arith.addf %v, %c : f32
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %s, %z : f32
    linalg.yield %r : f32
  }
  return
}

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @shift_exp(%x: memref<4x8xf32>, %m: memref<4xf32>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<4x8xf32>, memref<4xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %d = arith.subf %v, %c : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  }
  return
}

#first = affine_map<(d0, d1) -> (0, d1)>
func.func @unit_row(%x: memref<4x8xf32>, %g: memref<1x8xf32>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #first, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %g : memref<4x8xf32>, memref<1x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %p = arith.mulf %v, %c : f32
    linalg.yield %p : f32
  }
  return
}

#t = affine_map<(d0, d1) -> (d1, d0)>
func.func @transposed(%x: memref<4x4xf32>, %u: memref<4x4xf32>, %y: memref<4x4xf32>) {
  linalg.generic {indexing_maps = [#id, #t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %u : memref<4x4xf32>, memref<4x4xf32>) outs(%y : memref<4x4xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %s = arith.addf %v, %c : f32
    linalg.yield %s : f32
  }
  return
}

func.func @reduction(%x: memref<4x8xf32>, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %o : f32
    linalg.yield %s : f32
  }
  return
}

func.func @two_outputs(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %z: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y, %z : memref<4x8xf32>, memref<4x8xf32>) {
  ^bb0(%v: f32, %a: f32, %b: f32):
    %e = math.exp %v : f32
    %n = arith.negf %v : f32
    linalg.yield %e, %n : f32, f32
  }
  return
}

func.func @reads_other_output(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %z: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y, %z : memref<4x8xf32>, memref<4x8xf32>) {
  ^bb0(%v: f32, %a: f32, %b: f32):
    %e = math.exp %v : f32
    %s = arith.addf %v, %a : f32
    linalg.yield %e, %s : f32, f32
  }
  return
}
