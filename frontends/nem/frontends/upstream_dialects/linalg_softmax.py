"""`linalg.softmax`, which xDSL 0.74 lacks (D-LOW-SOFTMAX).

Upstream's op is not a structured op (`transform.structured.generalize`
does not apply to it, so `upstream_ops` cannot rewrite it into a
`linalg.generic`); the lowering raises it to NEM `softmax` as it is.  Both
upstream forms parse:

    linalg.softmax dimension(1) ins(%x : memref<8x8xf16>) outs(%y : memref<8x8xf16>)
    "linalg.softmax"(%x, %y) <{dimension = 1 : i64}> : (memref<8x8xf16>, memref<8x8xf16>) -> ()

and the tensor form (`-> tensor<...>` results), which the lowering rejects
as it rejects every linalg op on tensors (bufferize first).
"""

from __future__ import annotations

from xdsl.dialects.builtin import I64, IntegerAttr, IntegerType, MemRefType, TensorType
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, prop_def, var_result_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException


@irdl_op_definition
class SoftmaxOp(IRDLOperation):
    name = "linalg.softmax"
    input = operand_def(MemRefType | TensorType)
    output = operand_def(MemRefType | TensorType)
    result = var_result_def(TensorType)
    dimension = prop_def(IntegerAttr[I64])

    def __init__(
        self,
        input: SSAValue,
        output: SSAValue,
        dimension: int,
        result_types: list[Attribute] | None = None,
    ):
        super().__init__(
            operands=[input, output],
            result_types=[result_types or []],
            properties={"dimension": IntegerAttr(dimension, IntegerType(64))},
        )

    def verify_(self) -> None:
        t = self.input.type
        rank = len(t.get_shape()) if isinstance(t, MemRefType | TensorType) else 0
        d = self.dimension.value.data
        if not 0 <= d < rank:
            raise VerifyException(f"linalg.softmax: dimension {d} is out of range for rank {rank}")
        if self.input.type != self.output.type:
            raise VerifyException("linalg.softmax: input and output types differ")

    @classmethod
    def parse(cls, parser: Parser) -> SoftmaxOp:
        parser.parse_keyword("dimension")
        parser.parse_punctuation("(")
        dim = parser.parse_integer()
        parser.parse_punctuation(")")
        operands = []
        for word in ("ins", "outs"):
            parser.parse_keyword(word)
            parser.parse_punctuation("(")
            v = parser.parse_unresolved_operand()
            parser.parse_punctuation(":")
            operands.append(parser.resolve_operand(v, parser.parse_type()))
            parser.parse_punctuation(")")
        results: list[Attribute] = []
        if parser.parse_optional_punctuation("->") is not None:
            results = [parser.parse_type()]
        attrs = parser.parse_optional_attr_dict()
        op = cls(operands[0], operands[1], dim, results)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" dimension({self.dimension.value.data}) ins(")
        printer.print_operand(self.input)
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(") outs(")
        printer.print_operand(self.output)
        printer.print_string(" : ")
        printer.print_attribute(self.output.type)
        printer.print_string(")")
        if self.result:
            printer.print_string(" -> ")
            printer.print_attribute(self.result[0].type)
        printer.print_op_attributes(self.attributes)
