"""Memory levels, regions and task operands of a `.nem` program (SPEC §12:
GRAM-05, GRAM-07..10, GRAM-15).

`RegionParser` reads what a statement says about memory: a buffer's level
(`DDR`, `L2`, `L1[k]`), a region expression with its type attributes
(`elem=, shape=, layout=|strides=, quant=`), and a task operand (a region
name or an inline `region(...)`, with the decorators that bind to it,
D-DECO-BIND).  `nem.frontends.nem_text.parser.ProgramParser` builds the
statements on it; the layers below it are `QuantParser` (the `quant=`
descriptor) and `ExpressionParser` (names, integer expressions, building IR).
"""

from __future__ import annotations

from typing import cast

from xdsl.ir import SSAValue

from nem.dialect.attributes import (
    DYNAMIC,
    ELEM_BY_NAME,
    MEM_LEVEL_FIX,
    MEM_LEVEL_KINDS,
    BufferType,
    DecoratorAttr,
    MemLevelAttr,
    RegionType,
)
from nem.dialect.decorators import DECORATORS
from nem.frontends.nem_text.cursor import describe
from nem.frontends.nem_text.lexer import ID, Token
from nem.frontends.nem_text.quant_parser import QuantParser
from nem.frontends.nem_text.statement_ops import region_op


