"""The attributes and literal ops `nem.dialect.builder` builds most, each
built once (issue 30: a lowered CNN builds a hundred thousand regions of a
few thousand types, and hundreds of thousands of index literals).

Attributes are immutable: one object per distinct value serves every op
that uses it.  The memos are `BoundedCache`s of pure functions of immutable
values (issue 36: no cache grows with the programs a process builds), and
the ops are made as `Operation.create` makes them, without xDSL's generic
per-argument work (`op_build.create_op`, D-IR-BUILD).
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import UNKNOWN_LOC, IndexType, IntegerAttr, LocationAttr
from xdsl.ir import Operation, SSAValue

from nem.dialect.attributes import (
    BufferType,
    MemLevelAttr,
    RegionType,
    mem_level_error,
    region_type,
)
from nem.dialect.bounded_cache import BoundedCache
from nem.dialect.op_build import create_op

__all__ = ["binary_op", "buffer_type", "index_constant", "memory_level", "shared_region_type"]

_INDEX_ATTRS: BoundedCache[int, IntegerAttr] = BoundedCache(1 << 16)
"""Each index literal's attribute, built once: a memo of a pure function of
an int (attributes are immutable), bounded as `attributes._dense_values`'s."""
_LEVELS: BoundedCache[str, MemLevelAttr] = BoundedCache(1 << 10)
"""Each valid memory level name's attribute, checked and built once."""
_BUFFER_TYPES: BoundedCache[str, BufferType] = BoundedCache(1 << 10)
"""The buffer type of each memory level."""
_REGION_TYPES: BoundedCache[tuple[object, ...], RegionType] = BoundedCache(1 << 14)
"""Each distinct region type, by `region_type`'s arguments: built and
verified once, not per region."""
_INDEX = IndexType()


def index_constant(value: int, loc: LocationAttr = UNKNOWN_LOC) -> arith.ConstantOp:
    """`arith.constant value : index` at `loc`, as `arith.ConstantOp(IntegerAttr(value,
    IndexType()))` builds it, without rebuilding the attribute and the
    op's argument lists each time."""
    attr = _INDEX_ATTRS.get(value)
    if attr is None:
        attr = _INDEX_ATTRS[value] = IntegerAttr(value, IndexType())
    return create_op(arith.ConstantOp, (), (attr.type,), {"value": attr}, loc)


def binary_op(cls: type[Operation], lhs: SSAValue, rhs: SSAValue, loc: LocationAttr) -> Operation:
    """`arith.addi lhs, rhs : index` (`cls` one of `expressions.BINOPS`) at
    `loc`, as `cls(lhs, rhs)` builds it: the overflow flags are the
    definition's default."""
    return create_op(cls, (lhs, rhs), (_INDEX,), {}, loc)


def memory_level(name: str) -> MemLevelAttr | None:
    """The attribute of memory level `name` (`DDR`, `L1[0]`, ...); None when
    `name` is not one (`attributes.mem_level_error` says why)."""
    hit = _LEVELS.get(name)
    if hit is None:
        if mem_level_error(name) is not None:
            return None
        hit = _LEVELS[name] = MemLevelAttr(name)
    return hit


def buffer_type(level: MemLevelAttr) -> BufferType:
    """`BufferType(level)`, one object per level."""
    hit = _BUFFER_TYPES.get(level.data)
    if hit is None:
        hit = _BUFFER_TYPES[level.data] = BufferType(level)
    return hit


def shared_region_type(key: tuple[object, ...]) -> RegionType:
    """`region_type(*key)` (level, elem, shape, layout, strides, quant), one
    object per distinct key: `lowering.staging.illegal` caches its answers by
    the identity of region types."""
    hit = _REGION_TYPES.get(key)
    if hit is None:
        hit = _REGION_TYPES[key] = region_type(*key)
    return hit
