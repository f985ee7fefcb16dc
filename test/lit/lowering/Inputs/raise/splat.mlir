// Scalar constants in elementwise nests, as a user writes them: an
// average's divide (x * 0.25), a shift by a negative constant, and layer
// norm's normalizing body with rsqrt; the constant becomes a splat
// (D-LOW-SPLAT).  @max_const and @pow_const are near misses that stay
// escape-hatch tasks: a splat would change what a NaN gives.
func.func @scale(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %q = arith.constant 0.25 : f32
  %n = arith.constant -1.5 : f32
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %s = arith.mulf %v, %q : f32
      %t = arith.subf %n, %s : f32
      affine.store %t, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}

func.func @normalize(%x: memref<4x8xf32>, %sum: memref<4x1xf32>, %var: memref<4x1xf32>,
                     %y: memref<4x8xf32>) {
  %inv = arith.constant 0.125 : f32
  %eps = arith.constant 1.0e-05 : f32
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %s = affine.load %sum[%i, 0] : memref<4x1xf32>
      %w = affine.load %var[%i, 0] : memref<4x1xf32>
      %m = arith.mulf %s, %inv : f32
      %d = arith.subf %v, %m : f32
      %vm = arith.mulf %w, %inv : f32
      %ve = arith.addf %vm, %eps : f32
      %r = math.rsqrt %ve : f32
      %o = arith.mulf %d, %r : f32
      affine.store %o, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}

func.func @max_const(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %h = arith.constant 0.5 : f32
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %m = arith.maxnumf %v, %h : f32
      affine.store %m, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}

func.func @pow_const(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %two = arith.constant 2.0 : f32
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %p = math.powf %v, %two : f32
      affine.store %p, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}

func.func @clip(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %lo = arith.constant -1.0 : f32
  %hi = arith.constant 6.0 : f32
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %a = arith.maximumf %v, %lo : f32
      %b = arith.minimumf %a, %hi : f32
      affine.store %b, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}
