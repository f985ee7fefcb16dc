// `nem_lowering.kernel`'s verifier (D-LOW-OUTLINE): its function is @kernel
// and takes one identity-layout memref per memref operand (the operand's
// element type and static shape), then one index per index operand.
// RUN: nem-opt %s --split-input-file --verify-diagnostics

func.func @one_index_too_many(%A: memref<4xf32>, %n: index) {
  // expected-error@+1 {{@kernel's type is (memref<4xf32>, index, index) -> (), expected (memref<4xf32>, index) -> ()}}
  "nem_lowering.kernel"(%A, %n) <{what = "loop nest", why = "w", operandSegmentSizes = array<i32: 0, 1, 1>}> ({
    func.func @kernel(%a: memref<4xf32>, %i: index, %k: index) {
      func.return
    }
  }) : (memref<4xf32>, index) -> ()
  func.return
}

// -----

func.func @not_the_region_type(%A0: memref<8xf32>) {
  %A = memref.subview %A0[2] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 2>>
  // expected-error@+1 {{@kernel's type is (memref<8xf32>) -> (), expected (memref<4xf32>) -> ()}}
  "nem_lowering.kernel"(%A) <{what = "loop nest", why = "w", operandSegmentSizes = array<i32: 0, 1, 0>}> ({
    func.func @kernel(%a: memref<8xf32>) {
      func.return
    }
  }) : (memref<4xf32, strided<[1], offset: 2>>) -> ()
  func.return
}

// -----

func.func @dynamic(%A0: memref<8xf32>, %n: index) {
  %A = memref.subview %A0[0] [%n] [1] : memref<8xf32> to memref<?xf32, strided<[1]>>
  // expected-error@+1 {{its memrefs have static shapes}}
  "nem_lowering.kernel"(%A) <{what = "loop nest", why = "w", operandSegmentSizes = array<i32: 0, 1, 0>}> ({
    func.func @kernel(%a: memref<?xf32>) {
      func.return
    }
  }) : (memref<?xf32, strided<[1]>>) -> ()
  func.return
}

// -----

func.func @writes_nothing(%A: memref<4xf32>) {
  // expected-error@+1 {{a kernel writes at least one memref (outs)}}
  "nem_lowering.kernel"(%A) <{what = "loop nest", why = "w", operandSegmentSizes = array<i32: 1, 0, 0>}> ({
    func.func @kernel(%a: memref<4xf32>) {
      func.return
    }
  }) : (memref<4xf32>) -> ()
  func.return
}

// -----

func.func @named(%A: memref<4xf32>) {
  // expected-error@+1 {{its function is @kernel, not @k}}
  "nem_lowering.kernel"(%A) <{what = "loop nest", why = "w", operandSegmentSizes = array<i32: 0, 1, 0>}> ({
    func.func @k(%a: memref<4xf32>) {
      func.return
    }
  }) : (memref<4xf32>) -> ()
  func.return
}

// -----

func.func @two_ops(%A: memref<4xf32>) {
  // expected-error@+1 {{its region holds one func.func @kernel}}
  "nem_lowering.kernel"(%A) <{what = "loop nest", why = "w", operandSegmentSizes = array<i32: 0, 1, 0>}> ({
    func.func @kernel(%a: memref<4xf32>) {
      func.return
    }
    %c = arith.constant 0 : index
  }) : (memref<4xf32>) -> ()
  func.return
}
