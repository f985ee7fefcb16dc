// Pure loop nests (escape-hatch kernels) that make views of memrefs from
// outside them: a row subview that depends on the outer loop, and a byte
// view of an i8 argument (test_lowering_nest_views.py).
func.func @rows(%x: memref<4x6xf32>, %y: memref<4x6xf32>) {
  affine.for %i = 0 to 4 {
    %v = memref.subview %y[%i, 0] [1, 6] [1, 1] : memref<4x6xf32> to memref<1x6xf32, strided<[6, 1], offset: ?>>
    affine.for %j = 0 to 6 {
      %e = affine.load %x[%i, %j] : memref<4x6xf32>
      %d = arith.addf %e, %e : f32
      affine.store %d, %v[0, %j] : memref<1x6xf32, strided<[6, 1], offset: ?>>
    }
  }
  return
}
func.func @bytes(%x: memref<4x6xf32>, %y: memref<96xi8>) {
  %c0 = arith.constant 0 : index
  affine.for %i = 0 to 4 {
    %v = memref.view %y[%c0][] : memref<96xi8> to memref<4x6xf32>
    affine.for %j = 0 to 6 {
      %e = affine.load %x[%i, %j] : memref<4x6xf32>
      %d = arith.mulf %e, %e : f32
      affine.store %d, %v[%i, %j] : memref<4x6xf32>
    }
  }
  return
}
func.func @past_the_end(%x: memref<4x6xf32>, %y: memref<4x6xf32>) {
  affine.for %i = 0 to 4 {
    %v = memref.subview %y[%i, 2] [1, 6] [1, 1] : memref<4x6xf32> to memref<1x6xf32, strided<[6, 1], offset: ?>>
    affine.for %j = 0 to 6 {
      %e = affine.load %x[%i, %j] : memref<4x6xf32>
      affine.store %e, %v[0, %j] : memref<1x6xf32, strided<[6, 1], offset: ?>>
    }
  }
  return
}
func.func @two_readers(%x: memref<8x16xf32>, %y: memref<8x16xf32>, %z: memref<8x16xf32>) {
  %two = arith.constant 2.0 : f32
  affine.for %i = 0 to 8 {
    %xr = memref.subview %x[%i, 0] [1, 16] [1, 1] : memref<8x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    affine.for %j = 0 to 16 {
      %v = affine.load %xr[0, %j] : memref<1x16xf32, strided<[16, 1], offset: ?>>
      %w = arith.addf %v, %two : f32
      affine.store %w, %y[%i, %j] : memref<8x16xf32>
    }
  }
  affine.for %i = 0 to 8 {
    %xr = memref.subview %x[%i, 0] [1, 16] [1, 1] : memref<8x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    affine.for %j = 0 to 16 {
      %v = affine.load %xr[0, %j] : memref<1x16xf32, strided<[16, 1], offset: ?>>
      %w = arith.mulf %v, %two : f32
      affine.store %w, %z[%i, %j] : memref<8x16xf32>
    }
  }
  return
}
func.func @dead_view(%x: memref<4x6xf32>, %y: memref<4x6xf32>, %z: memref<4x6xf32>) {
  affine.for %i = 0 to 4 {
    %unused = memref.subview %z[%i, 0] [1, 6] [1, 1] : memref<4x6xf32> to memref<1x6xf32, strided<[6, 1], offset: ?>>
    affine.for %j = 0 to 6 {
      %e = affine.load %x[%i, %j] : memref<4x6xf32>
      affine.store %e, %y[%i, %j] : memref<4x6xf32>
    }
  }
  return
}
