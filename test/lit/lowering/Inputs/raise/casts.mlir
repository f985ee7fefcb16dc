func.func @truncf(%x: memref<4x8xf32>, %y: memref<4x8xf16>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %a = affine.load %x[%i, %j] : memref<4x8xf32>
      %b = arith.truncf %a : f32 to f16
      affine.store %b, %y[%i, %j] : memref<4x8xf16>
    }
  }
  return
}
func.func @extf(%x: memref<4x8xf16>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf16>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a: f16, %o: f32):
    %b = arith.extf %a : f16 to f32
    linalg.yield %b : f32
  }
  return
}
func.func @sitofp(%x: memref<16xi8>, %y: memref<16xf16>) {
  affine.for %i = 0 to 16 {
    %a = affine.load %x[%i] : memref<16xi8>
    %b = arith.sitofp %a : i8 to f16
    affine.store %b, %y[%i] : memref<16xf16>
  }
  return
}
func.func @fptosi(%x: memref<16xf32>, %y: memref<16xi8>) {
  affine.for %i = 0 to 16 {
    %a = affine.load %x[%i] : memref<16xf32>
    %b = arith.fptosi %a : f32 to i8
    affine.store %b, %y[%i] : memref<16xi8>
  }
  return
}
func.func @transposed(%x: memref<4x8xf32>, %y: memref<8x4xf16>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %a = affine.load %x[%i, %j] : memref<4x8xf32>
      %b = arith.truncf %a : f32 to f16
      affine.store %b, %y[%j, %i] : memref<8x4xf16>
    }
  }
  return
}
func.func @toward_zero(%x: memref<16xf32>, %y: memref<16xf16>) {
  affine.for %i = 0 to 16 {
    %a = affine.load %x[%i] : memref<16xf32>
    %b = arith.truncf %a {roundingmode = 3 : i32} : f32 to f16
    affine.store %b, %y[%i] : memref<16xf16>
  }
  return
}
