"""`nem_lowering.view`: a memref that is a view of another one's bytes with a
static layout, what the memref view ops become before the conversion
(D-LOW-VIEW-OP, issue 36 item 1):

    %v = "nem_lowering.view"(%x) <{shape = array<i64: 2, 12>,
                                   strides = array<i64: 12, 1>}>
           : (memref<2x3x4xf32>) -> memref<2x12xf32>

The result is `source`'s buffer from `source`'s first element on, with
`shape` and element `strides` (in elements of the buffer, the same element
type as `source`'s); without them, `source`'s own layout (what a
`memref.cast` is: the same view whatever its type says, also of a source
whose sizes are known only where the conversion lowers it, a peeled tile).  The result type is the replaced op's own: users keep
their operand types, so what reads types (escape-hatch kernels' signatures,
access bounds) reads what it read.  One op for the views, so that the
conversion has one handler for them (`reshape.lower_view_op`).

It lives with the IR, as `nem_lowering.kernel` does, because it imports
nothing of the toolchain: every context that parses lowering input
registers it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase, IntegerType, MemRefType, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import NoMemoryEffect
from xdsl.utils.exceptions import VerifyException


@irdl_op_definition
class ViewOp(IRDLOperation):
    """A static-layout view of `source`'s bytes (module docstring)."""

    name = "nem_lowering.view"

    source = operand_def(MemRefType)
    result = result_def(MemRefType)
    shape = opt_prop_def(DenseArrayBase[IntegerType])
    strides = opt_prop_def(DenseArrayBase[IntegerType])

    traits = traits_def(NoMemoryEffect())

    def __init__(
        self,
        source: SSAValue,
        layout: tuple[Sequence[int], Sequence[int]] | None,
        result: Attribute,
    ):
        props = {}
        if layout is not None:
            props["shape"] = DenseArrayBase.from_list(i64, layout[0])
            props["strides"] = DenseArrayBase.from_list(i64, layout[1])
        super().__init__(operands=[source], result_types=[result], properties=props)

    @property
    def layout(self) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """(shape, element strides) as integers; None: `source`'s own."""
        if self.shape is None or self.strides is None:
            return None
        return tuple(self.shape.get_values()), tuple(self.strides.get_values())

    def verify_(self) -> None:
        if (self.shape is None) != (self.strides is None):
            raise VerifyException("shape and strides are given together or not at all")
        layout = self.layout
        shape, strides = layout if layout is not None else ((), ())
        if len(shape) != len(strides):
            raise VerifyException(f"shape {list(shape)} and strides {list(strides)} differ in rank")
        src, res = self.source.type, self.result.type
        assert isinstance(src, MemRefType) and isinstance(res, MemRefType)
        if src.element_type != res.element_type:
            raise VerifyException(
                f"the element type of the view ({res.element_type}) is its "
                f"source's ({src.element_type})"
            )
