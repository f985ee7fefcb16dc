"""The opcode registry: `registry/opcodes.yaml` loaded into typed records.

This is the one home of opcode facts (operands, attributes, type families,
execution unit, hardware status, stability).  The op classes
(`nem.dialect.ops`), the `.nem` parser and printer, the verifiers, the
generated `docs/ops.md` and the runtime kernel table read it from here.
The loader validates every entry against `registry/schema.yaml`, so a typo
in the registry fails loudly at import time instead of producing odd ops.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, NoReturn

import yaml

from nem.dialect.elements import ELEM_NAMES as ELEM_TYPES  # the one element-type table

ATTR_TYPES = ("int", "int_list", "float", "number", "elem", "string")

_Yaml = dict[str, Any]
"""A mapping as `yaml.safe_load` returns it: its values are whatever the file
holds until the loader has checked them."""


@dataclass(frozen=True)
class OperandSpec:
    name: str
    dir: str  # "in" | "out"
    role: str
    required: bool
    binds: str | None
    variadic: bool = False
    elem: tuple[str, ...] | None = None


@dataclass(frozen=True)
class AttributeSpec:
    name: str
    type: str
    required: bool
    default: object = None
    values: tuple[str, ...] | None = None
    """For a `string` attribute: the values it may take (None: any)."""


@dataclass(frozen=True)
class OpcodeSpec:
    name: str
    category: str
    unit: str
    hw_status: str
    stability: str
    families: tuple[str, ...]
    operands: tuple[OperandSpec, ...]
    attributes: dict[str, AttributeSpec]
    open_attributes: bool = False
    code: int = 0
    """The opcode's stable number in NEM bytecode (never changed, never reused;
    `retired_codes` in opcodes.yaml keeps the numbers of removed opcodes)."""

    @property
    def spatial_rank(self) -> int | None:
        """Spatial dimensions of a convolution: the length of its default
        `strides` (D-NUM-CONV); None for other opcodes."""
        if self.category != "convolution":
            return None
        strides = self.attributes["strides"].default
        assert isinstance(strides, list), "opcodes.yaml: a convolution's default strides"
        return len(strides)

    @property
    def inputs(self) -> tuple[OperandSpec, ...]:
        return tuple(o for o in self.operands if o.dir == "in")

    @property
    def outputs(self) -> tuple[OperandSpec, ...]:
        return tuple(o for o in self.operands if o.dir == "out")

    def canonical_attr_order(self, names: Iterable[str]) -> list[str]:
        """Attribute names in canonical order: the registry's order, then any
        other (open) attributes sorted by name.  The parser builds `attrs` in
        this order and the printer prints it, so the text and the IR do not
        depend on how the user ordered attributes -- nor on MLIR, which sorts
        attribute dictionaries."""
        given = set(names)
        return [k for k in self.attributes if k in given] + sorted(
            k for k in given if k not in self.attributes
        )

    def signature(self) -> str:
        """`in X, W[, B] out Y` style summary used in diagnostics and docs."""

        def side(ops: tuple[OperandSpec, ...]) -> str:
            out = ""
            for i, o in enumerate(ops):
                text = o.name + ("..." if o.variadic else "")
                sep = ", " if i else ""
                out += f"[{sep}{text}]" if not o.required else f"{sep}{text}"
            return out

        return f"in {side(self.inputs)} out {side(self.outputs)}"


class RegistryError(Exception):
    pass


def _load_yaml(file: str) -> _Yaml:
    """`yaml.safe_load` of a registry file, with libyaml's loader when PyYAML
    has it (the same safe subset, parsed in C: the pure-Python loader took a
    tenth of a second of every tool's start-up on opcodes.yaml)."""
    text = resources.files("nem.dialect").joinpath(f"registry/{file}").read_text()
    loaded: _Yaml = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return loaded


def _schema() -> _Yaml:
    return _load_yaml("schema.yaml")


def _check(cond: bool, opcode: str, what: str) -> None:
    if not cond:
        _fail(opcode, what)


def _fail(opcode: str, what: str) -> NoReturn:
    raise RegistryError(f"opcodes.yaml: opcode '{opcode}': {what}")


def _load_operand(opcode: str, raw: _Yaml, schema: _Yaml) -> OperandSpec:
    _check(raw.get("dir") in schema["dir"], opcode, f"bad operand dir in {raw}")
    _check(raw.get("role") in schema["role"], opcode, f"bad operand role in {raw}")
    _check(isinstance(raw.get("required"), bool), opcode, f"operand needs required: in {raw}")
    elem = raw.get("elem")
    _check(elem is None or all(e in ELEM_TYPES for e in elem), opcode, f"bad elem list {elem}")
    return OperandSpec(
        raw["name"],
        raw["dir"],
        raw["role"],
        raw["required"],
        raw.get("binds"),
        bool(raw.get("variadic", False)),
        tuple(elem) if elem else None,
    )


def _load_opcode(name: str, raw: _Yaml, schema: _Yaml) -> OpcodeSpec:
    s = schema["opcode"]
    for key in ("category", "unit", "hw_status", "stability"):
        _check(raw.get(key) in s[key], name, f"{key}={raw.get(key)!r} not in {s[key]}")
    operands = tuple(_load_operand(name, o, schema["operand"]) for o in raw["operands"])
    attrs: dict[str, AttributeSpec] = {}
    for aname, a in (raw.get("attributes") or {}).items():
        _check(a.get("type") in ATTR_TYPES, name, f"attribute {aname}: bad type {a.get('type')}")
        values = a.get("values")
        if values is not None:
            _check(
                a["type"] == "string"
                and isinstance(values, list)
                and bool(values)
                and all(isinstance(v, str) for v in values)
                and a.get("default", values[0]) in values,
                name,
                f"attribute {aname}: `values` is a non-empty list of strings of a string "
                "attribute, its default among them",
            )
        attrs[aname] = AttributeSpec(
            aname,
            a["type"],
            bool(a.get("required", False)),
            a.get("default"),
            None if values is None else tuple(values),
        )
    code = raw.get("code")
    if not (isinstance(code, int) and not isinstance(code, bool) and 0 < code < 1 << 16):
        _fail(name, f"code={code!r}: every opcode needs a bytecode number in 1..65535")
    return OpcodeSpec(
        name,
        raw["category"],
        raw["unit"],
        raw["hw_status"],
        raw["stability"],
        tuple(raw.get("families") or ()),
        operands,
        attrs,
        bool(raw.get("open_attributes", False)),
        code,
    )


@cache
def opcodes() -> dict[str, OpcodeSpec]:
    """All opcodes by name, in registry order."""
    raw = _load_yaml("opcodes.yaml")
    schema = _schema()
    specs = {name: _load_opcode(name, entry, schema) for name, entry in raw["opcodes"].items()}
    retired = {code: old for old, code in (raw.get("retired_codes") or {}).items()}
    seen: dict[int, str] = {}
    for spec in specs.values():
        _check(
            spec.code not in seen, spec.name, f"code {spec.code} is also {seen.get(spec.code)}'s"
        )
        _check(
            spec.code not in retired,
            spec.name,
            f"code {spec.code} is retired (was {retired.get(spec.code)}); take a new one",
        )
        seen[spec.code] = spec.name
    return specs


@cache
def opcode_by_code() -> dict[int, OpcodeSpec]:
    """Opcodes by their bytecode number (`code`)."""
    return {spec.code: spec for spec in opcodes().values()}


@cache
def retired_codes() -> dict[str, int]:
    """Numbers of opcodes removed from the registry: reserved forever."""
    return dict(_load_yaml("opcodes.yaml").get("retired_codes") or {})


def lookup(opcode: str) -> OpcodeSpec | None:
    return opcodes().get(opcode)
