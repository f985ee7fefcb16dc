// nem-raise-scalar-copies (D-LOW-SCALAR-COPY): a load whose one use is a
// store of its value in the same block, where the conversion lowers ops one
// by one (the entry function's block, a NEM loop's body), becomes a
// nem_lowering.element_copy holding both at the store's place; a pair in a
// compute nest (its kernel's), a load with another use or stored in another
// block stays.  lower-to-nem lowers it as one transfer `copy` of one element,
// its bounds checked at the load, then at the store (D-LOW-BOUNDS).
// RUN: nem-opt %s --split-input-file -p nem-raise-scalar-copies | filecheck %s
// RUN: nem-opt %s --split-input-file -p 'lower-to-nem{device=npm_pro_x1}' | filecheck %s --check-prefix=NEM

// CHECK-LABEL: func.func @at_top
// CHECK-NEXT: %c = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: "nem_lowering.element_copy"() ({
// CHECK-NEXT:   %v = affine.load %A[3] : memref<8xf32>
// CHECK-NEXT:   affine.store %v, %B[2] : memref<4xf32, 2 : i64>
// CHECK-NEXT: }) : () -> ()
// CHECK-NEXT: func.return
// NEM-LABEL: sym_name = "at_top"
// NEM: "nem.transfer"({{.*}}) <{token = "copy1"
func.func @at_top(%A: memref<8xf32>, %B: memref<4xf32, 2>) {
  %v = affine.load %A[3] : memref<8xf32>
  %c = arith.constant 1.0 : f32
  affine.store %v, %B[2] : memref<4xf32, 2>
  return
}

// -----

// in a NEM loop (it allocates); a compute nest's pair stays
// CHECK-LABEL: func.func @in_a_nem_loop
// CHECK: affine.for %i = 0 to 4 {
// CHECK-NEXT: memref.alloc
// CHECK-NEXT: "nem_lowering.element_copy"() ({
// CHECK-NEXT:   %w = memref.load %A[%i] : memref<8xf32>
// CHECK-NEXT:   memref.store %w, %a[%c0] : memref<1xf32, 2 : i64>
// CHECK-NEXT: }) : () -> ()
// CHECK: affine.for %j = 0 to 4 {
// CHECK-NEXT: %x = affine.load %A[%j] : memref<8xf32>
// CHECK-NEXT: affine.store %x, %C[%j] : memref<8xf32>
// NEM-LABEL: sym_name = "in_a_nem_loop"
// NEM: "nem.loop"
// NEM: "nem.transfer"({{.*}}) <{token = "copy1"
func.func @in_a_nem_loop(%A: memref<8xf32>, %C: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  affine.for %i = 0 to 4 {
    %a = memref.alloc() : memref<1xf32, 2>
    %w = memref.load %A[%i] : memref<8xf32>
    memref.store %w, %a[%c0] : memref<1xf32, 2>
    memref.dealloc %a : memref<1xf32, 2>
  }
  affine.for %j = 0 to 4 {
    %x = affine.load %A[%j] : memref<8xf32>
    affine.store %x, %C[%j] : memref<8xf32>
  }
  return
}

// -----

// a load with two uses (a scalar statement), a store of it in another
// block (a compute nest's kernel loads it): not copies
// CHECK-LABEL: func.func @not_copies
// CHECK-NOT: element_copy
// CHECK: return
func.func @not_copies(%A: memref<8xf32>, %B: memref<8xf32>) {
  %v = affine.load %A[0] : memref<8xf32>
  affine.store %v, %B[0] : memref<8xf32>
  affine.store %v, %B[1] : memref<8xf32>
  %u = affine.load %A[1] : memref<8xf32>
  affine.for %i = 0 to 4 {
    affine.store %u, %B[%i] : memref<8xf32>
  }
  return
}
