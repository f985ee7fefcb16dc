"""`affine.if` in upstream's custom syntax, which xDSL 0.74 only has in the
generic form:

    affine.if #set(%d0, ...)[%s0, ...] {...}
    %r = affine.if affine_set<(d0) : (d0 - 2 >= 0)>(%i) -> f32 {...} else {...}

A region without a terminator gets an empty `affine.yield` (upstream's
implicit terminator when the op has no results).
"""

from __future__ import annotations

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineSetAttr, IndexType
from xdsl.ir import Block, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import RecursiveMemoryEffect


@irdl_op_definition
class AffineIfOp(IRDLOperation):
    """xDSL's `affine.IfOp` fields, with upstream's custom syntax."""

    name = "affine.if"
    args = var_operand_def(IndexType)
    res = var_result_def()
    condition = prop_def(AffineSetAttr)
    then_region = region_def("single_block")
    else_region = region_def()
    traits = traits_def(RecursiveMemoryEffect())

    @classmethod
    def parse(cls, parser: Parser) -> AffineIfOp:
        cond = parser.parse_attribute()
        if not isinstance(cond, AffineSetAttr):
            parser.raise_error("expected an affine set")
        index = IndexType()
        operands = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN,
            lambda: parser.resolve_operand(parser.parse_unresolved_operand(), index),
        )
        syms = parser.parse_optional_comma_separated_list(
            Parser.Delimiter.SQUARE,
            lambda: parser.resolve_operand(parser.parse_unresolved_operand(), index),
        )
        results = []
        if parser.parse_optional_punctuation("->") is not None:
            if parser.parse_optional_punctuation("(") is not None:
                results = parser.parse_comma_separated_list(
                    Parser.Delimiter.NONE, parser.parse_type
                )
                parser.parse_punctuation(")")
            else:
                results = [parser.parse_type()]
        then_region = _terminated(parser.parse_region(), not results)
        else_region = Region()
        if parser.parse_optional_keyword("else") is not None:
            else_region = _terminated(parser.parse_region(), not results)
        attrs = parser.parse_optional_attr_dict()
        op = cls.create(
            operands=[*operands, *(syms or [])],
            result_types=results,
            properties={"condition": cond},
            attributes=attrs,
            regions=[then_region, else_region],
        )
        return op

    def print(self, printer: Printer) -> None:
        cond = self.condition
        n_dims = cond.data.num_dims
        printer.print_string(" ")
        printer.print_attribute(cond)
        printer.print_string("(")
        printer.print_list(self.args[:n_dims], printer.print_ssa_value)
        printer.print_string(")")
        if len(self.args) > n_dims:
            printer.print_string("[")
            printer.print_list(self.args[n_dims:], printer.print_ssa_value)
            printer.print_string("]")
        if self.res:
            printer.print_string(" -> (")
            printer.print_list([r.type for r in self.res], printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(self.then_region, print_block_terminators=bool(self.res))
        if self.else_region.blocks:
            printer.print_string(" else ")
            printer.print_region(self.else_region, print_block_terminators=bool(self.res))


def _terminated(region: Region, implicit: bool) -> Region:
    """Add upstream's implicit empty `affine.yield` to an op without results."""
    if implicit:
        if not region.blocks:
            region.add_block(Block())
        block = region.block
        if not isinstance(block.last_op, affine.YieldOp):
            block.add_op(affine.YieldOp.create())
    return region
