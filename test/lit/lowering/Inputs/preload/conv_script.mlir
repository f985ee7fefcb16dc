module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %c = transform.structured.match ops{["linalg.conv_2d_nchw_fchw"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %l:3 = transform.structured.tile_using_for %c tile_sizes [0, 3, 5, 5, 0, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %p = transform.structured.promote %t {operands_to_promote = [0, 1, 2], memory_space = 2 : i64} : (!transform.any_op) -> !transform.any_op
    %f2 = transform.cast %l#2 : !transform.any_op to !transform.op<"scf.for">
    %m2, %r2 = transform.loop.peel %f2 : (!transform.op<"scf.for">) -> (!transform.any_op, !transform.any_op)
    %f1 = transform.cast %l#1 : !transform.any_op to !transform.op<"scf.for">
    %m1, %r1 = transform.loop.peel %f1 : (!transform.op<"scf.for">) -> (!transform.any_op, !transform.any_op)
    %f0 = transform.cast %l#0 : !transform.any_op to !transform.op<"scf.for">
    %m0, %r0 = transform.loop.peel %f0 : (!transform.op<"scf.for">) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
