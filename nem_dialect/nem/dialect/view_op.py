"""`nem_lowering.view`: a memref that is a view of another one's bytes with a
static layout, what the memref view ops become before the conversion
(D-LOW-VIEW-OP, issue 36 item 1):

    %v = "nem_lowering.view"(%x) <{shape = array<i64: 2, 12>,
                                   strides = array<i64: 12, 1>}>
           : (memref<2x3x4xf32>) -> memref<2x12xf32>

The result is `source`'s buffer from `source`'s first element on, with
`shape` and element `strides` (in elements of the buffer, the same element
type as `source`'s), moved by `base` elements when given (an affine map of
the first index operands: a subview's offsets, session 27); a size of
`shape` that is `?` (`DYNAMIC_INDEX`) is the next index operand, which the
conversion needs constant where it lowers the view (a peeled tile,
D-LOW-PEEL).  Without a layout, `source`'s own (what a
`memref.cast` is: the same view whatever its type says, also of a source
whose sizes are known only where the conversion lowers it, a peeled tile).

A byte view (`bytes`, a `memref.view`, session 29) re-reads a 1-D buffer of
1-byte elements as another element type: its `base` counts bytes, its
`shape` is row-major (no `strides`: they are the sizes' where the view is
lowered, a `?` size being known there only), and the conversion checks
where it lowers the view that the source is such a buffer and that the
source's base plus `base` is a whole number of the result's elements (a
pipelined slot's base is known there only, D-LOW-VIEW):

    %v = memref.view %a[%c0][%c16, %c48] : memref<3072xi8, 2> to memref<?x?xf32, 2>
    -> %v = "nem_lowering.view"(%a, %c0, %c16, %c48) <{base = (d0) -> (d0), bytes,
                                                       shape = [?, ?]}> : ...

The result type is the replaced op's own: users keep
their operand types, so what reads types (escape-hatch kernels' signatures,
access bounds) reads what it read.  One op for the views, so that the
conversion has one handler for them (`memref_views.lower_view_op`).
`replaces` is the name of the op it replaced, which messages give
(`written_name`): the user wrote that op, not this one.

It lives with the IR, as `nem_lowering.kernel` does, because it imports
nothing of the toolchain: every context that parses lowering input
registers it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    DenseArrayBase,
    IndexType,
    IntegerType,
    MemRefType,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import NoMemoryEffect
from xdsl.utils.exceptions import VerifyException

from nem.dialect.buffer_op import BufferOp


@irdl_op_definition
class ViewOp(IRDLOperation):
    """A static-layout view of `source`'s bytes (module docstring)."""

    name = "nem_lowering.view"

    source = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    """The base's operands, then the dynamic sizes of `shape`."""
    result = result_def(MemRefType)
    shape = opt_prop_def(DenseArrayBase[IntegerType])
    strides = opt_prop_def(DenseArrayBase[IntegerType])
    base = opt_prop_def(AffineMapAttr)
    replaces = opt_prop_def(StringAttr)
    bytes = opt_prop_def(UnitAttr)
    """A byte view (module docstring): `base` in bytes, `shape` row-major."""

    traits = traits_def(NoMemoryEffect())

    def __init__(
        self,
        source: SSAValue,
        layout: tuple[Sequence[int], Sequence[int]] | None,
        result: Attribute,
        replaces: str | None = None,
        base: tuple[AffineMap, Sequence[SSAValue]] | None = None,
        sizes: Sequence[SSAValue] = (),
        row_major: bool = False,
    ):
        """`row_major`: a byte view of `layout`'s shape (its strides unused)."""
        props: dict[str, Attribute] = {}
        if layout is not None:
            props["shape"] = DenseArrayBase.from_list(i64, layout[0])
            if not row_major:
                props["strides"] = DenseArrayBase.from_list(i64, layout[1])
        if row_major:
            props["bytes"] = UnitAttr()
        if replaces is not None:
            props["replaces"] = StringAttr(replaces)
        offsets: Sequence[SSAValue] = ()
        if base is not None:
            props["base"] = AffineMapAttr(base[0])
            offsets = base[1]
        super().__init__(
            operands=[source, [*offsets, *sizes]], result_types=[result], properties=props
        )

    @property
    def base_operands(self) -> Sequence[SSAValue]:
        """The index operands of `base` (its dimensions)."""
        return self.indices[: self.base.data.num_dims if self.base is not None else 0]

    @property
    def size_operands(self) -> Sequence[SSAValue]:
        """The dynamic sizes of `shape`, in order."""
        return self.indices[len(self.base_operands) :]

    @property
    def layout(self) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """(shape, element strides) as integers; None: `source`'s own, or a
        byte view's (its strides are its sizes' where it is lowered)."""
        if self.shape is None or self.strides is None:
            return None
        return tuple(self.shape.get_values()), tuple(self.strides.get_values())

    @property
    def is_cast(self) -> bool:
        """`source`'s own view (no shape: a `memref.cast`)."""
        return self.shape is None

    def verify_(self) -> None:
        if self.bytes is not None:
            self._verify_bytes()
            return
        if (self.shape is None) != (self.strides is None):
            raise VerifyException("shape and strides are given together or not at all")
        layout = self.layout
        shape, strides = layout if layout is not None else ((), ())
        if len(shape) != len(strides):
            raise VerifyException(f"shape {list(shape)} and strides {list(strides)} differ in rank")
        base = self.base.data if self.base is not None else None
        if base is not None and (base.num_symbols or len(base.results) != 1):
            raise VerifyException(f"the base {base} is not one result of dimensions only")
        if base is not None and base.num_dims > len(self.indices):
            raise VerifyException(f"the base {base} has more dimensions than index operands")
        if (base is not None or self.indices) and layout is None:
            raise VerifyException("a base or sizes without a layout")
        dynamic = sum(1 for d in shape if d == DYNAMIC_INDEX)
        if len(self.size_operands) != dynamic:
            raise VerifyException(
                f"{dynamic} dynamic size(s) in the shape, {len(self.size_operands)} size operand(s)"
            )
        src, res = self.source.type, self.result.type
        assert isinstance(src, MemRefType) and isinstance(res, MemRefType)
        if src.element_type != res.element_type:
            raise VerifyException(
                f"the element type of the view ({res.element_type}) is its "
                f"source's ({src.element_type})"
            )

    def _verify_bytes(self) -> None:
        if self.shape is None or self.strides is not None or self.base is None:
            raise VerifyException("a byte view has a shape and a base, and no strides")
        base = self.base.data
        if base.num_symbols or base.num_dims != 1 or len(base.results) != 1:
            raise VerifyException(f"the base {base} of a byte view is not one result of one dim")
        dynamic = sum(1 for d in self.shape.get_values() if d == DYNAMIC_INDEX)
        if len(self.indices) != 1 + dynamic:
            raise VerifyException(
                f"{dynamic} dynamic size(s) in the shape, {len(self.indices) - 1} size operand(s)"
            )


LOWERING_MARKS = "nem_lowering."
"""The prefix of the discardable attributes the lowering's preparation
passes leave on upstream ops for the conversion to read: none belongs in
what the program keeps of the user's IR (an escape-hatch kernel's text)."""

REPLACES = LOWERING_MARKS + "replaces"
"""The discardable attribute naming the op a preparation pass rewrote into
an upstream op of another spelling (`memref.dma_start` -> `affine.dma_start`,
`nem-raise-memref-dmas`): the name messages give it."""


def written_name(op: Operation) -> str:
    """The name messages give `op`: a view op's is the name of the op it
    replaced (the user wrote a `memref.subview`, never this op), a declared
    buffer's `memref.get_global` or allocation (`buffer_op`), an op carrying
    `REPLACES` the name it holds."""
    if isinstance(op, ViewOp | BufferOp) and op.replaces is not None:
        return op.replaces.data
    if isinstance(written := op.attributes.get(REPLACES), StringAttr):
        return written.data
    if isinstance(op, BufferOp):  # the first of the get_globals it replaced
        return "memref.get_global"
    return op.name
