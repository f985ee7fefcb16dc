"""NEM attributes and types: memory levels, element types, quantization
descriptors, decorators, and the buffer / region / token types.

Element types are MLIR builtin types (`i8`, `ui8`, `f16`, `bf16`, ...) so the
IR reads like any other MLIR; `ELEM_BY_NAME`/`elem_name` translate to and
from the spec's spelling (`u8`, not `ui8`).  Everything else lives under the
`nem.` prefix and prints in forms that upstream `mlir-opt
--allow-unregistered-dialect` accepts as opaque attributes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import ClassVar, Self, cast

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    NoneType,
    StringAttr,
    i64,
)
from xdsl.ir import Attribute, Data, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.hints import isa
from xdsl.utils.lexer import Span

from nem.dialect.bounded_cache import BoundedCache
from nem.dialect.diagnostics import RuleParseError, RuleVerifyException
from nem.dialect.elements import ELEM_BITS, ELEM_TYPES, elem_of_xdsl
from nem.dialect.per_class import PerClass

# ---------------------------------------------------------------------------
# Element types (SPEC §3; TYPE-01, TYPE-02)
# ---------------------------------------------------------------------------

# The table is `nem.dialect.elements.ELEM_TYPES`; these are its views in the
# IR's terms (spec name <-> xDSL builtin type).
ELEM_BY_NAME: dict[str, Attribute] = {n: e.xdsl for n, e in ELEM_TYPES.items()}
BITWIDTH = ELEM_BITS


def region_min_bytes(elem: str, shape: Sequence[int], strides: Sequence[int] | None = None) -> int:
    """The fewest bytes a region of `elem` with `shape` (and element
    `strides`, else dense) must span: EXT-01 (dense) and EXT-02 (strided)."""
    if strides is None:
        count = math.prod(shape)
    else:
        count = sum((d - 1) * s for d, s in zip(shape, strides)) + 1
    return math.ceil(count * BITWIDTH[elem] / 8)


def elem_name(attr: Attribute) -> str | None:
    """The spec's name of a builtin element type, or None if it is not one."""
    return elem_of_xdsl(attr)


# ---------------------------------------------------------------------------
# Memory levels (SPEC §1; GRAM-05)
# ---------------------------------------------------------------------------


MEM_LEVEL_KINDS = ("DDR", "L2", "L1")
"""The memory levels of the spec (GRAM-05); only `L1` takes an engine index."""
MEM_LEVEL_FIX = "use one of DDR, L2, L1, L1[k]"


def mem_level_error(text: str) -> str | None:
    """Why `text` is not a memory level (GRAM-05), or None if it is one.

    The one check of a level's spelling: the MLIR attribute parser, the
    builder, the attribute's own verifier and the lowering's `memory-spaces`
    option use it (the `.nem` parser reads MEM_LEVEL_KINDS token by token, an
    engine index being a const expression there), so IR built from Python or
    MLIR cannot carry a level the `.nem` text could not (an `L3` buffer
    printed as invalid `.nem`)."""
    kind, bracket, rest = text.partition("[")
    if kind not in MEM_LEVEL_KINDS:
        return f"'{text}' is not a memory level (DDR, L2, L1 or L1[k])"
    if bracket and (kind != "L1" or not rest.endswith("]") or not rest[:-1].isdigit()):
        return f"'{text}' is not a memory level: only L1 takes an engine index, L1[k] with k >= 0"
    return None


