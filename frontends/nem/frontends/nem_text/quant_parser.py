"""Quantization parameters of a region type (GRAM-10): `per_tensor(scale=,
zero_point=)`, `per_channel(axis=, scales=[...], zero_points=[...])` and
`per_group(axis=, group_size=, ...)`, with every number folded to a literal
as it is read (D-QUANT-VALUES)."""

from __future__ import annotations

from typing import cast

from xdsl.ir import Attribute, SSAValue

from nem.dialect.attributes import PerChannelQuantAttr, PerGroupQuantAttr, PerTensorQuantAttr
from nem.frontends.nem_text.attribute_parser import AttributeParser
from nem.frontends.nem_text.expression_parser import ParsedValue


class QuantParser(AttributeParser):
    """The quant part of `ProgramParser` (which supplies `_value`)."""

    def _quant(self) -> Attribute:
        kind = self.expect_id("GRAM-10", "per_tensor, per_channel or per_group")
        self.expect("(", "GRAM-10")
        if kind.text == "per_tensor":
            scale = self._quant_number("scale")
            self.expect(",", "GRAM-10")
            zp = self._quant_number("zero_point")
            self.expect(")", "GRAM-10")
            return PerTensorQuantAttr(scale, zp)
        if kind.text not in ("per_channel", "per_group"):
            raise self.error(
                f"unknown quantization form '{kind.text}'",
                "GRAM-10",
                "use per_tensor(...), per_channel(...) or per_group(...)",
                kind,
            )
        axis = self._quant_int("axis")
        self.expect(",", "GRAM-10")
        group = None
        if kind.text == "per_group":
            group = self._quant_int("group_size")
            self.expect(",", "GRAM-10")
        scales = self._quant_list("scales")
        self.expect(",", "GRAM-10")
        zps = self._quant_list("zero_points")
        self.expect(")", "GRAM-10")
        if group is None:
            return PerChannelQuantAttr(axis, scales, zps)
        return PerGroupQuantAttr(axis, group, scales, zps)

    def _quant_key(self, key: str) -> None:
        self.expect(key, "GRAM-10", "(quant keys come in a fixed order)")
        self.expect("=", "GRAM-10")

    def _quant_int(self, key: str) -> int:
        """`key = INT` (an axis or a group size)."""
        self._quant_key(key)
        return self.expect_int("GRAM-10", f"an integer literal for {key}")

    def _quant_number(self, key: str) -> float | int:
        """`key = number` (a scale or a zero point, D-QUANT-VALUES)."""
        self._quant_key(key)
        return self._number()

    def _quant_list(self, key: str) -> list[float | int]:
        self.expect(key, "GRAM-10", "(quant keys come in a fixed order)")
        self.expect("=", "GRAM-10")
        self.expect("[", "GRAM-10")
        if self.at_punct("]"):
            raise self.error(
                f"{key} must not be empty", "GRAM-10", "give one entry per channel/group"
            )
        vals = [self._number()]
        while self.accept(","):
            vals.append(self._number())
        self.expect("]", "GRAM-10")
        return vals

    def _number(self) -> float | int:
        """A numeric value folded now: quant scales/zero points and float
        attributes are literal data (decision D-QUANT-VALUES)."""
        tok = self.tok
        v = self._value()
        if v.kind == "float":
            return cast(float, v.data)
        if v.kind == "int":
            s = self._static(cast(SSAValue, v.data))
            if s is not None:
                return s
        raise self.error(
            "expected a constant number",
            "GRAM-10",
            "write a literal, a const name or literal arithmetic",
            tok,
        )

    def _value(self) -> ParsedValue:
        """An attribute value: `ProgramParser._value`."""
        raise NotImplementedError
