// nem-reroll-pipelines (D-LOW-PIPE): the three pieces -affine-pipeline-data-transfer
// leaves (the first iteration's DMA starts before the loop, a loop that starts
// the next iteration's DMAs then does the rest of the current one, that rest
// once more after the loop) rolled back into one affine.for over the original
// iterations carrying nem.max_in_flight = 2 (issue 36, step 2).
//
// The epilogue is the body's last iteration: one loop, one iteration more than
// upstream's and starting one step earlier; stage 0 keeps the loop variable,
// the rest reads it one step later; prologue and epilogue gone (the index
// arithmetic around the epilogue stays, unused).
// RUN: nem-opt %s --split-input-file -p nem-reroll-pipelines | filecheck %s
// CHECK-LABEL: func.func @whole(
// CHECK: %tags = memref.alloc() : memref<2x1xi32>
// CHECK-NEXT: affine.for %i = 0 to 64 step 16 {
// CHECK-NEXT: affine.dma_start %a[%i], %buf[%i floordiv 16 mod 2, 0], %tags[%i floordiv 16 mod 2, 0], %c16
// CHECK-NEXT: %next = affine.apply affine_map<(d0) -> ((d0 + 16))> (%i)
// CHECK-NEXT: %cur = affine.apply affine_map<(d0) -> ((d0 + -16))> (%next)
// CHECK-NEXT: affine.dma_wait %tags[%cur floordiv 16 mod 2, 0], %c16
// CHECK: } {nem.max_in_flight = 2 : i64}
// CHECK-NEXT: %tail = affine.apply
// CHECK-NOT: affine.dma_wait
// CHECK: func.return
//
// The epilogue differs from the last iteration of the body (-canonicalize
// folded its min bound to a constant): the loop stops one iteration short and
// the last iteration stays as upstream wrote it, after stage 0 at that
// iteration (48), in an scf.execute_region marked nem.last_iteration (the
// conversion lowers it as the loop's peeled last iteration, D-LOW-PEEL).
// CHECK-LABEL: func.func @folded(
// CHECK: affine.for %i = 0 to 48 step 16 {
// CHECK: } {nem.max_in_flight = 2 : i64}
// CHECK-NEXT: scf.execute_region {
// CHECK-NEXT: %last = affine.apply affine_map<() -> (48)> ()
// CHECK-NEXT: affine.dma_start %a[%last], %buf[%last floordiv 16 mod 2, 0], %tags[%last floordiv 16 mod 2, 0], %c16
// CHECK-NEXT: %tail = affine.apply
// CHECK: affine.dma_wait %tags[%tail floordiv 16 mod 2, 0], %c16
// CHECK: affine.for %{{.+}} = 48 to 60 {
// CHECK: }{nem.last_iteration}
// CHECK-NEXT: func.return
//
// No prologue (the loop was not pipelined by upstream): left alone.
// CHECK-LABEL: func.func @unpipelined(
// CHECK: affine.for %i = 16 to 64 step 16 {
// CHECK-NOT: nem.max_in_flight
// CHECK: func.return
//
// convert-affine-to-nem alone re-rolls too (its preparation, D-LOW-SCF): one
// NEM loop under the window, ping-pong slots indexed by its variable; with the
// folded epilogue, three iterations in the loop and the last after it.
// RUN: nem-opt %s --split-input-file -p 'convert-affine-to-nem{device=npm_pro_x1}' -t nem | filecheck %s --check-prefix=NEM
// NEM-LABEL: program whole:
// NEM: loop i in [0..3] @max_in_flight(2):
// NEM-NEXT: transfer.async(dst=region(buf, (i mod 2) * 64, 64) elem=f32, shape=[16], layout=C, src=region(a, i * 64, 64)
// NEM-LABEL: program folded:
// NEM: loop i in [0..2] @max_in_flight(2):
// NEM: endloop
// NEM: transfer.async(dst=region(buf, 64, 64) elem=f32, shape=[16], layout=C, src=region(a, 192, 64)