@irdl_attr_definition
class MemLevelAttr(Data[str]):
    """`DDR`, `L2`, `L1` (engine unspecified) or `L1[k]`."""

    name = "nem.level"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> str:
        with parser.in_angle_brackets():
            pos = parser.pos
            text = parser.parse_identifier()
            if parser.parse_optional_punctuation("["):
                text += f"[{parser.parse_integer(allow_negative=False)}]"
                parser.parse_punctuation("]")
            error = mem_level_error(text)
            if error is not None:
                raise RuleParseError(
                    Span(pos, parser.pos, parser.lexer.input), error, "GRAM-05", MEM_LEVEL_FIX
                )
        return text

    def verify(self) -> None:
        error = mem_level_error(self.data)
        if error is not None:
            raise RuleVerifyException(error, "GRAM-05", MEM_LEVEL_FIX)

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data}>")

    @property
    def kind(self) -> str:
        """`DDR`, `L2` or `L1` (the level without its engine)."""
        return self.data.split("[", 1)[0]

    @property
    def engine(self) -> int | None:
        """The engine k of `L1[k]`; None for `L1` (engine unspecified), `L2` and `DDR`."""
        if "[" not in self.data:
            return None
        return int(self.data[self.data.index("[") + 1 : -1])

    @classmethod
    def get(cls, attr: str | Self, engine: int | None = None) -> Self:
        """`Data.get`, plus the engine of `L1[k]`: `get("L1", 2)` is `L1[2]`."""
        if engine is None:
            return super().get(attr)
        kind = attr if isinstance(attr, str) else attr.data
        return cls(f"{kind}[{engine}]")


# ---------------------------------------------------------------------------
# Quantization descriptors (SPEC §3; GRAM-10, QUANT-*)
# ---------------------------------------------------------------------------


def _num_array(values: Sequence[float | int]) -> ArrayAttr:
    return ArrayAttr(tuple(_num(v) for v in values))


def _num(v: float | int) -> Attribute:
    return IntegerAttr(v, i64) if isinstance(v, int) else FloatAttr(float(v), 64)


def num_value(a: Attribute) -> float | int:
    assert isinstance(a, IntegerAttr | FloatAttr)
    return a.value.data


@irdl_attr_definition
class PerTensorQuantAttr(ParametrizedAttribute):
    """`per_tensor(scale=s, zero_point=z)`: one scale and zero point."""

    name = "nem.per_tensor"
    scale: Attribute
    """The scale (an integer or float attribute; `num_value` reads it)."""
    zero_point: Attribute
    """The zero point (an integer or float attribute)."""

    def __init__(self, scale: float | int, zero_point: float | int):
        super().__init__(_num(scale), _num(zero_point))

    def render(self) -> str:
        return f"per_tensor(scale={fmt_num(num_value(self.scale))}, zero_point={fmt_num(num_value(self.zero_point))})"


@irdl_attr_definition
class PerChannelQuantAttr(ParametrizedAttribute):
    """`per_channel(axis=a, scales=[...], zero_points=[...])`."""

    name = "nem.per_channel"
    axis: IntAttr
    """The channel axis."""
    scales: ArrayAttr
    """One scale per channel."""
    zero_points: ArrayAttr
    """One zero point per channel."""

    def __init__(
        self, axis: int, scales: Sequence[float | int], zero_points: Sequence[float | int]
    ):
        super().__init__(IntAttr(axis), _num_array(scales), _num_array(zero_points))

    def render(self) -> str:
        return (
            f"per_channel(axis={self.axis.data}, scales={fmt_list(self.scales)}, "
            f"zero_points={fmt_list(self.zero_points)})"
        )


@irdl_attr_definition
class PerGroupQuantAttr(ParametrizedAttribute):
    """`per_group(axis=a, group_size=g, scales=[...], zero_points=[...])`."""

    name = "nem.per_group"
    axis: IntAttr
    """The grouped axis."""
    group_size: IntAttr
    """Elements per group along `axis`."""
    scales: ArrayAttr
    """One scale per group."""
    zero_points: ArrayAttr
    """One zero point per group."""

    def __init__(
        self,
        axis: int,
        group_size: int,
        scales: Sequence[float | int],
        zero_points: Sequence[float | int],
    ):
        super().__init__(
            IntAttr(axis), IntAttr(group_size), _num_array(scales), _num_array(zero_points)
        )

    def render(self) -> str:
        return (
            f"per_group(axis={self.axis.data}, group_size={self.group_size.data}, "
            f"scales={fmt_list(self.scales)}, zero_points={fmt_list(self.zero_points)})"
        )


QuantAttr = PerTensorQuantAttr | PerChannelQuantAttr | PerGroupQuantAttr
_IS_QUANT = PerClass(lambda cls: issubclass(cls, QuantAttr))
"""`isinstance(attr, QuantAttr)` by `type(attr)`: on a union of xDSL's (ABC)
attribute classes isinstance runs Python code for each, and the device and
static checks ask it of every operand of every compute op (issue 30)."""


