func.func @unit_loops(%X: memref<4x8xf32>, %Y: memref<4x8xf32>, %Z: memref<4x8xf32>) {
  affine.for %u = 0 to 1 {
    affine.for %i = 0 to 4 {
      affine.for %v = 0 to 1 {
        affine.for %j = 0 to 8 {
          %a = affine.load %X[%i, %j] : memref<4x8xf32>
          %b = affine.load %Y[%i, %j] : memref<4x8xf32>
          %s = arith.addf %a, %b : f32
          affine.store %s, %Z[%i, %j] : memref<4x8xf32>
        }
      }
    }
  }
  return
}

func.func @unit_copy(%X: memref<4x8xf32>, %Y: memref<4x8xf32, 2>) {
  affine.for %i = 0 to 4 {
    affine.for %v = 0 to 1 {
      affine.for %j = 0 to 8 {
        %a = affine.load %X[%i, %j] : memref<4x8xf32>
        affine.store %a, %Y[%i, %j] : memref<4x8xf32, 2>
      }
    }
  }
  return
}

func.func @one_point(%X: memref<1x1xf32>, %Y: memref<1x1xf32>) {
  affine.for %i = 0 to 1 {
    affine.for %j = 0 to 1 {
      %a = affine.load %X[%i, %j] : memref<1x1xf32>
      %r = arith.mulf %a, %a : f32
      affine.store %r, %Y[%i, %j] : memref<1x1xf32>
    }
  }
  return
}
