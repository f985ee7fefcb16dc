"""`.nemb` string and attribute tables (docs/bytecode.md "Strings", "Attributes").

`TableReader` decodes the Strings section (names checked: identifiers, no
control characters) and the Code section's attribute table (interned once:
element types, levels, decorators, quant descriptors, region-type bases),
and gives the instruction reader (`reader._BodyReader`) its primitives:
varints, string and attribute references checked against the tables.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TypeVar, overload

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    LocationAttr,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, ParametrizedAttribute, SSAValue

from nem.dialect.attributes import (
    ELEM_BY_NAME,
    ArgRefAttr,
    BufferType,
    DecoratorAttr,
    MemLevelAttr,
    PerChannelQuantAttr,
    PerGroupQuantAttr,
    PerTensorQuantAttr,
    RegionType,
)
from nem.dialect.decorators import DECORATORS
from nem.dialect.expressions import ExprKeys
from nem.dialect.ops import (
    BufferOp,
)
from nem.dialect.semantics.units import UNIT_TYPES
from nem.frontends.bytecode import nem_bytecode_generated as fb
from nem.frontends.bytecode.container import (
    BytecodeError,
    GeneratedTable,
    decode_varints,
    unzigzag,
)

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
ELEM_BY_CODE = {getattr(fb.ElemType, n): a for n, a in ELEM_BY_NAME.items()}
DECO_BY_CODE = {getattr(fb.DecoKind, n): n for n in DECORATORS}
LEVEL_NAMES = {fb.LevelKind.DDR: "DDR", fb.LevelKind.L2: "L2", fb.LevelKind.L1: "L1"}
MAX_ATTR_DEPTH = 64  # nested lists in attributes (the printer and checks recurse)


class TableReader:
    """The Strings section and the attribute table of the Code section: every
    name and attribute an instruction refers to, decoded and checked once."""

    def __init__(self, data: bytes, file: str):
        self.data = data
        self.file = file
        self.strings: list[str] = [""]
        self.stripped = False
        self.attrs: list[Attribute | RegionTypeBase] = []
        self.depths: list[int] = []  # nesting depth of each attribute entry
        self.child_depth = 0
        self.loop_depth = 0
        self.attr_offs: list[int] = []
        self.floats: np.ndarray = np.zeros(0)
        self.stack: list[SSAValue] = []
        self.kinds: list[int] = []
        self.static: list[
            int | None
        ] = []  # folded value of each index value (None: loop-dependent)
        self.depth: list[int] = []  # expression depth of each value (`expression_depth`'s count)
        self.keys: list[object] = []  # structural key of each index value (`Evaluator.key`)
        self.key_table = ExprKeys()
        self.int_keys: list[object] = []
        self.max_expr_depth = 0
        self.max_loop_depth = 0
        # every index value and its static value, as values leave the stack
        # (BuildFacts, D-BC-SEED)
        self.int_values: list[SSAValue] = []
        self.int_statics: list[int | None] = []
        self.region_types: dict[
            tuple[RegionTypeBase, tuple[int, ...], tuple[int, ...] | None], RegionType
        ] = {}
        self.buffers: list[BufferOp] = []
        self.buffer_sizes: list[int | None] = []
        self.locs: list[LocationAttr | None] | None = None  # per op: None = no location
        self.n_ops = 0
        self.invented = 0
        self.last_name = 0

    # -- strings ------------------------------------------------------------------
    def read_strings(self, sec: fb.Strings) -> None:
        count = sec.Count()
        lengths_vec = sec.LengthsAsNumpy() if sec.LengthsLength() else np.zeros(0, np.uint8)
        blob = sec.BlobAsNumpy() if sec.BlobLength() else np.zeros(0, np.uint8)
        base = self._vec_pos(sec, 8)
        lengths, offs = decode_varints(lengths_vec, self._vec_pos(sec, 6))
        if len(lengths) != count:
            raise BytecodeError(
                self._vec_pos(sec, 6),
                f"string table says {count} strings but lists {len(lengths)} lengths",
            )
        if sum(lengths) != blob.size:
            raise BytecodeError(
                base, f"string lengths add up to {sum(lengths)} bytes but the blob has {blob.size}"
            )
        raw = blob.tobytes()
        at = 0
        out = self.strings
        for n, off in zip(lengths, offs):
            try:
                out.append(raw[at : at + n].decode("utf-8"))
            except UnicodeDecodeError:
                raise BytecodeError(base + at, "string is not valid UTF-8") from None
            at += n
        self.stripped = sec.NamesStripped()

    @staticmethod
    def _vec_pos(obj: GeneratedTable, slot: int) -> int:
        """File offset of the vector in field `slot` (for diagnostics)."""
        o = obj._tab.Offset(slot)
        return int(obj._tab.Vector(o)) if o else int(obj._tab.Pos)

    def string(self, idx: int, at: int, what: str) -> str:
        if not 0 < idx < len(self.strings):
            raise BytecodeError(
                at,
                f"{what}: string index {idx} is not in the string table "
                f"(1..{len(self.strings) - 1})",
            )
        text = self.strings[idx]
        if CONTROL.search(text):
            raise BytecodeError(at, f"{what}: string {text!r} has control characters")
        return text

    def name(self, idx: int, at: int, what: str) -> str:
        if idx == 0:
            if not self.stripped:
                raise BytecodeError(
                    at, f"{what}: missing name (the file does not say its names were stripped)"
                )
            self.invented += 1
            return f"_v{self.invented}"
        text = self.string(idx, at, what)
        if not IDENT.match(text):
            raise BytecodeError(at, f"{what}: {text!r} is not an identifier")
        return text

    # -- attributes -----------------------------------------------------------------
    def read_attributes(self, code: fb.Code) -> None:
        count = code.AttributeCount()
        stream = code.AttributesAsNumpy() if code.AttributesLength() else np.zeros(0, np.uint8)
        base = self._vec_pos(code, 6)
        self.floats = code.FloatsAsNumpy() if code.FloatsLength() else np.zeros(0)
        vals, offs = decode_varints(stream, base)
        self.v, self.o, self.i = vals, offs, 0
        end = base + len(stream)
        try:
            while len(self.attrs) < count:
                at = offs[self.i]
                self.child_depth = 0
                self.attrs.append(self._attr(at))
                self.attr_offs.append(at)
                self.depths.append(self.child_depth + 1)
                if self.child_depth >= MAX_ATTR_DEPTH:
                    raise BytecodeError(at, f"attribute nested deeper than {MAX_ATTR_DEPTH}")
        except IndexError:
            raise BytecodeError(
                end, f"attribute stream ends after {len(self.attrs)} of {count} entries"
            ) from None
        if self.i != len(vals):
            raise BytecodeError(
                offs[self.i], f"{len(vals) - self.i} values after the last attribute"
            )

    def u(self) -> int:
        v = self.v[self.i]
        self.i += 1
        return v

    def s(self) -> int:
        v = self.v[self.i]
        self.i += 1
        return unzigzag(v)

    @overload
    def aref(
        self, at: int, kind: None = None, what: str = "attribute"
    ) -> Attribute | RegionTypeBase: ...

    @overload
    def aref(self, at: int, kind: type[_A], what: str = "attribute") -> _A: ...

    def aref(
        self, at: int, kind: type[_A] | None = None, what: str = "attribute"
    ) -> Attribute | RegionTypeBase | _A:
        """An attribute-table reference, of class `kind` when given."""
        idx = self.u()
        if idx >= len(self.attrs):
            raise BytecodeError(
                at, f"{what}: attribute index {idx} is not defined before this point"
            )
        a = self.attrs[idx]
        if kind is not None and not isinstance(a, kind):
            raise BytecodeError(at, f"{what}: attribute {idx} is a {type(a).__name__}")
        self.child_depth = max(self.child_depth, self.depths[idx])
        return a

    def opt_aref(self, at: int, kind: type[_A], what: str) -> _A | None:
        """An optional attribute-table reference: 0 = none, else 1 + the entry."""
        idx = self.u()
        if idx == 0:
            return None
        if idx - 1 >= len(self.attrs):
            raise BytecodeError(at, f"{what}: attribute index {idx - 1} is not defined")
        a = self.attrs[idx - 1]
        self.child_depth = max(self.child_depth, self.depths[idx - 1])
        if not isinstance(a, kind):
            raise BytecodeError(at, f"{what}: attribute {idx - 1} is a {type(a).__name__}")
        return a

    def _attr(self, at: int) -> Attribute | RegionTypeBase:
        K = fb.AttrKind
        kind = self.u()
        if kind == K.String:
            return StringAttr(self.string(self.u(), at, "string attribute"))
        if kind == K.Int:
            return IntegerAttr(self.s(), i64)
        if kind == K.Float:
            k = self.u()
            if k >= self.floats.size:
                raise BytecodeError(at, f"float index {k} beyond the {self.floats.size} floats")
            v = float(self.floats[k])
            if not math.isfinite(v):
                raise BytecodeError(at, f"float {v} is not a finite number")
            return FloatAttr(v, 64)
        if kind == K.Array:
            n = self.u()
            # (entries of a list or dictionary are attributes: not a region-type base)
            return ArrayAttr(tuple(self.aref(at, Attribute) for _ in range(min(n, len(self.v)))))
        if kind == K.Dict:
            n = self.u()
            items: dict[str, Attribute] = {}
            for _ in range(min(n, len(self.v))):
                key = self.string(self.u(), at, "attribute name")
                if not IDENT.match(key) or key in items:
                    raise BytecodeError(
                        at, f"dictionary key {key!r} is not an identifier or repeats"
                    )
                items[key] = self.aref(at, Attribute)
            return DictionaryAttr(items)
        if kind == K.ArgRef:
            return ArgRefAttr(self.u())
        if kind == K.Elem:
            code = self.u()
            if code not in ELEM_BY_CODE:
                raise BytecodeError(at, f"unknown element type code {code}")
            return ELEM_BY_CODE[code]
        if kind == K.Level:
            lk, engine = self.u(), self.u()
            if lk not in LEVEL_NAMES or (engine and lk != fb.LevelKind.L1):
                raise BytecodeError(at, f"bad memory level ({lk}, {engine})")
            return MemLevelAttr.get(LEVEL_NAMES[lk], engine - 1 if engine else None)
        if kind == K.Decorator:
            return self._decorator(at)
        if kind == K.PerTensor:
            scale, zp = self.aref(at), self.aref(at)
            if not isinstance(scale, IntegerAttr | FloatAttr) or not isinstance(
                zp, IntegerAttr | FloatAttr
            ):
                raise BytecodeError(at, "a quant scale and zero point are numbers")
            return PerTensorQuantAttr(scale.value.data, zp.value.data)
        if kind in (K.PerChannel, K.PerGroup):
            axis = self.s()
            group = self.s() if kind == K.PerGroup else None
            scales, zps = self.aref(at, ArrayAttr), self.aref(at, ArrayAttr)
            sv, zv = _numbers(scales, at), _numbers(zps, at)
            if group is None:
                return PerChannelQuantAttr(axis, sv, zv)
            return PerGroupQuantAttr(axis, group, sv, zv)
        if kind == K.BufferType:
            return BufferType(self.aref(at, MemLevelAttr))
        if kind == K.RegionType:
            return self._region_type_base(at)
        raise BytecodeError(at, f"unknown attribute kind {kind}")

    def _decorator(self, at: int) -> DecoratorAttr:
        code = self.u()
        name = DECO_BY_CODE.get(code)
        if name is None:
            raise BytecodeError(at, f"unknown decorator code {code}")
        info = DECORATORS[name]
        if info.args == "none":
            return info.attr()
        if info.args == "int":
            return info.attr(self.s())
        if info.args == "unit":
            unit = self.string(self.u(), at, "@resource unit")
            if unit not in UNIT_TYPES:
                raise BytecodeError(at, f"@resource unit {unit!r} is not one of {UNIT_TYPES}")
            index = self.s()
            if index < 0:
                raise BytecodeError(at, "@resource index is negative")
            return info.attr(unit, index)
        tag = self.string(self.u(), at, f"@{name} tag")
        quoted = self.u()
        if quoted not in (0, 1) or (not quoted and not IDENT.match(tag)):
            raise BytecodeError(at, f"@{name} tag {tag!r} is not an identifier")
        return info.attr(tag, bool(quoted))

    def _region_type_base(self, at: int) -> RegionTypeBase:
        """A region type without its shape and strides: a tuple the Region
        instruction completes from its operands (docs/bytecode.md)."""
        level = self.aref(at, MemLevelAttr, "region level")
        elem = self.u()
        if elem == 0:
            return RegionTypeBase(level, None, 0, None, None, None)
        if elem not in ELEM_BY_CODE:
            raise BytecodeError(at, f"unknown element type code {elem}")
        rank = self.u()
        if rank == 0:
            raise BytecodeError(at, "a typed region has rank >= 1")
        layout_idx = self.u()
        layout = nstrides = None
        if layout_idx:
            layout = self.string(layout_idx, at, "layout")
            if not IDENT.match(layout):
                raise BytecodeError(at, f"layout {layout!r} is not an identifier")
        else:
            nstrides = self.u()
            if nstrides == 0:
                raise BytecodeError(at, "strides=[...] needs at least one entry")
        quant = self.opt_aref(at, ParametrizedAttribute, "quant")
        if quant is not None and not isinstance(quant, QUANT_KINDS):
            raise BytecodeError(
                at, f"quant: attribute {self.v[self.i - 1] - 1} is a {type(quant).__name__}"
            )
        return RegionTypeBase(level, ELEM_BY_CODE[elem], rank, layout, nstrides, quant)


def _numbers(a: ArrayAttr[Attribute], at: int) -> list[int | float]:
    """Quant scales or zero points: numbers (all integers or not)."""
    out: list[int | float] = []
    for x in a.data:
        if not isinstance(x, IntegerAttr | FloatAttr):
            raise BytecodeError(at, "quant scales and zero points are numbers")
        out.append(x.value.data)
    return out


QUANT_KINDS = (PerTensorQuantAttr, PerChannelQuantAttr, PerGroupQuantAttr)
_A = TypeVar("_A")


@dataclass(frozen=True)
class RegionTypeBase:
    """A region type without its shape and strides (an attribute-table entry
    that a Region instruction completes from its operands; never in the IR)."""

    level: MemLevelAttr
    elem: Attribute | None
    rank: int
    layout: str | None
    nstrides: int | None
    quant: Attribute | None
