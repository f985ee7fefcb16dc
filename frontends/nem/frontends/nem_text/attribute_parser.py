"""Attribute values and decorators of a `.nem` program (SPEC §12: D-LEX-1,
LEX-03, GRAM-17, DECO-*).

`AttributeParser` gives a parsed value its IR form -- an integer expression
as an argument reference, a FLOAT expression folded to its literal (FLOATs are
literal data, LEX-03), a string, a list, an element type -- and reads the
decorators that follow buffers, regions, operands, tasks and loop headers,
each made once per parse.  It builds on `ExpressionParser` (names, integer
expressions, building IR); `QuantParser`, `RegionParser` and `ProgramParser`
build on it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import cast

from xdsl.dialects.builtin import ArrayAttr, FloatAttr, StringAttr
from xdsl.ir import Attribute, SSAValue

from nem.dialect.attributes import ELEM_BY_NAME, ArgRefAttr, DecoratorAttr
from nem.dialect.decorators import DECORATORS
from nem.dialect.expressions import PRECEDENCE
from nem.dialect.semantics.units import UNIT_TYPES
from nem.frontends.nem_text.expression_parser import ExpressionParser, ParsedValue
from nem.frontends.nem_text.lexer import FLOAT, ID, INT, STRING, Token, unquote

_FLOAT_OPS: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "mod": operator.mod,
}
"""How a FLOAT expression combines two literals (only the operator applied:
`1.0 + 0` must not divide by zero)."""


class AttributeParser(ExpressionParser):
    """Attribute values and decorators: the layer of `ProgramParser` above
    its integer expressions."""

    def __init__(self, text: str, file: str, at: tuple[int, int] = (0, 0)):
        super().__init__(text, file, at)
        # decorator attributes are immutable values: one per distinct
        # decorator written (`@resource(DMA[0])` on thousands of tasks);
        # an xDSL attribute's verified construction costs 10 to 20 µs
        self._decos: dict[tuple[object, ...], DecoratorAttr] = {}

    # ------------------------------------------------------------------
    # Values and attributes
    # ------------------------------------------------------------------
    def _numeric_value(self) -> ParsedValue:
        """An expr that may contain FLOATs: integer-only ones become SSA values;
        ones with a FLOAT are folded now (FLOATs are literal data, LEX-03)."""
        start = self.pos
        t = self.tok
        if self._expr_has_float():
            self.seek(start)
            value = float(self._float_expr())
            if not math.isfinite(value):
                # a binary64 overflow (`1.0e400`, `1.0e300 * 1.0e300`): the
                # value cannot be written back as a NEM literal (D-LIMITS)
                raise self.error(
                    "the float value overflows a 64-bit float (magnitude above 1.8e308)",
                    "LEX-02",
                    "write a value of magnitude below 1.8e308",
                    t,
                )
            return ParsedValue("float", value, t)
        self.seek(start)
        return ParsedValue("int", self._expr(), t)

    def _expr_has_float(self) -> bool:
        depth = 0
        while True:
            t = self.tok
            if t.kind == FLOAT:
                return True
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                if depth == 0:
                    return False
                depth -= 1
            elif not (t.kind in (INT, ID) or t.text in ("+", "-", "*", "/", "mod")):
                return False
            self.advance()

    def _float_expr(self, min_prec: int = 0) -> float:
        """A FLOAT expression (literals, parentheses and the integer
        operators), folded by precedence climbing.  Methods, not closures
        over the parser: two nested functions calling each other are a
        reference cycle holding the parser, so each float attribute kept
        the parser, and every token of the text, alive until the next
        cyclic collection (1.6 M tokens of DenseNet-121's program, which
        `parse_nem` pauses the collector for)."""
        lhs = self._float_primary()
        while (
            self.tok.text in PRECEDENCE
            and self.tok.kind != STRING
            and PRECEDENCE[self.tok.text] > min_prec
        ):
            op_tok = self.advance()
            op = op_tok.text
            rhs = self._float_expr(PRECEDENCE[op])
            if op in ("/", "mod") and rhs == 0:
                raise self.error(
                    "division by zero",
                    "CONST-05",
                    f"give '{op}' a non-zero right operand",
                    op_tok,
                )
            lhs = _FLOAT_OPS[op](lhs, rhs)
        return lhs

    def _float_primary(self) -> float:
        t = self.advance()
        if t.kind in (FLOAT, INT):
            return float(t.text)
        if t.text == "(":
            with self._nested(t, "parentheses"):
                v = self._float_expr()
            self.expect(")", "GRAM-16")
            return v
        raise self.error(
            "only literals may be combined with a FLOAT",
            "LEX-03",
            "write the float value as a literal",
            t,
        )

    def _value_attr(
        self,
        val: ParsedValue,
        args: list[SSAValue],
        type_: str | None = None,
        key: str | None = None,
    ) -> Attribute:
        """Give a parsed value its IR form; `type_` is the registry type."""
        if type_ == "elem" and val.kind != "id":
            # accum_type is the accumulation type of reducing ops (TYPE-06)
            rule = "TYPE-06" if key == "accum_type" else "TASK-13"
            raise self.error(
                f"'{key}' takes an element type", rule, "write e.g. accum_type=i32", val.tok
            )
        if val.kind == "id":
            if type_ == "elem" or (type_ is None and val.data in ELEM_BY_NAME):
                if val.data not in ELEM_BY_NAME:
                    raise self.error(
                        f"unknown element type '{val.data}'",
                        "TYPE-01",
                        "use one of " + ", ".join(ELEM_BY_NAME),
                        val.tok,
                    )
                return ELEM_BY_NAME[val.data]
            raise self.error(
                f"'{val.data}' is not declared",
                "NAME-01",
                "attribute values are numbers, strings, lists, element types, or "
                "names of consts/lets/loop variables",
                val.tok,
            )
        if val.kind == "float":
            if type_ in ("int", "int_list"):
                raise self.error(
                    f"'{key}' takes integers, not a FLOAT",
                    "LEX-03",
                    "write an integer expression",
                    val.tok,
                )
            return FloatAttr(cast(float, val.data), 64)
        if val.kind == "int":
            if type_ == "float":
                s = self._static(cast(SSAValue, val.data))
                if s is not None:
                    return FloatAttr(float(s), 64)
            args.append(cast(SSAValue, val.data))
            return ArgRefAttr(len(args) - 1)
        if val.kind == "string":
            return StringAttr(cast(str, val.data))
        if val.kind == "list":
            elem_type = "int" if type_ == "int_list" else None
            return ArrayAttr(
                tuple(
                    self._value_attr(v, args, elem_type, key)
                    for v in cast(list[ParsedValue], val.data)
                )
            )
        raise self.error(
            "a region is not allowed as an attribute value",
            "GRAM-14",
            "pass regions as operands after in/out",
            val.tok,
        )

    # ------------------------------------------------------------------
    # Decorators (GRAM-17, DECO-*)
    # ------------------------------------------------------------------
    def _decorators(self) -> list[DecoratorAttr]:
        decos = []
        while self.at_punct("@"):
            self.advance()
            name = self.expect_id("GRAM-17", "a decorator name after '@'")
            info = DECORATORS.get(name.text)
            if info is None:
                raise self.error(
                    f"unknown decorator '@{name.text}'",
                    "DECO-01",
                    "known decorators: " + ", ".join(d.usage for d in DECORATORS.values()),
                    name,
                )
            decos.append(self._decorator_args(name, info.args))
        return decos

    def _decorator_args(self, name: Token, kind: str) -> DecoratorAttr:
        info = DECORATORS[name.text]
        if kind == "none":
            if self.at_punct("("):
                raise self.error(
                    f"@{name.text} takes no arguments", "DECO-03", f"write {info.usage}"
                )
            return self._deco(info.attr)
        if not self.accept("("):
            raise self.error(f"@{name.text} needs an argument", "DECO-03", f"write {info.usage}")
        if kind == "unit":
            unit = self.expect_id("GRAM-17", "an execution unit type")
            if unit.text not in UNIT_TYPES:
                raise self.error(
                    f"unknown execution unit '{unit.text}'",
                    "GRAM-17",
                    "units are " + ", ".join(UNIT_TYPES),
                    unit,
                )
            self.expect("[", "RES-02", "after the unit type", "write @resource(UNIT[index])")
            idx_tok = self.tok
            index = self._static_expr()
            self.expect("]", "RES-02")
            self.expect(")", "DECO-03", f"to close @{name.text}(...)")
            if index is None or index < 0:
                raise self.error(
                    "the unit index must be a non-negative constant",
                    "RES-02",
                    "write e.g. @resource(CSTL[0])",
                    idx_tok,
                )
            return self._deco(info.attr, unit.text, index)
        tok = self.tok
        if kind == "tag":
            if tok.kind not in (ID, STRING):
                raise self.error(
                    f"@{name.text} takes a name or a string", "DECO-03", f"write {info.usage}", tok
                )
            self.advance()
            self.expect(")", "DECO-03", f"(@{name.text} takes one argument)")
            if tok.kind == STRING:
                return self._deco(info.attr, unquote(tok.text), True)
            return self._deco(info.attr, tok.text, False)
        if tok.kind == FLOAT:
            raise self.error(
                f"@{name.text} takes an integer, not a FLOAT", "LEX-03", f"write {info.usage}", tok
            )
        n = self._static_expr()
        self.expect(")", "DECO-03", f"(@{name.text} takes one argument)")
        if n is None:
            raise self.error(
                f"@{name.text} needs a constant integer",
                "DECO-03",
                f"write {info.usage} with a literal or const",
                tok,
            )
        return self._deco(info.attr, n)

    def _deco(self, cls: Callable[..., DecoratorAttr], *args: object) -> DecoratorAttr:
        """The decorator attribute `cls(*args)`, made once per parse."""
        key = (cls, *args)
        attr = self._decos.get(key)
        if attr is None:
            attr = self._decos[key] = cls(*args)
        return attr
