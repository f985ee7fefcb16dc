"""Immutable data model of device configurations (type families are in
`nem.dialect.family_model`).

The `.nem` config parser (frontends/nem/frontends/nem_text/config_parser.py) produces
`DeviceDecl` values; the resolver (device_resolver.py) turns a
chain of `DeviceDecl`s into one resolved `Device` that every consumer (verifier,
passes, runtime) shares.  Source locations are kept on every value but are
excluded from `==`, so "parse(print(parse(x))) == parse(x)" is a plain
dataclass comparison.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from nem.dialect.diagnostics import Diagnostic, SourceLoc
from nem.dialect.family_model import VariantRef, loc_field

if TYPE_CHECKING:
    from nem.dialect.families import Catalog


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
    loc: SourceLoc | None = loc_field()
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
    loc: SourceLoc | None = loc_field()

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
