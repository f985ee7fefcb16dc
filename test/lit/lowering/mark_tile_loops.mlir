// nem-mark-tile-loops (D-LOW-TILES, D-LOW-AFFINE): the loops the conversion keeps as NEM loops around
// raised tiles are marked nem_lowering.tile_loop, decided on their bodies as written, before
// nem-fold-index-arith, which then folds their index arithmetic too; the conversion reads the mark. A
// loop lowered in several copies (peeled, re-rolled) is decided in each and marked when all agree; a
// loop the walk does not decide in every copy (a value it does not evaluate) is left unmarked (and
// unfolded) to the conversion.
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

// A tile loop using an affine.min from outside, which the walk evaluates as
// the conversion does (session 32): marked, its arith folded.
// CHECK-LABEL: func.func @min_outside(
// CHECK:          %o = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%t, %m)
// CHECK:        } {nem_lowering.tile_loop}
// NEM-LABEL:  program min_outside:
// NEM:        loop t in [0..3]:
func.func @min_outside(%A: memref<32xf32>, %B: memref<32xf32>) {
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

// -----

// A tile loop in an async.execute body (lowered in place), its offset an
// async payload awaited outside: marked, its arith folded, the payload a
// leaf of the map like a loop variable.
// CHECK-LABEL: func.func @async_payload(
// CHECK:          %o = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%t, %w)
// CHECK:        } {nem_lowering.tile_loop}
// NEM-LABEL:  program async_payload:
// NEM:        loop t in [0..3]:
// NEM-NEXT:     compute1 = compute.async {{.*}} index_args=[t * 8 + 8, t * 8]
func.func @async_payload(%A: memref<64xf32>, %B: memref<64xf32>) {
  %c8 = arith.constant 8 : index
  %tok, %v = async.execute -> !async.value<index> {
    async.yield %c8 : index
  }
  %tok2 = async.execute [%tok] {
    %w = async.await %v : !async.value<index>
    affine.for %t = 0 to 32 step 8 {
      %o = arith.addi %t, %w : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[31 - %i] : memref<64xf32>
        affine.store %a, %B[%o + %i - %t] : memref<64xf32>
      }
    }
    async.yield
  }
  async.await %tok2 : !async.token
  return
}

// -----

// A tile loop in a loop that may be peeled (its last tile is partial): the
// conversion lowers the body once per copy (the full tiles with %T a loop
// variable, then the last with %T = 32); the walk decides %t in each copy,
// both decide it a tile loop (session 33): marked, its arith folded.
// CHECK-LABEL: func.func @peeled(
// CHECK:          affine.for %t = 0 to min
// CHECK-NEXT:       %o = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%t, %T)
// CHECK:          } {nem_lowering.tile_loop}
// CHECK-NEXT:   } {nem_lowering.tile_loop}
// NEM-LABEL:  program peeled:
// NEM:        loop T in [0..1]:
// NEM:          loop t in [0..1]:
// NEM:        loop t_v1 in [0..0]:
// NEM-NEXT:     compute2 = compute.async {{.*}} index_args=[32, 0, 32]
func.func @peeled(%A: memref<48xf32>, %B: memref<48xf32>) {
  affine.for %T = 0 to 40 step 16 {
    affine.for %t = 0 to min affine_map<(d0) -> (16, -d0 + 40)>(%T) step 8 {
      %o = arith.addi %t, %T : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[47 - %i - %T - %t] : memref<48xf32>
        affine.store %a, %B[%o + %i] : memref<48xf32>
      }
    }
  }
  return
}

// -----

// A tile loop in a re-rolled pipeline (nem.max_in_flight, lowered once per
// iteration under a window): decided in that copy, marked, folded.
// CHECK-LABEL: func.func @rerolled(
// CHECK:            %o = affine.apply affine_map<(d0, d1) -> ((d0 + d1))> (%t, %T)
// CHECK:          } {nem_lowering.tile_loop}
// CHECK-NEXT:   } {nem.max_in_flight = 2 : i64, nem_lowering.tile_loop}
// NEM-LABEL:  program rerolled:
// NEM:        loop T in [0..1] @max_in_flight(2):
// NEM:          loop t in [0..3]:
func.func @rerolled(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %T = 0 to 64 step 32 {
    affine.for %t = 0 to 32 step 8 {
      %o = arith.addi %t, %T : index
      affine.for %i = 0 to 8 {
        %a = affine.load %A[%i + %T + %t] : memref<64xf32>
        affine.store %a, %B[%o + %i] : memref<64xf32>
      }
    }
  } {nem.max_in_flight = 2 : i64}
  return
}

// -----

// An arith operand of a min whose last tile is partial, in a structural loop: folded like any other
// (session 34; session 33 left it as written for the conversion's arith.addi, now out of its table),
// and the loop peeled as its apply form is: the peeling decision reads arith as applies.
// CHECK-LABEL: func.func @min_of_arith(
// CHECK:          %o = affine.apply affine_map<(d0) -> ((d0 + 4))> (%T)
// CHECK-NEXT:     %m = affine.min
// NEM-LABEL:  program min_of_arith:
// NEM:        loop T in [0..1]:
// NEM-NEXT:     copy1 = transfer.sync(dst=region(B, T * 64, 64) elem=f32, shape=[16]
// NEM:        copy2 = transfer.sync(dst=region(B, 128, 32) elem=f32, shape=[8]
func.func @min_of_arith(%A: memref<48xf32>, %B: memref<48xf32>) {
  %c4 = arith.constant 4 : index
  affine.for %T = 0 to 48 step 16 {
    %o = arith.addi %T, %c4 : index
    %m = affine.min affine_map<(d0) -> (16, -d0 + 44)>(%o)
    %s = memref.subview %A[%T] [%m] [1] : memref<48xf32> to memref<?xf32, strided<[1], offset: ?>>
    %d = memref.subview %B[%T] [%m] [1] : memref<48xf32> to memref<?xf32, strided<[1], offset: ?>>
    memref.copy %s, %d : memref<?xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
  }
  return
}
