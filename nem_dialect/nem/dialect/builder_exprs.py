"""The builder's integer expressions (`nem.dialect.builder`): consts, lets,
loop variables and literals combined with `+ - * / %` in Python, kept as a
small tree until the builder materializes them as `arith` index ops where
they are used (`NemBuilder._emit`), so the printer prints them as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from xdsl.dialects.builtin import IndexType, StringAttr
from xdsl.ir import Operation, SSAValue

from nem.dialect.expressions import Evaluator, apply_binop


class Expr:
    """An integer expression, materialized as `arith` index ops where used."""

    def _bin(self, op: str, other: IntLike, reverse: bool = False) -> BinExpr:
        rhs = as_expr(other)
        return BinExpr(op, rhs, self) if reverse else BinExpr(op, self, rhs)

    def __add__(self, other: IntLike) -> BinExpr:
        return self._bin("+", other)

    def __radd__(self, other: IntLike) -> BinExpr:
        return self._bin("+", other, True)

    def __sub__(self, other: IntLike) -> BinExpr:
        return self._bin("-", other)

    def __rsub__(self, other: IntLike) -> BinExpr:
        return self._bin("-", other, True)

    def __mul__(self, other: IntLike) -> BinExpr:
        return self._bin("*", other)

    def __rmul__(self, other: IntLike) -> BinExpr:
        return self._bin("*", other, True)

    def __truediv__(self, other: IntLike) -> BinExpr:
        """NEM's `/`: truncates toward zero (D-EXPR-MOD)."""
        return self._bin("/", other)

    def __rtruediv__(self, other: IntLike) -> BinExpr:
        return self._bin("/", other, True)

    def __mod__(self, other: IntLike) -> BinExpr:
        """NEM's `mod`: the truncated remainder (D-EXPR-MOD), not Python's."""
        return self._bin("mod", other)

    def __rmod__(self, other: IntLike) -> BinExpr:
        return self._bin("mod", other, True)

    def mod(self, other: IntLike) -> BinExpr:
        return self._bin("mod", other)

    def __neg__(self) -> BinExpr:
        """`0 - x`: NEM has no unary minus (D-EXPR-NEG)."""
        return BinExpr("-", Lit(0), self)

    def __floordiv__(self, other: IntLike) -> BinExpr:
        raise TypeError(
            "NEM has no floor division: `/` truncates toward zero (D-EXPR-MOD); write `a / b`"
        )

    def static(self) -> int | None:
        """The value when it depends on no loop variable, else None."""
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class Lit(Expr):
    """An integer literal (negative ones print as `(0 - x)`, D-EXPR-NEG)."""

    value: int

    def static(self) -> int | None:
        return self.value

    def __repr__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, eq=False)
class Sym(Expr):
    """An `index` SSA value: a const, a let, a loop variable or any index
    value of existing IR."""

    value: SSAValue

    def static(self) -> int | None:
        return Evaluator().static(self.value)

    def __repr__(self) -> str:
        owner = self.value.owner
        name = owner.properties.get("name") if isinstance(owner, Operation) else None
        return name.data if isinstance(name, StringAttr) else (self.value.name_hint or "?")


@dataclass(frozen=True, eq=False)
class BinExpr(Expr):
    """`lhs op rhs` with op one of `+ - * / mod`."""

    op: str
    lhs: Expr
    rhs: Expr

    def static(self) -> int | None:
        a, b = self.lhs.static(), self.rhs.static()
        return None if a is None or b is None else apply_binop(self.op, a, b)

    def __repr__(self) -> str:
        return f"({self.lhs!r} {self.op} {self.rhs!r})"


IntLike: TypeAlias = Expr | int | SSAValue
"""What the builder takes wherever NEM takes an integer expression."""


def as_expr(x: IntLike) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        raise TypeError(f"{x!r} is a bool, not an integer expression")
    if isinstance(x, int):
        return Lit(x)
    if isinstance(x, SSAValue) and isinstance(x.type, IndexType):
        return Sym(x)
    raise TypeError(f"expected an integer expression (int, Expr or index value), got {x!r}")
