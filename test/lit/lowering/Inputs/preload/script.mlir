module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match ops{["linalg.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %l:2 = transform.structured.tile_using_for %mm tile_sizes [16, 17, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    %p = transform.structured.promote %t {operands_to_promote = [0, 1, 2], memory_space = 2 : i64} : (!transform.any_op) -> !transform.any_op
    %f1 = transform.cast %l#1 : !transform.any_op to !transform.op<"scf.for">
    %m1, %r1 = transform.loop.peel %f1 : (!transform.op<"scf.for">) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

