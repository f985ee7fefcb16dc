// `nem_lowering.kernel` (D-LOW-OUTLINE): an escape-hatch task outlined
// before the conversion. It prints and parses back unchanged, and its
// function's arguments must be its operands' region types
// (kernel_op_errors.mlir).
// RUN: nem-opt %s | nem-opt | filecheck %s

// CHECK-LABEL: func.func @reversed(
// CHECK:      "nem_lowering.kernel"(%A, %B, %n) <{what = "loop nest", why = "a reversed access", operandSegmentSizes = array<i32: 1, 1, 1>}> ({
// CHECK-NEXT:   func.func @kernel(%a: memref<4x8xf32>, %b: memref<16x8xf32>, %i: index) {
// CHECK:          affine.load %a[0, %j * -1 + 7]
// CHECK:      }) : (memref<4x8xf32, strided<[8, 1]>>, memref<16x8xf32>, index) -> ()
func.func @reversed(%A0: memref<8x8xf32>, %B: memref<16x8xf32>, %n: index) {
  %A = memref.subview %A0[0, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  "nem_lowering.kernel"(%A, %B, %n) <{what = "loop nest", why = "a reversed access", operandSegmentSizes = array<i32: 1, 1, 1>}> ({
    func.func @kernel(%a: memref<4x8xf32>, %b: memref<16x8xf32>, %i: index) {
      affine.for %j = 0 to 8 {
        %x = affine.load %a[0, 7 - %j] : memref<4x8xf32>
        affine.store %x, %b[%i, %j] : memref<16x8xf32>
      }
      func.return
    }
  }) : (memref<4x8xf32, strided<[8, 1]>>, memref<16x8xf32>, index) -> ()
  func.return
}
