// Scalar statements outside loop nests (D-LOW-SCALAR).
func.func @hypot(%a: memref<f32>, %b: memref<f32>, %c: memref<f32>) {
  %x = affine.load %a[] : memref<f32>
  %y = affine.load %b[] : memref<f32>
  %xx = arith.mulf %x, %x : f32
  %yy = arith.mulf %y, %y : f32
  %s = arith.addf %xx, %yy : f32
  %r = math.sqrt %s : f32
  affine.store %r, %c[] : memref<f32>
  return
}
func.func @store_between(%a: memref<f32>, %c: memref<f32>) {
  %x = affine.load %a[] : memref<f32>
  %z = arith.constant 0.0 : f32
  affine.store %z, %a[] : memref<f32>
  %n = arith.negf %x : f32
  affine.store %n, %c[] : memref<f32>
  return
}
