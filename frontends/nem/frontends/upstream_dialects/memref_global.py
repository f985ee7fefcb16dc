"""`memref.global` with upstream's custom syntax, which xDSL 0.74 lacks
("Operation memref.global does not have a custom format"):

    memref.global "private" constant @w : memref<3x2xf32> = dense<[[1.0, 2.0], ...]>
    memref.global @state : memref<4xf32> = uninitialized {alignment = 64 : i64}
    memref.global "private" @ext : memref<4xf32>

What `-one-shot-bufferize` makes of a tensor constant (weights kept as
constants).  Registered in place of xDSL's op (same properties, generic
form unchanged).  A global without an initializer (an external
declaration) holds `uninitialized`, as upstream's `uninitialized` does:
its contents come from outside the program either way.
"""

from __future__ import annotations

from xdsl.dialects import memref
from xdsl.dialects.builtin import (
    I64,
    DenseIntOrFPElementsAttr,
    IntegerAttr,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
)
from xdsl.irdl import IRDLOperation, base, irdl_op_definition, opt_prop_def, prop_def
from xdsl.parser import Parser
from xdsl.printer import Printer


@irdl_op_definition
class MemRefGlobalOp(IRDLOperation):
    name = "memref.global"

    sym_name = prop_def(SymbolNameConstraint())
    sym_visibility = prop_def(StringAttr)
    type = prop_def(MemRefType)
    initial_value = prop_def(base(UnitAttr) | base(DenseIntOrFPElementsAttr))
    constant = opt_prop_def(UnitAttr)
    alignment = opt_prop_def(IntegerAttr[I64])

    traits = memref.GlobalOp.traits
    verify_ = memref.GlobalOp.verify_

    @classmethod
    def parse(cls, parser: Parser) -> MemRefGlobalOp:
        vis = parser.parse_optional_str_literal()
        constant = UnitAttr() if parser.parse_optional_keyword("constant") else None
        sym = parser.parse_symbol_name()
        parser.parse_punctuation(":")
        typ = parser.parse_type()
        init: UnitAttr | DenseIntOrFPElementsAttr = UnitAttr()
        if parser.parse_optional_punctuation("=") and not parser.parse_optional_keyword(
            "uninitialized"
        ):
            # upstream elides the literal's type: the memref's, as a tensor
            parser.parse_keyword("dense")
            init = parser.parse_dense_int_or_fp_elements_attr(
                TensorType(typ.element_type, typ.get_shape())
                if isinstance(typ, MemRefType)
                else None
            )
        attrs = parser.parse_optional_attr_dict()
        alignment = attrs.pop("alignment", None)
        props = {
            "sym_name": sym,
            "sym_visibility": StringAttr(vis or "public"),
            "type": typ,
            "initial_value": init,
            "constant": constant,
            "alignment": alignment if isinstance(alignment, IntegerAttr) else None,
        }
        op = cls.build(properties=props, attributes=attrs)
        return op

    def print(self, printer: Printer) -> None:
        if self.sym_visibility.data != "public":
            printer.print_string(" ")
            printer.print_string_literal(self.sym_visibility.data)
        if self.constant is not None:
            printer.print_string(" constant")
        printer.print_string(" ")
        printer.print_attribute(SymbolRefAttr(self.sym_name))
        printer.print_string(" : ")
        printer.print_attribute(self.type)
        printer.print_string(" = ")
        if isinstance(self.initial_value, UnitAttr):
            printer.print_string("uninitialized")
        else:
            self.initial_value.print_without_type(printer)
        if self.alignment is not None:
            printer.print_string(" {alignment = ")
            printer.print_attribute(self.alignment)
            printer.print_string("}")
        printer.print_op_attributes(self.attributes)


GlobalOp = MemRefGlobalOp | memref.GlobalOp
"""A `memref.global` in either form: upstream's printed form (this module's
op) or xDSL's own."""
