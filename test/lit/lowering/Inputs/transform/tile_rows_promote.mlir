// tile_using_for over rows only (8 = 4 tiles of 2 rows: disjoint output
// rows) and promote of every operand into memory space 2: the buffers are
// allocated in the tile loop's body (pipeline_tiles.test).
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match ops{["linalg.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %loop = transform.structured.tile_using_for %mm tile_sizes [2, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %p = transform.structured.promote %t {operands_to_promote = [0, 1, 2], memory_space = 2 : i64} : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