def fmt_num(v: float | int) -> str:
    """A number as `.nem` text: ints plain, floats with a fraction (LEX-02),
    negatives as `0 - x` because the grammar has no unary minus (D-EXPR-NEG)."""
    if isinstance(v, float):
        text = repr(abs(v))
        if "e" in text and "." not in text.split("e")[0]:
            mant, exp = text.split("e")
            text = f"{mant}.0e{exp}"
        elif "inf" in text or "nan" in text:
            raise ValueError(f"cannot write {v} as a NEM literal")
    else:
        text = str(abs(v))
    return f"(0 - {text})" if v < 0 else text


def fmt_list(arr: ArrayAttr) -> str:
    return "[" + ", ".join(fmt_num(num_value(a)) for a in arr.data) + "]"


# ---------------------------------------------------------------------------
# Decorators (SPEC §7).  One class each; DECORATORS in decorators.py says
# where each may appear and what arguments it takes.
# ---------------------------------------------------------------------------


class DecoratorAttr(ParametrizedAttribute):
    """Base of all decorator attributes; `DECO_NAME` is the `@name` spelling."""

    DECO_NAME: ClassVar[str] = ""

    def args_text(self) -> str:
        return ""

    def render(self) -> str:
        args = self.args_text()
        return f"@{self.DECO_NAME}" + (f"({args})" if args else "")


def _flag(deco: str, attr: str, doc: str) -> type[DecoratorAttr]:
    cls = type(
        f"{deco.title().replace('_', '')}Attr",
        (DecoratorAttr,),
        {"name": attr, "DECO_NAME": deco, "__doc__": doc},
    )
    return irdl_attr_definition(cls)


MaterializedAttr = _flag(
    "materialized",
    "nem.materialized",
    "`@materialized`: the region must exist as an architectural value.",
)
DeterministicAttr = _flag(
    "deterministic",
    "nem.deterministic",
    "`@deterministic`: the lowering must be bitwise reproducible.",
)
MemmoveAttr = _flag(
    "memmove", "nem.memmove", "`@memmove`: a transfer's source and destination may overlap."
)
ReadonlyAttr = _flag("readonly", "nem.readonly", "`@readonly`: the region is only read.")
WriteonlyAttr = _flag("writeonly", "nem.writeonly", "`@writeonly`: the region is only written.")


@irdl_attr_definition
class MaxInFlightAttr(DecoratorAttr):
    """`@max_in_flight(N)` on a loop: at most N iterations active (LOOP-01)."""

    name = "nem.max_in_flight"
    DECO_NAME = "max_in_flight"
    n: IntAttr
    """N: how many iterations may be active at once."""

    def __init__(self, n: int):
        super().__init__(IntAttr(n))

    def args_text(self) -> str:
        return str(self.n.data)


@irdl_attr_definition
class SeqEngineAttr(DecoratorAttr):
    """`@seq_engine(k)`: the task is dispatched by engine k (SPEC §8, D-DECO-SEQ)."""

    name = "nem.seq_engine"
    DECO_NAME = "seq_engine"
    engine: IntAttr
    """The engine k that dispatches the task."""

    def __init__(self, engine: int):
        super().__init__(IntAttr(engine))

    def args_text(self) -> str:
        return str(self.engine.data)


@irdl_attr_definition
class ResourceAttr(DecoratorAttr):
    """`@resource(UNIT[i])`: bind the task to one execution-unit instance."""

    name = "nem.resource"
    DECO_NAME = "resource"
    unit: StringAttr
    """The execution unit's name (`UNIT`)."""
    index: IntAttr
    """The unit's instance i."""

    def __init__(self, unit: str, index: int):
        super().__init__(StringAttr(unit), IntAttr(index))

    def args_text(self) -> str:
        return f"{self.unit.data}[{self.index.data}]"


