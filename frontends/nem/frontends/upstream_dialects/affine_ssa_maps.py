"""Affine accesses `%m[%i, symbol(%n) + 1]` read and written as upstream
MLIR does (D-XDSL-AFFINE-SSA; xDSL 0.74 defect, docs/upstream-reports.md).

xDSL 0.74's `parse_affine_map_of_ssa_ids` (the `[...]` of `affine.load`,
`affine.store`, `affine.vector_load/store` and the project's
`affine.dma_start/dma_wait`) makes every SSA id a *symbol* of the map and
does not take `symbol(%n)`; its printer writes symbols as plain `%n`.
Upstream makes a bare `%x` a *dim* and `symbol(%x)` a symbol (dims and
symbols numbered in order of first use, the operand list dims first, then
symbols) and prints symbols as `symbol(%x)`.  xDSL's reading was equal as a
function of the operands, but its generic form, `affine_map<()[s0, s1] ->
(s0, s1)>` with loop indices as operands, is rejected by upstream ("operand
cannot be used as a symbol"), and upstream's copy generation writes
`%m[0, symbol(%c0)]`, which xDSL could not parse.

Without changing xDSL (issue 36): `UpstreamParser` (the base of every
parser NEM reads MLIR with) reads the maps as upstream, and `ACCESS_OPS`,
subclasses of xDSL's four access ops of the same names in the `affine`
dialect NEM's contexts load, print them as upstream and are what that
parser builds.  xDSL's own classes and parser are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Self

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, IndexType, MemRefType, VectorType
from xdsl.ir import Attribute, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.parser.affine_parser import AffineParser
from xdsl.printer import Printer
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

__all__ = [
    "ACCESS_OPS",
    "UpstreamParser",
    "parse_access",
    "parse_unresolved_access",
    "print_affine_map_of_ssa_ids",
]


class _AffineParser(AffineParser):
    def parse_affine_map_of_ssa_ids(self) -> tuple[AffineMap, Sequence[Span]]:
        """`[` affine-expr (`,` affine-expr)* `]` over SSA ids, as upstream's
        `AffineParser::parseAffineMapOfSSAIds`: `%x` is a dim, `symbol(%x)` a
        symbol, a name seen before keeps its first meaning; the spans are those
        of the operands, dims first, then symbols."""
        seen: dict[str, AffineExpr] = {}
        dims: list[Span] = []
        syms: list[Span] = []

        def ssa_id(is_symbol: bool) -> AffineExpr:
            span = self._parse_token(MLIRTokenKind.PERCENT_IDENT, "expected SSA identifier").span
            if span.text not in seen:
                if is_symbol:
                    seen[span.text] = AffineExpr.symbol(len(syms))
                    syms.append(span)
                else:
                    seen[span.text] = AffineExpr.dimension(len(dims))
                    dims.append(span)
            return seen[span.text]

        def parse_optional_id() -> AffineExpr | None:
            token = self._current_token
            if token.kind is MLIRTokenKind.PERCENT_IDENT:
                return ssa_id(False)
            if token.kind is MLIRTokenKind.BARE_IDENT and token.text == "symbol":
                self._consume_token()
                self._parse_token(MLIRTokenKind.L_PAREN, "expected '(' at start of SSA symbol")
                expr = ssa_id(True)
                self._parse_token(MLIRTokenKind.R_PAREN, "expected ')' at end of SSA symbol")
                return expr
            return None

        exprs = self.parse_comma_separated_list(
            self.Delimiter.SQUARE, lambda: self._parse_affine_expr(parse_optional_id)
        )
        return AffineMap(len(dims), len(syms), tuple(exprs)), (*dims, *syms)


class UpstreamParser(Parser):
    """xDSL's parser, reading the `[...]` of affine accesses as upstream
    (D-XDSL-AFFINE-SSA): the base of `LocatingParser` and of the kernel
    interpreter's parser."""

    def parse_affine_map_of_ssa_ids(self) -> tuple[AffineMap, Sequence[SSAValue[IndexType]]]:
        amap, spans = _AffineParser(self._parser_state).parse_affine_map_of_ssa_ids()
        operands = [self.resolve_operand(UnresolvedOperand(s, 0), IndexType()) for s in spans]
        return amap, operands


def parse_unresolved_access(
    parser: Parser,
) -> tuple[UnresolvedOperand, AffineMap, list[SSAValue]]:
    """`%memref[<affine-map-of-ssa-ids>]`, the memref left for the caller to
    resolve (a DMA's operands share one trailing type list)."""
    memref = parser.parse_unresolved_operand()
    amap, indices = parser.parse_affine_map_of_ssa_ids()
    return memref, amap, list(indices)


