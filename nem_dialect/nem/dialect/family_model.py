"""Immutable data model of type families: `type_family` declarations, their
variants and variant references (`FAMILY<inst>.variant`).

The `.nem` config parser (frontends/nem/frontends/nem_text/config_parser.py)
produces `TypeFamily` values; `nem.dialect.families` builds the catalog and the
opcode type matcher from them, and a resolved `Device`
(`nem.dialect.device_model`) lists the `VariantRef`s it supports.  Source
locations are kept on every value but excluded from `==`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nem.dialect.diagnostics import SourceLoc, fail
from nem.dialect.elements import ELEM_NAMES


def loc_field() -> SourceLoc | None:
    """A dataclass field for a source location, left out of `==` and `repr`."""
    return field(default=None, compare=False, repr=False)


ELEM_TYPES = ELEM_NAMES  # the element-type table is nem.dialect.elements.ELEM_TYPES
ABSENT = "absent"
# `src: any_supported` in the appendix's cast family: any of ELEM_TYPES (docs/conformance.md Gaps E).
ANY_SUPPORTED = "any_supported"
MUST, MAY = "MUST", "MAY"


@dataclass(frozen=True)
class Variant:
    """One named variant of a family: its extra operand bindings and conformance.

    `conformance` holds `(cls, instantiation)` pairs, e.g. `("MUST", ("f16",))`;
    a non-parameterized family has the empty instantiation `()`.
    """

    name: str
    bindings: tuple[tuple[str, str], ...]
    conformance: tuple[tuple[str, tuple[str, ...]], ...]
    loc: SourceLoc | None = loc_field()
    entry_locs: tuple[SourceLoc, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class TypeFamily:
    """A `type_family` declaration (SPEC Type Family Grammar).

    `operands` and `attributes` keep declaration order (for printing).  The
    appendix form `quant = required on dst` is stored as the attribute
    `("quant", "required")` plus `quant_required_on = ("dst",)`.
    """

    id: str
    params: tuple[tuple[str, tuple[str, ...]], ...]
    operands: tuple[tuple[str, str], ...]
    attributes: tuple[tuple[str, str], ...]
    quant_required_on: tuple[str, ...]
    variants: tuple[Variant, ...]
    loc: SourceLoc | None = loc_field()

    def attribute(self, name: str) -> str | None:
        return dict(self.attributes).get(name)

    @property
    def accum(self) -> str | None:
        return self.attribute("accum")

    @property
    def quant(self) -> str | None:
        return self.attribute("quant")

    def variant(self, name: str) -> Variant | None:
        return next((v for v in self.variants if v.name == name), None)


_REF_RE = re.compile(
    r"^\s*([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)?)\s*"
    r"(?:<\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*>)?\s*\.\s*([A-Za-z_]\w*)\s*$"
)


@dataclass(frozen=True)
class VariantRef:
    """A variant reference ID `FAMILY<inst>.variant` (hashable set element)."""

    family: str
    inst: tuple[str, ...]
    variant: str
    loc: SourceLoc | None = loc_field()

    def __str__(self) -> str:
        inst = f"<{', '.join(self.inst)}>" if self.inst else ""
        return f"{self.family}{inst}.{self.variant}"

    @staticmethod
    def parse(text: str, loc: SourceLoc | None = None) -> VariantRef:
        """Parse `gemm.float<bf16>.no_bias`, `cast.default`, ... (GRAM-21).

        The regex backtracks, which settles the `cast.default` ambiguity of
        `family_id ::= ID ("." ID)?` (docs/conformance.md Gaps E).
        """
        m = _REF_RE.match(text)
        if m is None:
            raise fail(
                f"'{text}' is not a variant reference",
                loc,
                "GRAM-21",
                "write FAMILY<elem, ...>.VARIANT, e.g. gemm.float<f16>.no_bias",
            )
        family = re.sub(r"\s+", "", m.group(1))
        inst = tuple(p.strip() for p in m.group(2).split(",")) if m.group(2) else ()
        return VariantRef(family, inst, m.group(3), loc)
