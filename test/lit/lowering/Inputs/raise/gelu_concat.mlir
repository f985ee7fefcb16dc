// ONNX's exact GELU as the importer writes it (f32, and f16 computed in f32:
// D-COMPILE-F16) is NEM's gelu approximate="none" (D-LOW-GELU-ERF);
// @gelu_near's constant is not 1/sqrt(2), so it stays an escape-hatch task.
// @row_sub_f16 reads a row statistic broadcast along the row: one concat
// of it (D-LOW-BCAST-CONCAT).
func.func @gelu_f32(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %rs2 = arith.constant 0.707106769 : f32
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %s = arith.mulf %v, %rs2 : f32
      %e = math.erf %s : f32
      %h = arith.mulf %half, %v : f32
      %p = arith.addf %one, %e : f32
      %g = arith.mulf %h, %p : f32
      affine.store %g, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}

func.func @gelu_f16(%x: memref<4x8xf16>, %y: memref<4x8xf16>) {
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %rs2 = arith.constant 0.707106769 : f32
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf16>
      %w = arith.extf %v : f16 to f32
      %s = arith.mulf %w, %rs2 : f32
      %e = math.erf %s : f32
      %h = arith.mulf %w, %half : f32
      %p = arith.addf %e, %one : f32
      %g = arith.mulf %h, %p : f32
      %t = arith.truncf %g : f32 to f16
      affine.store %t, %y[%i, %j] : memref<4x8xf16>
    }
  }
  return
}

func.func @gelu_near(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %c = arith.constant 0.7 : f32
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %s = arith.mulf %v, %c : f32
      %e = math.erf %s : f32
      %h = arith.mulf %half, %v : f32
      %p = arith.addf %one, %e : f32
      %g = arith.mulf %h, %p : f32
      affine.store %g, %y[%i, %j] : memref<4x8xf32>
    }
  }
  return
}

func.func @row_sub_f16(%x: memref<4x8xf16>, %m: memref<4x1xf16>, %y: memref<4x8xf16>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf16>
      %r = affine.load %m[%i, 0] : memref<4x1xf16>
      %d = arith.subf %v, %r : f16
      affine.store %d, %y[%i, %j] : memref<4x8xf16>
    }
  }
  return
}
