// nem-declare-allocations (D-LOW-DECLARE): each memref.alloc / memref.alloca
// the conversion lowers one by one becomes a nem_lowering.buffer in its
// place, named by the generator nem-declare-buffers left (its count of
// DEFAULT<n> names on the function goes on): the MLIR name when it is a free
// NEM identifier, else LEVEL_buf<n>.  DMA tags and an allocation the
// conversion rejects (dynamic sizes) get no name.
// RUN: nem-opt %s -p 'nem-declare-buffers{entry=main},nem-declare-allocations{entry=main memory-spaces=0:DDR,1:L2,2:L1}' | filecheck %s
// CHECK:      func.func @main(%x: memref<64xf32> {nem_lowering.buffer = "x"}, %0: memref<64xf32> {nem_lowering.buffer = "arg1"})
// CHECK-SAME: attributes {nem_lowering.default_names = 3 : i64}
// CHECK-NEXT:   %w = "nem_lowering.buffer"() <{buffer = "w", global = @w}> : () -> memref<64xf32>
// CHECK-NEXT:   %a = "nem_lowering.buffer"() <{buffer = "a", replaces = "memref.alloc"}> : () -> memref<64xf32, 2 : i64>
// CHECK-NEXT:   %1 = "nem_lowering.buffer"() <{buffer = "L1_buf1", replaces = "memref.alloca"}> : () -> memref<16xf32, 2 : i64>
// CHECK-NEXT:   %w_1 = "nem_lowering.buffer"() <{buffer = "w_v1", replaces = "memref.alloc"}> : () -> memref<64xf32, 1 : i64>
// CHECK-NEXT:   %tag = "nem_lowering.buffer"() <{replaces = "memref.alloc"}> : () -> memref<1xi32>
// CHECK:        affine.for %i = 0 to 4 {
// CHECK-NEXT:     %2 = "nem_lowering.buffer"() <{buffer = "L2_buf2", replaces = "memref.alloc"}> : () -> memref<16xf32, 1 : i64>
// CHECK:        %d = "nem_lowering.buffer"(%c64) <{replaces = "memref.alloc"}> : (index) -> memref<?xf32>
// CHECK:        affine.for %k = 0 to 4 {
// CHECK-NEXT:     %p = "nem_lowering.buffer"() <{buffer = "p", replaces = "memref.alloca"}> : () -> memref<1xf32>
// CHECK-NOT:  memref.alloc
// Only the entry's: the other function keeps its allocations.
// CHECK:      func.func @main_static
// CHECK-NEXT:   %a = memref.alloc() : memref<64xf32, 2 : i64>
// The conversion declares them with these names (the tags and the unused
// ones none; the dynamic one is the conversion's error, entry main_static
// has none):
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 entry=main_static}' -t nem | filecheck %s --check-prefix=NEM
// NEM:      buffer s : DDR (size=256, align=64)
// NEM-NEXT: buffer t : DDR (size=256, align=64)
// NEM-NEXT: buffer a : L1[0] (size=256, align=64)
// NEM-NEXT: buffer L2_buf0 : L2 (size=64, align=64)
// NEM-NOT:  buffer
// NEM:      transfer.async
// RUN: not nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 entry=main}' 2>&1 | filecheck %s --check-prefix=DYN
// DYN: declare_allocations.mlir:[[# @LINE + 23]]:3: error: cannot lower 'memref.alloc': dynamic shape memref<?xf32> is not supported: NEM buffers have static sizes
// An allocation nem-declare-allocations did not name, the conversion having
// other memory-spaces: not supported, at the allocation.
// RUN: not nem-opt %s -p 'nem-declare-allocations{entry=main_static memory-spaces=0:DDR},convert-affine-to-nem{entry=main_static}' 2>&1 | filecheck %s --check-prefix=SPACES
// SPACES: declare_allocations.mlir:[[# @LINE + 30]]:3: error: cannot lower 'memref.alloc': not supported: an allocation nem-declare-allocations did not name (it ran with other memory-spaces than the conversion)
memref.global "private" @w : memref<64xf32> = uninitialized
func.func @main(%x: memref<64xf32>, %0: memref<64xf32>) {
  %w = memref.get_global @w : memref<64xf32>
  %a = memref.alloc() : memref<64xf32, 2>
  %1 = memref.alloca() : memref<16xf32, 2>
  %w_1 = memref.alloc() : memref<64xf32, 1>
  %tag = memref.alloc() : memref<1xi32>
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  affine.dma_start %x[%c0], %a[%c0], %tag[0], %c64 : memref<64xf32>, memref<64xf32, 2>, memref<1xi32>
  affine.dma_wait %tag[0], %c64 : memref<1xi32>
  affine.for %i = 0 to 4 {
    %2 = memref.alloc() : memref<16xf32, 1>
    affine.for %j = 0 to 16 {
      %v = affine.load %a[%i * 16 + %j] : memref<64xf32, 2>
      affine.store %v, %2[%j] : memref<16xf32, 1>
    }
  }
  %d = memref.alloc(%c64) : memref<?xf32>
  affine.for %k = 0 to 4 {
    %p = memref.alloca() : memref<1xf32>
    %v = affine.load %w[%k] : memref<64xf32>
    affine.store %v, %p[0] : memref<1xf32>
    %u = affine.load %p[0] : memref<1xf32>
    affine.store %u, %0[%k] : memref<64xf32>
  }
  return
}
func.func @main_static(%s: memref<64xf32>, %t: memref<64xf32>) {
  %a = memref.alloc() : memref<64xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  %unused = memref.alloc() : memref<8xf32, 2>
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  affine.dma_start %s[%c0], %a[%c0], %tag[0], %c64 : memref<64xf32>, memref<64xf32, 2>, memref<1xi32>
  affine.dma_wait %tag[0], %c64 : memref<1xi32>
  affine.for %i = 0 to 4 {
    %0 = memref.alloc() : memref<16xf32, 1>
    affine.for %j = 0 to 16 {
      %v = affine.load %a[%i * 16 + %j] : memref<64xf32, 2>
      affine.store %v, %0[%j] : memref<16xf32, 1>
    }
    affine.for %j = 0 to 16 {
      %v = affine.load %0[%j] : memref<16xf32, 1>
      affine.store %v, %t[%i * 16 + %j] : memref<64xf32>
    }
  }
  return
}
