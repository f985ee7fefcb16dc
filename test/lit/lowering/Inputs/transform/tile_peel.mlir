// tile_using_for with a 3-row tile (8 = 2*3 + 2) and loop.peel: full tiles, then the 2-row rest.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match ops{["linalg.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %loops:3 = transform.structured.tile_using_for %mm tile_sizes [3, 4, 8] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %l0 = transform.cast %loops#0 : !transform.any_op to !transform.op<"scf.for">
    %main, %rest = transform.loop.peel %l0 : (!transform.op<"scf.for">) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
