"""`affine.max`, which xDSL 0.74 lacks (it has `affine.min`).

Same syntax and operands as `affine.min` (`affine.max #map(%d)[%s]`): the
verifier and printer are xDSL's `MinOp` ones; parsing reuses `MinOp.parse`
and rebuilds the result as an `affine.max`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.affine import MinOp
from xdsl.dialects.builtin import AffineMapAttr, IndexType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def, result_def, var_operand_def
from xdsl.parser import Parser


@irdl_op_definition
class AffineMaxOp(IRDLOperation):
    name = "affine.max"
    arguments = var_operand_def(IndexType())
    result = result_def(IndexType())
    map = prop_def(AffineMapAttr)

    def __init__(self, map_operands: Sequence[SSAValue | Operation], affine_map: AffineMapAttr):
        super().__init__(
            operands=[map_operands], properties={"map": affine_map}, result_types=[IndexType()]
        )

    verify_ = MinOp.verify_
    print = MinOp.print

    @classmethod
    def parse(cls, parser: Parser) -> AffineMaxOp:
        parsed = MinOp.parse(parser)
        op = AffineMaxOp(list(parsed.operands), parsed.map)
        parsed.erase()
        return op