class TagDecorator(DecoratorAttr):
    """Base of the `@debug(tag)` and `@profile(tag)` decorators."""

    # Each subclass declares `tag: StringAttr` and `quoted: IntAttr` itself:
    # parameters annotated only on this base would be left out of the
    # generated __eq__/__hash__ (all @debug tags would compare equal).
    tag: StringAttr
    """The tag's text."""
    quoted: IntAttr
    """1 when the tag was written as a string, else 0."""

    def args_text(self) -> str:
        return f'"{self.tag.data}"' if self.quoted.data else self.tag.data


@irdl_attr_definition
class DebugAttr(TagDecorator):
    """`@debug(name)`: informational, never changes execution (DECO-08)."""

    name = "nem.debug"
    DECO_NAME = "debug"
    tag: StringAttr
    """The tag's text."""
    quoted: IntAttr
    """1 when the tag was written as a string, else 0."""

    def __init__(self, tag: str, quoted: bool):
        super().__init__(StringAttr(tag), IntAttr(int(quoted)))


@irdl_attr_definition
class ProfileAttr(TagDecorator):
    """`@profile(tag)`: informational, never changes execution (DECO-08)."""

    name = "nem.profile"
    DECO_NAME = "profile"
    tag: StringAttr
    """The tag's text."""
    quoted: IntAttr
    """1 when the tag was written as a string, else 0."""

    def __init__(self, tag: str, quoted: bool):
        super().__init__(StringAttr(tag), IntAttr(int(quoted)))


# ---------------------------------------------------------------------------
# Compute-attribute and let values
# ---------------------------------------------------------------------------


@irdl_attr_definition
class ArgRefAttr(ParametrizedAttribute):
    """Placeholder inside an attribute value for the op's `args[index]`
    operand: integer expressions stay SSA values (consts, loop variables)
    while the attribute keeps the value's shape (scalar, list, nesting)."""

    name = "nem.arg"
    index: IntAttr
    """The position in the op's `args` operands."""

    def __init__(self, index: int):
        super().__init__(IntAttr(index))


# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------


@irdl_attr_definition
class TokenType(ParametrizedAttribute, TypeAttribute):
    """The completion token of a task (SPEC §2 Tasks and Tokens)."""

    name = "nem.token"


@irdl_attr_definition
class BufferType(ParametrizedAttribute, TypeAttribute):
    """A buffer at a memory level; its byte size is the op's `size` operand."""

    name = "nem.buffer"
    level: MemLevelAttr
    """The buffer's memory level (`MemLevelAttr`: `.kind`, `.engine`)."""

    def __init__(self, level: MemLevelAttr):
        super().__init__(level)


DYNAMIC = -1
"""A shape or stride entry that depends on a loop variable."""


def _absent(attr: Attribute) -> bool:
    """An absent region-type parameter.  Absent parameters are built as the
    builtin `none` type, which is what the MLIR parser gives back for the
    printed `none` (xDSL's NoneAttr also prints as `none` but parses back as
    NoneType, so it would not survive a generic-MLIR round trip); NoneAttr
    is still accepted for IR built by older code."""
    t = type(attr)  # not isinstance: attributes are ABCs, and this runs per query
    return t is NoneType or t is NoneAttr