#id = affine_map<(d0) -> (d0)>
#prev = affine_map<(d0) -> (d0 - 16)>
#up = affine_map<(d0) -> (d0 + 16)>
func.func @whole(%a: memref<64xf32>, %b: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %buf = memref.alloc() : memref<2x16xf32, 2>
  %tags = memref.alloc() : memref<2x1xi32>
  affine.dma_start %a[%c0], %buf[(%c0 floordiv 16) mod 2, 0], %tags[(%c0 floordiv 16) mod 2, 0], %c16 : memref<64xf32>, memref<2x16xf32, 2>, memref<2x1xi32>
  affine.for %i = 16 to 64 step 16 {
    affine.dma_start %a[%i], %buf[(%i floordiv 16) mod 2, 0], %tags[(%i floordiv 16) mod 2, 0], %c16 : memref<64xf32>, memref<2x16xf32, 2>, memref<2x1xi32>
    %cur = affine.apply #prev(%i)
    affine.dma_wait %tags[(%cur floordiv 16) mod 2, 0], %c16 : memref<2x1xi32>
    %out = memref.alloc() : memref<16xf32, 2>
    %otag = memref.alloc() : memref<1xi32>
    affine.for %j = #id(%cur) to #up(%cur) {
      %v = affine.load %buf[(%cur floordiv 16) mod 2, %j - %cur] : memref<2x16xf32, 2>
      %w = arith.addf %v, %v : f32
      affine.store %w, %out[%j - %cur] : memref<16xf32, 2>
    }
    affine.dma_start %out[%c0], %b[%cur], %otag[%c0], %c16 : memref<16xf32, 2>, memref<64xf32>, memref<1xi32>
    affine.dma_wait %otag[%c0], %c16 : memref<1xi32>
    memref.dealloc %otag : memref<1xi32>
    memref.dealloc %out : memref<16xf32, 2>
  }
  %tail = affine.apply #prev(%c64)
  affine.dma_wait %tags[(%tail floordiv 16) mod 2, 0], %c16 : memref<2x1xi32>
  %out = memref.alloc() : memref<16xf32, 2>
  %otag = memref.alloc() : memref<1xi32>
  affine.for %j = #id(%tail) to #up(%tail) {
    %v = affine.load %buf[(%tail floordiv 16) mod 2, %j - %tail] : memref<2x16xf32, 2>
    %w = arith.addf %v, %v : f32
    affine.store %w, %out[%j - %tail] : memref<16xf32, 2>
  }
  affine.dma_start %out[%c0], %b[%tail], %otag[%c0], %c16 : memref<16xf32, 2>, memref<64xf32>, memref<1xi32>
  affine.dma_wait %otag[%c0], %c16 : memref<1xi32>
  memref.dealloc %otag : memref<1xi32>
  memref.dealloc %out : memref<16xf32, 2>
  return
}

// -----

#id = affine_map<(d0) -> (d0)>
#prev = affine_map<(d0) -> (d0 - 16)>
#upmin = affine_map<(d0) -> (d0 + 16, 60)>
func.func @folded(%a: memref<64xf32>, %b: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %buf = memref.alloc() : memref<2x16xf32, 2>
  %tags = memref.alloc() : memref<2x1xi32>
  affine.dma_start %a[%c0], %buf[(%c0 floordiv 16) mod 2, 0], %tags[(%c0 floordiv 16) mod 2, 0], %c16 : memref<64xf32>, memref<2x16xf32, 2>, memref<2x1xi32>
  affine.for %i = 16 to 64 step 16 {
    affine.dma_start %a[%i], %buf[(%i floordiv 16) mod 2, 0], %tags[(%i floordiv 16) mod 2, 0], %c16 : memref<64xf32>, memref<2x16xf32, 2>, memref<2x1xi32>
    %cur = affine.apply #prev(%i)
    affine.dma_wait %tags[(%cur floordiv 16) mod 2, 0], %c16 : memref<2x1xi32>
    %out = memref.alloc() : memref<16xf32, 2>
    %otag = memref.alloc() : memref<1xi32>
    affine.for %j = #id(%cur) to min #upmin(%cur) {
      %v = affine.load %buf[(%cur floordiv 16) mod 2, %j - %cur] : memref<2x16xf32, 2>
      %w = arith.addf %v, %v : f32
      affine.store %w, %out[%j - %cur] : memref<16xf32, 2>
    }
    affine.dma_start %out[%c0], %b[%cur], %otag[%c0], %c16 : memref<16xf32, 2>, memref<64xf32>, memref<1xi32>
    affine.dma_wait %otag[%c0], %c16 : memref<1xi32>
    memref.dealloc %otag : memref<1xi32>
    memref.dealloc %out : memref<16xf32, 2>
  }
  %tail = affine.apply #prev(%c64)
  affine.dma_wait %tags[(%tail floordiv 16) mod 2, 0], %c16 : memref<2x1xi32>
  %out = memref.alloc() : memref<16xf32, 2>
  %otag = memref.alloc() : memref<1xi32>
  affine.for %j = 48 to 60 {
    %v = affine.load %buf[(%tail floordiv 16) mod 2, %j - %tail] : memref<2x16xf32, 2>
    %w = arith.addf %v, %v : f32
    affine.store %w, %out[%j - %tail] : memref<16xf32, 2>
  }
  affine.dma_start %out[%c0], %b[%tail], %otag[%c0], %c16 : memref<16xf32, 2>, memref<64xf32>, memref<1xi32>
  affine.dma_wait %otag[%c0], %c16 : memref<1xi32>
  memref.dealloc %otag : memref<1xi32>
  memref.dealloc %out : memref<16xf32, 2>
  return
}

// -----

func.func @unpipelined(%a: memref<64xf32>, %b: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %buf = memref.alloc() : memref<2x16xf32, 2>
  %tags = memref.alloc() : memref<2x1xi32>
  affine.for %i = 16 to 64 step 16 {
    affine.dma_start %a[%i], %buf[(%i floordiv 16) mod 2, 0], %tags[(%i floordiv 16) mod 2, 0], %c16 : memref<64xf32>, memref<2x16xf32, 2>, memref<2x1xi32>
    affine.dma_wait %tags[(%i floordiv 16) mod 2, 0], %c16 : memref<2x1xi32>
  }
  return
}
