// nem-declare-buffers (D-LOW-DECLARE): the entry's memref arguments named
// (an argument attribute each), every memref.get_global of one global one
// nem_lowering.buffer at the function's start, in the order of first use,
// named by the generator the conversion resumes (the count of DEFAULT<n>
// names on the function).
// RUN: nem-opt %s -p 'nem-declare-buffers{entry=main}' | filecheck %s
// CHECK:      func.func @main(%x: memref<4xf32> {nem_lowering.buffer = "x"}, %0: memref<4xf32> {nem_lowering.buffer = "arg1"})
// CHECK-SAME: attributes {nem_lowering.default_names = 2 : i64}
// CHECK-NEXT:   %ww = "nem_lowering.buffer"() <{buffer = "w", global = @w}> : () -> memref<4xf32>
// CHECK-NEXT:   %o = "nem_lowering.buffer"() <{buffer = "global1", global = @odd.name}> : () -> memref<4xf32>
// CHECK-NEXT:   %g = "nem_lowering.buffer"() <{buffer = "x_v1", global = @x}> : () -> memref<4xf32>
// CHECK-NEXT:   %a = memref.alloc() : memref<4xf32>
// CHECK-NOT:  get_global
// CHECK:      affine.load %ww[%i]
// CHECK:      affine.load %o[%j]
// CHECK:      affine.load %g[%k]
// CHECK:      affine.load %ww[%w]
// The conversion declares them after the arguments, before the allocation
// (which comes first in the function), with these names:
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 entry=main weights="%t.npz"}' -t nem | filecheck %s --check-prefix=NEM
// NEM:      buffer x : DDR (size=16, align=64)
// NEM-NEXT: buffer arg1 : DDR (size=16, align=64)
// NEM-NEXT: buffer w : DDR (size=16, align=64)
// NEM-NEXT: buffer global1 : DDR (size=16, align=64)
// NEM-NEXT: buffer x_v1 : DDR (size=16, align=64)
// NEM-NEXT: buffer a : DDR (size=16, align=64)
// NEM:      src=region(w, 0, 16)
// A symbol that is no memref.global: an error at the get_global.
// RUN: not nem-opt %s -p 'nem-declare-buffers{entry=bad}' 2>&1 | filecheck %s --check-prefix=BAD
// BAD: declare_buffers.mlir:47:3: error: cannot lower 'memref.get_global': @main is not a memref.global
memref.global "private" constant @w : memref<4xf32> = dense<1.0>
memref.global "private" constant @"odd.name" : memref<4xf32> = dense<2.0>
memref.global "private" constant @x : memref<4xf32> = dense<3.0>
func.func @main(%x: memref<4xf32>, %0: memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  %ww = memref.get_global @w : memref<4xf32>
  affine.for %i = 0 to 4 { %v = affine.load %ww[%i] : memref<4xf32>  affine.store %v, %a[%i] : memref<4xf32> }
  %o = memref.get_global @"odd.name" : memref<4xf32>
  affine.for %j = 0 to 4 { %v = affine.load %o[%j] : memref<4xf32>  affine.store %v, %x[%j] : memref<4xf32> }
  %g = memref.get_global @x : memref<4xf32>
  affine.for %k = 0 to 4 { %v = affine.load %g[%k] : memref<4xf32>  affine.store %v, %0[%k] : memref<4xf32> }
  %w2 = memref.get_global @w : memref<4xf32>
  affine.for %w = 0 to 4 { %v = affine.load %w2[%w] : memref<4xf32>  affine.store %v, %0[%w] : memref<4xf32> }
  return
}
func.func @bad(%x: memref<4xf32>) {
  %m = memref.get_global @main : memref<4xf32>
  return
}
