"""Named operand accessors for the NEM ops with `operandSegmentSizes`
(regions, transfers, stores, compute ops) that decode the segment array once
per distinct array instead of on every access.

The verifier and the passes read region and task operands millions of times
on large programs; xDSL's generic accessor (`BaseAttrAccessor`) re-reads the
segment sizes each time.  `cache_segment_accessors` installs these on the
project's op classes (`nem.dialect.ops`); xDSL's classes are untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from xdsl.dialects.builtin import DenseArrayBase, IntegerType
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.irdl.operations import (
    BaseAttrAccessor,
    SingleAttrAccessor,
    VariadicAttrAccessor,
    VarIRConstruct,
)

from nem.dialect.bounded_cache import SEGMENT_CACHE_SIZE, BoundedCache


class SegmentAccessor:
    """xDSL's accessor of an operand of an op with `operandSegmentSizes`,
    decoding the segment array once per array object instead of on every
    access (the verifier and the passes read region and task operands
    millions of times on large programs)."""

    __slots__ = ("acc", "positions", "prop")

    def __init__(self, acc: BaseAttrAccessor):
        self.acc = acc
        self.prop = acc.option.attribute_name  # the segment-sizes property
        # where this operand sits for each segment array: an index (single
        # operand) or a slice (variadic); other accessors take xDSL's path
        self.positions: dict[bytes, int | slice] | None = (
            {} if isinstance(acc, SingleAttrAccessor | VariadicAttrAccessor) else None
        )

    def __get__(
        self, obj: Operation | None, objtype: type | None = None
    ) -> SSAValue | Sequence[SSAValue] | None | SegmentAccessor:
        if obj is None:
            return self
        acc = self.acc
        # an i32 array (checked by the op's IRDL verifier): no isinstance on
        # this hot path (and the cast's type as a string: a subscripted
        # generic is built on every evaluation)
        key = cast("DenseArrayBase[IntegerType]", obj.properties[self.prop]).data.data
        positions = self.positions
        if positions is not None:
            pos = positions.get(key)
            if pos is None:
                pos = positions[key] = acc.index(_segment_values(obj, acc), _POSITIONS)
                if isinstance(pos, range):
                    pos = positions[key] = slice(pos.start, pos.stop)
            # indexing `obj.operands`: an index through a plain tuple of them
            # (the view's and SSAValues' `__getitem__` are two Python calls,
            # its `__iter__` one; docs/upstream-reports.md, 10), a slice
            # through the view (an SSAValues, as xDSL's accessor gives)
            if type(pos) is int:
                return tuple(obj.operands)[pos]
            return obj.operands[pos]
        operands: SSAValue | Sequence[SSAValue] | None = acc.index(
            _segment_values(obj, acc), obj.operands
        )
        return operands

    def __set__(self, instance: Operation, value: object) -> None:
        raise NotImplementedError("Cannot write to named operands")


_SEGMENTS: BoundedCache[bytes, tuple[int, ...]] = BoundedCache(SEGMENT_CACHE_SIZE)
"""Segment sizes by the bytes of their i32 array: few distinct ones exist
(bounded all the same: a hostile program can spell many)."""
_POSITIONS = range(1 << 62)
"""Indexed by an accessor, gives the operand position(s) it reads."""


def _segment_values(obj: Operation, acc: BaseAttrAccessor) -> tuple[int, ...]:
    # (an i32 array: checked by the op's IRDL verifier)
    attr = cast(DenseArrayBase[IntegerType], obj.properties[acc.option.attribute_name])
    values = _SEGMENTS.get(attr.data.data)
    if values is None:
        values = _SEGMENTS[attr.data.data] = attr.get_values()
    return values


def cache_segment_accessors(cls: type[IRDLOperation]) -> None:
    """Replace each segmented-operand accessor `cls` defines (an IRDL
    `BaseAttrAccessor` of an operand whose segment sizes are a property) by a
    `SegmentAccessor` on `cls` itself: the project's own op classes, never
    xDSL's (docs/upstream-reports.md, 10)."""
    for name, acc in list(vars(cls).items()):
        if (
            isinstance(acc, BaseAttrAccessor)
            and acc.construct == VarIRConstruct.OPERAND
            and acc.option.as_property
        ):
            setattr(cls, name, SegmentAccessor(acc))
