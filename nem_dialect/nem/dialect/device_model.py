"""Immutable data model of type families and device configurations.

The `.nem` config parser (frontends/nem/frontends/nem_text/config_parser.py) produces
`TypeFamily` and `DeviceDecl` values; the resolver (device_resolver.py) turns a
chain of `DeviceDecl`s into one resolved `Device` that every consumer (verifier,
passes, runtime) shares.  Source locations are kept on every value but are
excluded from `==`, so "parse(print(parse(x))) == parse(x)" is a plain
dataclass comparison.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from nem.dialect.diagnostics import Diagnostic, SourceLoc, fail
from nem.dialect.semantics import ELEM_NAMES

if TYPE_CHECKING:
    from nem.dialect.families import Catalog

ELEM_TYPES = ELEM_NAMES  # the element-type table is nem.dialect.semantics.ELEM_TYPES
ABSENT = "absent"
# `src: any_supported` in the appendix's cast family: any of ELEM_TYPES (docs/conformance.md Gaps E).
ANY_SUPPORTED = "any_supported"
MUST, MAY = "MUST", "MAY"


def _loc_field() -> SourceLoc | None:
    return field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Variant:
    """One named variant of a family: its extra operand bindings and conformance.

    `conformance` holds `(cls, instantiation)` pairs, e.g. `("MUST", ("f16",))`;
    a non-parameterized family has the empty instantiation `()`.
    """

    name: str
    bindings: tuple[tuple[str, str], ...]
    conformance: tuple[tuple[str, tuple[str, ...]], ...]
    loc: SourceLoc | None = _loc_field()
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
    loc: SourceLoc | None = _loc_field()

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
    r"(?:<\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*>)?\s*\.\s*([A-Za-z_]\w*)\s*$")


@dataclass(frozen=True)
class VariantRef:
    """A variant reference ID `FAMILY<inst>.variant` (hashable set element)."""

    family: str
    inst: tuple[str, ...]
    variant: str
    loc: SourceLoc | None = _loc_field()

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
            raise fail(f"'{text}' is not a variant reference", loc, "GRAM-21",
                       "write FAMILY<elem, ...>.VARIANT, e.g. gemm.float<f16>.no_bias")
        family = re.sub(r"\s+", "", m.group(1))
        inst = tuple(p.strip() for p in m.group(2).split(",")) if m.group(2) else ()
        return VariantRef(family, inst, m.group(3), loc)


@dataclass(frozen=True)
class Topology:
    """The `topology` block; sizes are already-evaluated byte counts."""

    num_engines: int
    l2_size_bytes: int
    device_units: dict[str, int]
    per_engine: dict[str, int]
    l1_size_bytes: int


@dataclass(frozen=True)
class DeviceDecl:
    """A `device` declaration as written, before inheritance is resolved.

    `unit_characteristics` maps unit type -> {key: value} in source order.
    `locs` remembers where fields were written, keyed by dotted path
    (`spec_version`, `topology`, `num_engines`, `per_engine.NMU`, ...), so
    schema errors found after resolution still point at the user's line.
    """

    name: str
    parent: str | None
    spec_version: str | None
    topology: Topology | None
    unit_characteristics: dict[str, dict[str, int]]
    mandatory: tuple[VariantRef, ...]
    extended: tuple[VariantRef, ...]
    loc: SourceLoc | None = _loc_field()
    locs: dict[str, SourceLoc] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Device:
    """A resolved target device (inheritance applied, schema rules checked).

    `ancestors` lists the parent chain nearest first.  `mandatory` and
    `extended` keep first-listed order (root ancestor first) and are disjoint
    (DEV-03: the `extended` copy of a duplicate is dropped, with a warning in
    `warnings`).  `effective` is their union (DEV-12).
    """

    name: str
    ancestors: tuple[str, ...]
    spec_version: str
    topology: Topology
    unit_characteristics: dict[str, dict[str, int]]
    mandatory: tuple[VariantRef, ...]
    extended: tuple[VariantRef, ...]
    catalog: Catalog = field(compare=False, repr=False)
    warnings: tuple[Diagnostic, ...] = field(default=(), compare=False, repr=False)
    loc: SourceLoc | None = _loc_field()

    @cached_property
    def effective(self) -> frozenset[VariantRef]:
        return frozenset(self.mandatory) | frozenset(self.extended)

    def effective_for_family(self, family_ids: str | Iterable[str]) -> frozenset[VariantRef]:
        """effective[op] for an opcode governed by `family_ids` (a str or iterable)."""
        ids = {family_ids} if isinstance(family_ids, str) else set(family_ids)
        return frozenset(r for r in self.effective if r.family in ids)

    def units(self, unit_type: str) -> int:
        """Instance count of a unit type: per engine, or device-wide for sDMA/WDM; 0 if absent."""
        if unit_type in self.topology.device_units:
            return self.topology.device_units[unit_type]
        return self.topology.per_engine.get(unit_type, 0)

    @property
    def max_active_tokens(self) -> int | None:
        """`SEQ.max_active_tokens` (DEV-17), or None when the device does not declare it."""
        return self.unit_characteristics.get("SEQ", {}).get("max_active_tokens")
