// tile_using_for with a 3-row tile (8 = 2*3 + 2, a non-dividing tile: dynamic
// subview sizes from affine.min) and promote of every operand into memory
// space 2 (memref.alloc of i8 + memref.view, linalg.copy in and out).
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match ops{["linalg.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %loops:2 = transform.structured.tile_using_for %mm tile_sizes [3, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    %p = transform.structured.promote %t {operands_to_promote = [0, 1, 2], memory_space = 2 : i64} : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
