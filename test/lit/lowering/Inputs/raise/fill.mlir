// linalg.fill: the i8 zeroing and the splat (D-LOW-FILL).
func.func @main(%y: memref<4xf32>) {
  %c = arith.constant 1.0 : f32
  linalg.fill ins(%c : f32) outs(%y : memref<4xf32>)
  return
}
