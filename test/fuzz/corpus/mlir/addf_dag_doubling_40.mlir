func.func @f(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %i = 0 to 64 {
    %x0 = affine.load %A[%i] : memref<64xf32>
    %x1 = arith.addf %x0, %x0 : f32
    %x2 = arith.addf %x1, %x1 : f32
    %x3 = arith.addf %x2, %x2 : f32
    %x4 = arith.addf %x3, %x3 : f32
    %x5 = arith.addf %x4, %x4 : f32
    %x6 = arith.addf %x5, %x5 : f32
    %x7 = arith.addf %x6, %x6 : f32
    %x8 = arith.addf %x7, %x7 : f32
    %x9 = arith.addf %x8, %x8 : f32
    %x10 = arith.addf %x9, %x9 : f32
    %x11 = arith.addf %x10, %x10 : f32
    %x12 = arith.addf %x11, %x11 : f32
    %x13 = arith.addf %x12, %x12 : f32
    %x14 = arith.addf %x13, %x13 : f32
    %x15 = arith.addf %x14, %x14 : f32
    %x16 = arith.addf %x15, %x15 : f32
    %x17 = arith.addf %x16, %x16 : f32
    %x18 = arith.addf %x17, %x17 : f32
    %x19 = arith.addf %x18, %x18 : f32
    %x20 = arith.addf %x19, %x19 : f32
    %x21 = arith.addf %x20, %x20 : f32
    %x22 = arith.addf %x21, %x21 : f32
    %x23 = arith.addf %x22, %x22 : f32
    %x24 = arith.addf %x23, %x23 : f32
    %x25 = arith.addf %x24, %x24 : f32
    %x26 = arith.addf %x25, %x25 : f32
    %x27 = arith.addf %x26, %x26 : f32
    %x28 = arith.addf %x27, %x27 : f32
    %x29 = arith.addf %x28, %x28 : f32
    %x30 = arith.addf %x29, %x29 : f32
    %x31 = arith.addf %x30, %x30 : f32
    %x32 = arith.addf %x31, %x31 : f32
    %x33 = arith.addf %x32, %x32 : f32
    %x34 = arith.addf %x33, %x33 : f32
    %x35 = arith.addf %x34, %x34 : f32
    %x36 = arith.addf %x35, %x35 : f32
    %x37 = arith.addf %x36, %x36 : f32
    %x38 = arith.addf %x37, %x37 : f32
    %x39 = arith.addf %x38, %x38 : f32
    %x40 = arith.addf %x39, %x39 : f32
    %xN = arith.addf %x40, %x0 : f32
    affine.store %xN, %B[%i] : memref<64xf32>
  }
  return
}
