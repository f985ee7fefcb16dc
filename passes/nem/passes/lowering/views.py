"""Memref views of the MLIR -> NEM lowering: a pure analysis.

A memref value is seen as a `View`: the NEM buffer it lives in, the element
offset of its index `[0, ..., 0]` (an `Aff` of the enclosing loop
variables), its shape and its element strides.  Function arguments and
allocations start views; `memref.view` and `nem_lowering.view`
(subviews, casts and reshapes, D-LOW-VIEW-OP) derive views; an
access (DMA, copy, raised operand) is a box of a view: a start element and
a shape with strides (D-LOW-REGION).  Nothing here builds IR.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from xdsl.dialects.builtin import (
    AffineMapAttr,
    IntegerAttr,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
)
from xdsl.ir import Attribute, Operation, SSAValue

from nem.dialect.attributes import BITWIDTH, MemLevelAttr, elem_name
from nem.passes.lowering.affine_algebra import Aff, is_identity
from nem.passes.lowering.diagnostics import reject


@dataclass(frozen=True)
class View:
    """A memref value seen as (NEM buffer, element offset, shape, strides)."""

    buffer: SSAValue
    """The `nem.buffer` result."""
    level: MemLevelAttr
    elem: Attribute
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    """Element strides."""
    base: Aff
    """Element offset of index [0, ..., 0] in the buffer."""
    name: str

    @cached_property
    def elem_bytes(self) -> int:
        """Bytes an element (computed once a view: every region of it asks)."""
        return elem_size(self.elem)

    @property
    def span(self) -> int:
        """Elements from index [0, ..., 0] to the last element, plus one."""
        return last_offset(self.shape, self.strides) + 1 if self.shape else 1

    def start(self, idx: Sequence[Aff]) -> Aff:
        """The element offset of index `idx` in the buffer."""
        start = self.base
        for a, s in zip(idx, self.strides):
            start = start + a.scale(s)
        return start


def elem_size(elem: Attribute) -> int:
    name = elem_name(elem)
    assert name is not None
    return BITWIDTH[name] // 8


def last_offset(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The offset of the last element of a box from its first."""
    return sum((d - 1) * s for d, s in zip(shape, strides))


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    """The element strides of a contiguous row-major box."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def buffer_bytes(shape: Sequence[int], elem: Attribute) -> int:
    return math.prod(shape) * elem_size(elem)


def memref_strides(op: Operation | None, t: MemRefType) -> tuple[tuple[int, ...], int]:
    """Element strides and static offset of a memref type's layout."""
    shape = t.get_shape()
    if any(d < 0 for d in shape):
        raise reject(
            op,
            f"dynamic shape {t} is not supported: NEM buffers and regions have static sizes",
            "tile with static sizes",
        )
    layout = t.layout
    if isinstance(layout, NoneAttr):
        return row_major(shape), 0
    if isinstance(layout, StridedLayoutAttr):
        s, off = layout.get_strides(), layout.get_offset()
        if any(x is None for x in s) or off is None:
            raise reject(op, f"dynamic strides or offset in {t} are not supported")
        return tuple(x for x in s if x is not None), off
    if isinstance(layout, AffineMapAttr) and is_identity(layout.data):
        return row_major(shape), 0
    raise reject(op, f"memref layout {layout} is not strided; NEM regions need strides")


def check_elem(op: Operation | None, t: Attribute) -> str:
    """The NEM name of a memref's element type, or a rejection."""
    name = elem_name(t)
    if name is None or name == "i4":
        raise reject(
            op,
            f"element type {t} has no NEM equivalent (D-LOW-ELEM: NEM "
            "elements are at most 32 bits wide)",
            "use i8/i16/i32/ui8/ui16/ui32/f16/bf16/f32; index results (argmax) as i32",
        )
    return name


def memory_space(v: SSAValue) -> int:
    """The integer memory space of a memref value (0 without one)."""
    t = v.type
    assert isinstance(t, MemRefType)
    ms = t.memory_space
    return ms.value.data if isinstance(ms, IntegerAttr) else 0


def contiguous_box(vw: View, idx: Sequence[Aff], n: int) -> tuple[list[int], list[int]]:
    """(shape, strides) of `n` contiguous elements of `vw` from `idx`: the
    trailing dimensions when they hold exactly those elements, else `[n]`
    (with the innermost stride when it is not 1)."""
    shape = list(vw.shape)
    for k in range(len(shape)):
        tail = shape[k:]
        if (
            math.prod(tail) == n
            and all(a.is_const() and a.const == 0 for a in idx[k:])
            and list(row_major(tail)) == list(vw.strides[k:])
        ):
            return tail, list(vw.strides[k:])
    if vw.strides and vw.strides[-1] != 1:
        return [n], [vw.strides[-1]]
    return [n], [1]


def check_bounds(
    op: Operation, vw: View, start: Aff, shape: Sequence[int], strides: Sequence[int]
) -> None:
    """Reject a box that provably leaves its view."""
    last = last_offset(shape, strides)
    span = vw.span
    lo = start - vw.base
    hi = lo.upper()
    if (lo.is_const() and lo.const < 0) or (hi is not None and hi + last >= span and lo.nonneg()):
        raise reject(op, f"the access runs outside {vw.name} ({span} elements)")