@irdl_attr_definition
class RegionType(ParametrizedAttribute, TypeAttribute):
    """A region: its memory level and, when typed, elem / shape /
    layout-or-strides / quant (SPEC §2 Regions, §3 Region Type Syntax).

    Untyped regions (raw byte ranges for transfers) have `elem = none`.
    Shape and stride entries are the folded values of the region op's
    operands, `-1` where they depend on a loop variable.
    """

    name = "nem.region"
    level: MemLevelAttr
    """The memory level (`MemLevelAttr`: `.kind` is `DDR`, `L2` or `L1`; `.engine` the k of
    `L1[k]`)."""
    elem: Attribute
    """The element type (`elem_name`: `f16`, `i8`, ...); the builtin `none` when untyped."""
    shape: Attribute
    """The shape as a dense array (`shape_values`: a tuple, `DYNAMIC` where it depends on a
    loop variable)."""
    layout: Attribute
    """The layout name (`layout_name`: `C`, `HWC`, ...), or `none`."""
    strides: Attribute
    """Explicit strides as a dense array (`stride_values`), or `none`."""
    quant: Attribute
    """The quantization descriptor (`quant_desc`), or `none`."""

    def __init__(
        self,
        level: MemLevelAttr,
        elem: Attribute | None = None,
        shape: Sequence[int] | None = None,
        layout: str | None = None,
        strides: Sequence[int] | None = None,
        quant: Attribute | None = None,
    ):
        super().__init__(
            level,
            elem or NoneType(),
            NoneType() if shape is None else DenseArrayBase.from_list(i64, shape),
            NoneType() if layout is None else StringAttr(layout),
            NoneType() if strides is None else DenseArrayBase.from_list(i64, strides),
            quant or NoneType(),
        )

    @property
    def typed(self) -> bool:
        """True when the region has an element type (`elem` is not `none`)."""
        return not _absent(self.elem)

    @property
    def elem_name(self) -> str | None:
        """The element type's name (`f16`, `i8`, ...), None when untyped."""
        return elem_name(self.elem)

    @property
    def shape_values(self) -> tuple[int, ...] | None:
        """The shape as a tuple (`DYNAMIC` entries depend on a loop variable); None when untyped."""
        return _dense_values(self.shape)

    @property
    def stride_values(self) -> tuple[int, ...] | None:
        """The explicit strides as a tuple; None when the region has a layout instead."""
        return _dense_values(self.strides)

    @property
    def layout_name(self) -> str | None:
        """The layout's name (`C`, `HWC`, ...); None with explicit strides or untyped."""
        return self.layout.data if isinstance(self.layout, StringAttr) else None

    @property
    def quant_desc(self) -> QuantAttr | None:
        """The quantization descriptor (`PerTensorQuantAttr`, ...), or None."""
        return cast(QuantAttr, self.quant) if _IS_QUANT[type(self.quant)] else None


def _dense_values(array: Attribute) -> tuple[int, ...] | None:
    """The values of an (immutable) dense array, decoded once: the verifier
    reads region shapes for every task and every loop iteration.  Found by
    identity first (hashing a dense array hashes its bytes, in Python code),
    then by value (equal arrays of other ops).  None for an absent shape or
    strides parameter.  Both caches are bounded (issue 36): an entry keeps
    its array alive (so that its id is not reused while it is held), at most
    `DENSE_CACHE_SIZE` of them; past it the oldest are decoded again when
    read."""
    hit = _DENSE_BY_ID.get(id(array))
    if hit is not None and hit[0] is array:
        return hit[1]
    values = _dense_by_value(array)
    _DENSE_BY_ID[id(array)] = (array, values)
    return values


DENSE_CACHE_SIZE = 1 << 16
"""Dense arrays whose decoded values are kept (a large program has a few
thousand distinct region shapes; each entry is a few hundred bytes)."""


@lru_cache(maxsize=DENSE_CACHE_SIZE)
def _dense_by_value(array: Attribute) -> tuple[int, ...] | None:
    return array.get_values() if isa(array, DenseArrayBase[IntegerType]) else None


_DENSE_BY_ID: BoundedCache[int, tuple[Attribute, tuple[int, ...] | None]] = BoundedCache(
    DENSE_CACHE_SIZE
)


@lru_cache(maxsize=DENSE_CACHE_SIZE)
def region_type(
    level: MemLevelAttr,
    elem: Attribute | None = None,
    shape: tuple[int, ...] | None = None,
    layout: str | None = None,
    strides: tuple[int, ...] | None = None,
    quant: Attribute | None = None,
) -> RegionType:
    """`RegionType(...)`, one object per distinct type: a lowered CNN builds
    a region type per region operand (a hundred thousand), of a few thousand
    distinct types, and each construction verifies its parameters."""
    return RegionType(level, elem, shape, layout, strides, quant)


ATTRIBUTES: list[type[Attribute]] = [
    MemLevelAttr,
    PerTensorQuantAttr,
    PerChannelQuantAttr,
    PerGroupQuantAttr,
    MaterializedAttr,
    DeterministicAttr,
    MemmoveAttr,
    ReadonlyAttr,
    WriteonlyAttr,
    MaxInFlightAttr,
    SeqEngineAttr,
    ResourceAttr,
    DebugAttr,
    ProfileAttr,
    ArgRefAttr,
    TokenType,
    BufferType,
    RegionType,
]
