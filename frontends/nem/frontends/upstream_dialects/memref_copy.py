"""`memref.copy` with upstream's custom syntax, which xDSL 0.74 lacks:

    memref.copy %src, %dst : memref<4xf32> to memref<4xf32, 2>

Registered in place of xDSL's `memref.copy` (same operands, generic form
unchanged); `COPY_OPS` lets passes accept either class.
"""

from __future__ import annotations

from typing import cast

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def
from xdsl.parser import Parser
from xdsl.printer import Printer


@irdl_op_definition
class MemRefCopyOp(IRDLOperation):
    name = "memref.copy"
    source = operand_def(MemRefType)
    destination = operand_def(MemRefType)

    def __init__(self, source: SSAValue | Operation, destination: SSAValue | Operation):
        super().__init__(operands=[source, destination])

    verify_ = memref.CopyOp.verify_

    @classmethod
    def parse(cls, parser: Parser) -> MemRefCopyOp:
        src = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        dst = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        src_type = parser.parse_type()
        parser.parse_keyword("to")
        dst_type = parser.parse_type()
        return MemRefCopyOp(
            parser.resolve_operand(src, src_type), parser.resolve_operand(dst, dst_type)
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(", ")
        printer.print_operand(self.destination)
        printer.print_string(" : ")
        printer.print_attribute(cast(MemRefType, self.source.type))
        printer.print_string(" to ")
        printer.print_attribute(cast(MemRefType, self.destination.type))


COPY_OPS = memref.CopyOp | MemRefCopyOp
