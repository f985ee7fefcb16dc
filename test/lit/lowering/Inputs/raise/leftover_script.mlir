module attributes {transform.with_named_sequence} {
  func.func @main(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
    linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
    return
  }
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match ops{["linalg.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %p = transform.structured.promote %mm {operands_to_promote = [0], memory_space = 2 : i64} : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
