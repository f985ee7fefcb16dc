"""`nem_lowering.scope`: ops whose tasks may run concurrently with the
tasks around them, so that they share no scratch buffer with them
(D-LOW-ASYNC-INLINE).  What `nem-inline-async-executes` makes of an
`async.execute`:

    %t, %v = async.execute -> !async.value<memref<64xf32, 2>> {
      %a = memref.alloc() : memref<64xf32, 2>
      ...
      async.yield %a : memref<64xf32, 2>
    }
    -> %v = "nem_lowering.scope"() ({
         %a = "nem_lowering.buffer"() ... : () -> memref<64xf32, 2>
         ...
         "nem_lowering.yield"(%a) : (memref<64xf32, 2>) -> ()
       }) : () -> memref<64xf32, 2>

Its one block holds the ops, lowered in place (its tasks join the
enclosing NEM block in program order); its results are the values its
`nem_lowering.yield` yields (memrefs and indices: the same NEM view or
affine value, D-LOW-ASYNC-VALUE).  The conversion gives the tasks of each
scope scratch buffers of their own (`staging.task_scope`: the innermost
scope holding the op being lowered).

It lives with the IR, as `nem_lowering.kernel` does: it imports nothing of
the toolchain.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, IsTerminator
from xdsl.utils.exceptions import VerifyException


@irdl_op_definition
class ScopeOp(IRDLOperation):
    """Ops lowered in place with scratch buffers of their own (module docstring)."""

    name = "nem_lowering.scope"

    res = var_result_def()
    body = region_def("single_block")

    def __init__(self, result_types: Sequence[Attribute], body: Block):
        super().__init__(result_types=[result_types], regions=[Region(body)])

    @property
    def yielded(self) -> ScopeYieldOp:
        """The terminator of the body (checked by `verify_`)."""
        y = self.body.block.last_op
        assert isinstance(y, ScopeYieldOp)
        return y

    def verify_(self) -> None:
        y = self.body.block.last_op
        if not isinstance(y, ScopeYieldOp):
            raise VerifyException("its block ends with nem_lowering.yield")
        got = [v.type for v in y.operands]
        want = [r.type for r in self.results]
        if got != want:
            raise VerifyException(
                f"its results are of the types it yields: {', '.join(map(str, want))} "
                f"!= {', '.join(map(str, got))}"
            )


@irdl_op_definition
class ScopeYieldOp(IRDLOperation):
    """The values a `nem_lowering.scope` gives its results."""

    name = "nem_lowering.yield"

    values = var_operand_def()

    traits = traits_def(IsTerminator(), HasParent(ScopeOp))

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])
