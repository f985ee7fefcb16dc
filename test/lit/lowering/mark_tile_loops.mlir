// nem-mark-tile-loops (D-LOW-TILES, D-LOW-AFFINE): the loops the conversion keeps as NEM loops around
// raised tiles are marked nem_lowering.tile_loop, decided on their bodies as written, before
// nem-fold-index-arith, which then folds their index arithmetic too; the conversion reads the mark. A
// loop whose decision needs what the walk does not evaluate is left unmarked (and unfolded) to it.
// RUN: nem-opt %s --split-input-file -p 'nem-mark-tile-loops,nem-fold-index-arith' | filecheck %s
// RUN: nem-opt %s --split-input-file -p 'lower-to-nem{device=npm_pro_x1}' -t nem | filecheck %s --check-prefix=NEM

// A tile loop (a step of 8 around a point nest): marked, its arith folded.
// CHECK-LABEL: func.func @tiles(
// CHECK:        affine.for %t = 0 to 32 step 8 {
// CHECK-NEXT:     %o = affine.apply affine_map<(d0) -> ((d0 + d0))> (%t)
// CHECK:        } {nem_lowering.tile_loop}
// NEM-LABEL:  program tiles:
// NEM:        loop t in [0..3]:
// NEM-NEXT:     compute1 = compute.async {{.*}} index_args=[t * 16, t * 8]
func.func @tiles(%A: memref<32xf32>, %B: memref<32xf32>) {
  affine.for %t = 0 to 32 step 8 {
    %o = arith.addi %t, %t : index
    affine.for %i = 0 to 8 {
      %a = affine.load %A[31 - %i] : memref<32xf32>
      affine.store %a, %B[%o + %i - %t] : memref<32xf32>
    }
  }
  return
}

// -----

// A tile loop in a tile loop, decided on the outer body's arith, evaluated
// as the conversion's handler evaluates it: both marked, both bodies folded.
// CHECK-LABEL: func.func @nested(
// CHECK:        %o = affine.apply affine_map<(d0) -> ((d0 + d0))> (%t)
// CHECK-NEXT:   affine.for %u = 0 to 16 step 8 {
// CHECK-NEXT:     %p = affine.apply affine_map<(d0, d1) -> ((d0 + (d1 + d1)))> (%u, %t)
// CHECK:          } {nem_lowering.tile_loop}
// CHECK-NEXT:   } {nem_lowering.tile_loop}
// NEM-LABEL:  program nested:
// NEM:        loop t in [0..1]:
// NEM:          loop u in [0..1]:
// NEM-NEXT:       copy1 = transfer.async(dst=region(B, t * 64 + u * 32, 32)
func.func @nested(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %t = 0 to 32 step 16 {
    %o = arith.addi %t, %t : index
    affine.for %u = 0 to 16 step 8 {
      %p = arith.addi %u, %o : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[%i + %t + %u] : memref<64xf32>
        affine.store %a, %B[%p + %i - %t] : memref<64xf32>
      }
    }
  }
  return
}

// -----

// A unit-step loop that is a tile loop because match_nest does not evaluate
// its arith.addi offset: decided on the body as written and marked; the
// folded body would be one raisable nest (as @nest below), so the
// conversion reads the mark: one copy per row, as before the fold.
// CHECK-LABEL: func.func @raisable_once_folded(
// CHECK:        affine.for %t = 0 to 4 {
// CHECK-NEXT:     %o = affine.apply affine_map<(d0) -> (d0)> (%t)
// CHECK:        } {nem_lowering.tile_loop}
// NEM-LABEL:  program raisable_once_folded:
// NEM:        loop t in [0..3]:
// NEM-NEXT:     copy1 = transfer.async(dst=region(B, t * 32, 32) elem=f32, shape=[8]
func.func @raisable_once_folded(%A: memref<4x8xf32>, %B: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  affine.for %t = 0 to 4 {
    %o = arith.addi %t, %c0 : index
    affine.for %i = 0 to 8 {
      %a = affine.load %A[%t, %i] : memref<4x8xf32>
      affine.store %a, %B[%o, %i] : memref<4x8xf32>
    }
  }
  return
}

// -----

// A raisable nest: not a tile loop, not marked.
// CHECK-LABEL: func.func @nest(
// CHECK-NOT:    nem_lowering.tile_loop
// CHECK:        func.return
// NEM-LABEL:  program nest:
// NEM:        copy1 = transfer.async(dst=region(B, 0, 128) elem=f32, shape=[4, 8]
func.func @nest(%A: memref<4x8xf32>, %B: memref<4x8xf32>) {
  affine.for %t = 0 to 4 {
    affine.for %i = 0 to 8 {
      %a = affine.load %A[%t, %i] : memref<4x8xf32>
      affine.store %a, %B[%t, %i] : memref<4x8xf32>
    }
  }
  return
}

// -----

// A loop using an index value the walk does not evaluate (a min): left
// unmarked, its arith as written, for the conversion to decide (a tile loop).
// CHECK-LABEL: func.func @undecided(
// CHECK-NOT:    nem_lowering.tile_loop
// CHECK:          %o = arith.addi %t, %m : index
// CHECK-NOT:    nem_lowering.tile_loop
// CHECK:        func.return
// NEM-LABEL:  program undecided:
// NEM:        loop t in [0..3]:
func.func @undecided(%A: memref<32xf32>, %B: memref<32xf32>) {
  %m = affine.min affine_map<() -> (8, 16)>()
  affine.for %t = 0 to 32 step 8 {
    %o = arith.addi %t, %m : index
    affine.for %i = 0 to 8 {
      %a = affine.load %A[31 - %i] : memref<32xf32>
      affine.store %a, %B[%o + %i - %t - 8] : memref<32xf32>
    }
  }
  return
}