def parse_access(parser: Parser) -> tuple[SSAValue, AffineMap, list[SSAValue], MemRefType]:
    """`%memref[<affine-map-of-ssa-ids>] : <memref type>`, the memref resolved."""
    memref, amap, indices = parse_unresolved_access(parser)
    parser.parse_punctuation(":")
    memref_type = parser.parse_type()
    if not isinstance(memref_type, MemRefType):
        parser.raise_error("Expected memref type")
    return parser.resolve_operand(memref, memref_type), amap, indices, memref_type


def _print_access(
    printer: Printer, memref: SSAValue, amap: AffineMap, indices: Sequence[SSAValue]
) -> None:
    printer.print_ssa_value(memref)
    print_affine_map_of_ssa_ids(printer, amap, indices)
    printer.print_string(" : ")
    printer.print_attribute(memref.type)


_PRECEDENCE = {
    AffineBinaryOpKind.Add: 10,
    AffineBinaryOpKind.Mul: 20,
    AffineBinaryOpKind.Mod: 20,
    AffineBinaryOpKind.FloorDiv: 20,
    AffineBinaryOpKind.CeilDiv: 20,
}
"""The binding strength of each operator, as xDSL's printer parenthesizes."""


def _print_expr(
    printer: Printer, expr: AffineExpr, name: Callable[[AffineExpr], None], min_prec: int = 0
) -> None:
    """xDSL's `_print_affine_expr_of_ssa_ids` (its parenthesization), with
    dims and symbols printed by `name`."""
    match expr:
        case AffineConstantExpr(value=value):
            printer.print_string(str(value))
        case AffineDimExpr() | AffineSymExpr():
            name(expr)
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            prec = _PRECEDENCE[kind]
            if prec < min_prec:
                printer.print_string("(")
            _print_expr(printer, lhs, name, prec)
            printer.print_string(f" {kind.get_token()} ")
            _print_expr(printer, rhs, name, prec if kind == AffineBinaryOpKind.Add else prec + 1)
            if prec < min_prec:
                printer.print_string(")")
        case _:
            raise ValueError(f"Unexpected affine expr {expr}")


def print_affine_map_of_ssa_ids(
    printer: Printer,
    map: AffineMap,  # noqa: A002 - xDSL's name
    operands: Sequence[SSAValue],
) -> None:
    """`[expr, ...]` with dim k as its operand `%x` and symbol k as
    `symbol(%y)` (operand `num_dims + k`), as upstream prints it."""
    amap = map

    def name(e: AffineExpr) -> None:
        if isinstance(e, AffineDimExpr):
            printer.print_ssa_value(operands[e.position])
        else:
            assert isinstance(e, AffineSymExpr)
            printer.print_string("symbol(")
            printer.print_ssa_value(operands[amap.num_dims + e.position])
            printer.print_string(")")

    printer.print_string("[")
    for i, result in enumerate(amap.results):
        if i:
            printer.print_string(", ")
        _print_expr(printer, result, name)
    printer.print_string("]")


class LoadOp(affine.LoadOp):
    """`affine.load`, its map read and printed as upstream's."""

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        memref, amap, indices, memref_type = parse_access(parser)
        return cls(memref, indices, AffineMapAttr(amap), memref_type.get_element_type())

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_access(printer, self.memref, self.map.data, self.indices)


class StoreOp(affine.StoreOp):
    """`affine.store`, its map read and printed as upstream's."""

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref, amap, indices, memref_type = parse_access(parser)
        stored = parser.resolve_operand(value, memref_type.get_element_type())
        return cls(stored, memref, indices, AffineMapAttr(amap))

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        _print_access(printer, self.memref, self.map.data, self.indices)


def _vector_type(parser: Parser, name: str) -> Attribute:
    """`, <vector type>` after the access."""
    parser.parse_punctuation(",")
    t = parser.parse_type()
    if not isinstance(t, VectorType):
        parser.raise_error(f"Expected {name} to take a {VectorType.name}, but found: {t}")
    return t


class VectorLoadOp(affine.VectorLoadOp):
    """`affine.vector_load`, its map read and printed as upstream's."""

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        memref, amap, indices, _ = parse_access(parser)
        result_type = _vector_type(parser, cls.name)
        return cls(memref, indices, AffineMapAttr(amap), result_type)  # type: ignore[arg-type]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_access(printer, self.memref, self.map.data, self.indices)
        printer.print_string(", ")
        printer.print_attribute(self.result.type)


class VectorStoreOp(affine.VectorStoreOp):
    """`affine.vector_store`, its map read and printed as upstream's."""

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref, amap, indices, _ = parse_access(parser)
        stored = parser.resolve_operand(value, _vector_type(parser, cls.name))
        return cls(stored, memref, indices, AffineMapAttr(amap))  # type: ignore[arg-type]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        _print_access(printer, self.memref, self.map.data, self.indices)
        printer.print_string(", ")
        printer.print_attribute(self.value.type)


ACCESS_OPS = (LoadOp, StoreOp, VectorLoadOp, VectorStoreOp)
"""The affine access ops as upstream reads and prints them, in place of xDSL's."""