class RegionParser(QuantParser):
    """Memory levels, regions and operands: the memory part of `ProgramParser`."""

    # ------------------------------------------------------------------
    # Memory levels (GRAM-05)
    # ------------------------------------------------------------------
    def _mem_level(self) -> MemLevelAttr:
        t = self.tok
        if t.kind == ID and t.text in MEM_LEVEL_KINDS and t.text != "L1":
            self.advance()
            return self._level(t.text)
        if t.kind == ID and t.text == "L1":
            self.advance()
            if self.accept("["):
                k = self._static_expr()
                self.expect("]", "GRAM-05")
                if k is None or k < 0:
                    raise self.error(
                        "the L1 engine index must be a non-negative constant expression",
                        "GRAM-05",
                        "write L1[k] with k a literal or const",
                        t,
                    )
                return self._level(f"L1[{k}]")
            return self._level("L1")
        raise self.error(
            f"expected a memory level (DDR, L2, L1 or L1[k]), found {describe(t)}",
            "GRAM-05",
            MEM_LEVEL_FIX,
        )

    def _level(self, text: str) -> MemLevelAttr:
        """The level attribute spelled `text` (`DDR`, `L1[2]`), made once."""
        level = self._levels.get(text)
        if level is None:
            level = self._levels[text] = MemLevelAttr(text)
        return level

    # ------------------------------------------------------------------
    # Regions and operands (GRAM-07, GRAM-08, GRAM-10)
    # ------------------------------------------------------------------
    def _region_expr(
        self, name: str | None, binding: str, start: Token, in_operand_list: bool = False
    ) -> SSAValue:
        kw = self.expect("region", "GRAM-07")
        self.expect("(", "GRAM-07", "after 'region'")
        buf_tok = self.expect_id("GRAM-07", "a buffer name as the first region argument")
        buf = self.scope.lookup(buf_tok.text)
        if buf is None:
            raise self.undeclared(
                buf_tok,
                f"'{buf_tok.text}' is not declared",
                "NAME-01",
                "the first argument of region(...) must name a declared buffer",
            )
        if buf.kind != "buffer":
            raise self.error(
                f"'{buf_tok.text}' is a {buf.kind}, not a buffer",
                "NAME-01",
                "the first argument of region(...) must name a declared buffer",
                buf_tok,
            )
        self.expect(",", "GRAM-07", "after the buffer name")
        offset = self._expr()
        self.expect(",", "GRAM-07", "after the region offset")
        extent = self._expr()
        self.expect(
            ")",
            "GRAM-07",
            "to close region(...)",
            "type attributes go after the closing parenthesis: region(b, off, ext) elem=...",
        )
        assert buf.value is not None  # buffers are declared with their value
        level = cast(BufferType, buf.value.type).level
        t = self.tok
        if (
            t.kind == ID
            and t.text in ("shape", "layout", "strides", "quant")
            and self.peek().text == "="
            and not t.nl_before
        ):
            raise self.error(
                f"region type attributes start with elem=, not {t.text}=",
                "GRAM-08",
                "write elem=T, shape=[...], layout=ID|strides=[...][, quant=...] in that order",
                t,
            )
        if t.text == "elem" and self.peek().text == "=":
            rtype, shape_vals, stride_vals = self._type_attrs(level, in_operand_list)
        else:
            rtype, shape_vals, stride_vals = self._untyped_region_type(level), [], []
        decos = [] if binding == "inline" else self._decorators()
        op = region_op(
            rtype,
            buf.value,
            offset,
            extent,
            shape_vals,
            stride_vals,
            name,
            binding,
            decos,
            self._loc(start if binding != "inline" else kw),
        )
        self.block.add_op(op)
        return op.results[0]

    def _type_attrs(
        self, level: MemLevelAttr, in_operand_list: bool
    ) -> tuple[RegionType, list[SSAValue], list[SSAValue]]:
        elem_tok = self.advance()
        self.advance()
        et = self.expect_id("TYPE-01", "an element type")
        if et.text not in ELEM_BY_NAME:
            raise self.error(
                f"unknown element type '{et.text}'",
                "TYPE-01",
                "use one of " + ", ".join(ELEM_BY_NAME),
                et,
            )
        self.expect(
            ",", "GRAM-08", "after elem=...", "type attributes are elem=, shape=, layout=|strides="
        )
        self.expect(
            "shape", "GRAM-08", "(type attributes come in the order elem, shape, layout|strides)"
        )
        self.expect("=", "GRAM-08")
        shape_vals = self._expr_list("shape")
        if not self.at_punct(",") or self.peek().text not in ("layout", "strides"):
            raise self.error(
                "region type attributes need elem, shape and layout or strides "
                "together; layout= or strides= is missing after shape=[...]",
                "GRAM-08",
                "add layout=ID or strides=[...] after shape",
                elem_tok,
            )
        self.expect(",", "GRAM-08", "after shape=[...]")
        layout = None
        stride_vals: list[SSAValue] = []
        strides = None
        which = self.expect_id("GRAM-08", "'layout' or 'strides'")
        self.expect("=", "GRAM-08")
        if which.text == "layout":
            layout = self.expect_id("GRAM-08", "a layout name such as NHWC").text
        elif which.text == "strides":
            stride_vals = self._expr_list("strides")
            strides = [self._static_or_dynamic(v) for v in stride_vals]
        else:
            raise self.error(
                f"expected 'layout' or 'strides', found '{which.text}'",
                "GRAM-08",
                "write layout=ID or strides=[...] after shape",
                which,
            )
        quant = None
        if self.at_punct(",") and self.peek().text == "quant" and self.peek(2).text == "=":
            self.advance()
            self.advance()
            self.advance()
            quant = self._quant()
        if (
            self.at_punct(",")
            and self.peek().text in ("layout", "strides")
            and self.peek(2).text == "="
        ):
            raise self.error(
                "a region takes either layout= or strides=, not both",
                "GRAM-08",
                "remove one of them",
                self.peek(),
            )
        shape = [self._static_or_dynamic(v) for v in shape_vals]
        rtype = self._region_type(level, et.text, shape, layout, strides, quant)
        return rtype, shape_vals, stride_vals

    def _static_or_dynamic(self, v: SSAValue) -> int:
        s = self._static(v)
        return DYNAMIC if s is None else s

    def _expr_list(self, what: str) -> list[SSAValue]:
        self.expect("[", "GRAM-09", f"to open the {what} list")
        if self.at_punct("]"):
            raise self.error(
                f"{what} lists need at least one entry",
                "GRAM-09",
                "rank-0 regions cannot be written; use shape=[1]",
            )
        vals = [self._expr()]
        while self.accept(","):
            vals.append(self._expr())
        self.expect("]", "GRAM-09", f"to close the {what} list")
        return vals

    def _operand(
        self, role_decos: list[list[DecoratorAttr]], task_decos: list[DecoratorAttr]
    ) -> SSAValue:
        t = self.tok
        if t.text == "region" and self.peek().text == "(":
            value = self._region_expr(None, "inline", t, in_operand_list=True)
        else:
            name = self.expect_id("GRAM-15", "a region name or region(...)")
            n = self.scope.lookup(name.text)
            if n is None:
                raise self.undeclared(
                    name,
                    f"'{name.text}' is not declared",
                    "NAME-01",
                    "declare the region before using it as an operand",
                )
            if n.kind != "region":
                raise self.error(
                    f"'{name.text}' is a {n.kind}, not a region",
                    "NAME-01",
                    "task operands are regions: NAME = region(buf, off, ext) ...",
                    name,
                )
            assert n.value is not None  # regions are declared with their value
            value = n.value
        if self.tok.text != "@":  # (no decorator: the common case)
            role_decos.append([])
            return value
        decos = self._decorators()
        mine = [
            d
            for d in decos
            if "region" in DECORATORS[d.DECO_NAME].targets
            or not DECORATORS[d.DECO_NAME].targets & {"compute", "transfer", "store"}
        ]
        task_decos.extend(d for d in decos if d not in mine)
        role_decos.append(mine)
        return value
