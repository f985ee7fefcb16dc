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

`use_upstream_affine_ssa_maps` replaces the two functions (idempotent);
`nem.frontends.upstream_dialects` applies it on import, before any parse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import affine
from xdsl.ir import SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)
from xdsl.parser.affine_parser import AffineParser
from xdsl.printer import Printer
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

__all__ = ["use_upstream_affine_ssa_maps", "print_affine_map_of_ssa_ids"]


def _parse_affine_map_of_ssa_ids(self: AffineParser) -> tuple[AffineMap, Sequence[Span]]:
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
            prec = affine._AFFINE_EXPR_PRECEDENCE[kind]  # noqa: SLF001
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


def use_upstream_affine_ssa_maps() -> None:
    """Make xDSL parse and print affine accesses as upstream (idempotent)."""
    AffineParser.parse_affine_map_of_ssa_ids = _parse_affine_map_of_ssa_ids  # type: ignore[method-assign]
    affine._print_affine_map_of_ssa_ids = print_affine_map_of_ssa_ids  # noqa: SLF001
