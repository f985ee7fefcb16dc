"""`nem_lowering.buffer`: a buffer of the program declared before the
conversion (issue 36 item 1), in place of

- the `memref.get_global`s of one global (`nem-declare-buffers`, D-LOW-GLOBAL):

      %w = memref.get_global @w : memref<3x2xf32>
      -> %w = "nem_lowering.buffer"() <{buffer = "w", global = @w}> : () -> memref<3x2xf32>

  at the start of the entry function, one per global, in the order of the
  globals' first uses;
- a `memref.alloc` or `memref.alloca` (`nem-declare-allocations`, D-LOW-BUF):

      %a = memref.alloc() : memref<16xf32, 2>
      -> %a = "nem_lowering.buffer"() <{buffer = "a", replaces = "memref.alloc"}>
             : () -> memref<16xf32, 2>

  where the allocation was (a buffer in a loop body is hoisted, maybe in
  two slots, by the conversion, which knows the loops).  `replaces` is the
  op it replaced, which messages name; `sizes` are its dynamic sizes (the
  conversion rejects them, as it did the allocation).

`buffer` is the name the program's buffer has: the pass chose it with the
name generator the conversion resumes (`Names`), so the conversion reads
names instead of inventing them.  An allocation with no buffer (the tags of
DMAs) or one the conversion rejects has none.  The result type is the
global's (every `get_global` of it has that type) or the allocation's.

It lives with the IR, as `nem_lowering.view` does: it imports nothing of
the toolchain, so every context that parses lowering input registers it
without an import cycle.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType, MemRefType, StringAttr, SymbolRefAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import NoMemoryEffect
from xdsl.utils.exceptions import VerifyException


@irdl_op_definition
class BufferOp(IRDLOperation):
    """A declared buffer holding a global or an allocation (module docstring)."""

    name = "nem_lowering.buffer"

    sizes = var_operand_def(IndexType)
    """An allocation's dynamic sizes (none: the conversion rejects them)."""
    result = result_def(MemRefType)
    buffer = opt_prop_def(StringAttr)
    """The program buffer's name (none: an allocation without a buffer)."""
    global_ = opt_prop_def(SymbolRefAttr, prop_name="global")
    """The `memref.global` whose buffer it is (its contents: the weights)."""
    replaces = opt_prop_def(StringAttr)
    """The allocation op it replaced (`memref.alloc`, `memref.alloca`)."""

    traits = traits_def(NoMemoryEffect())

    def __init__(
        self,
        buffer: str | None,
        global_: SymbolRefAttr | None,
        result: Attribute,
        replaces: str | None = None,
        sizes: Sequence[SSAValue] = (),
    ):
        props: dict[str, Attribute | None] = {
            "buffer": StringAttr(buffer) if buffer is not None else None,
            "global": global_,
            "replaces": StringAttr(replaces) if replaces is not None else None,
        }
        super().__init__(
            operands=[sizes],
            result_types=[result],
            properties={k: v for k, v in props.items() if v is not None},
        )

    def verify_(self) -> None:
        if (self.global_ is None) == (self.replaces is None):
            raise VerifyException("a buffer holds a global or replaces an allocation: one of them")
        if self.global_ is not None and (self.buffer is None or self.sizes):
            raise VerifyException("a global's buffer has a name and no sizes")

    @property
    def buffer_name(self) -> str:
        assert self.buffer is not None, "an allocation without a buffer"
        return self.buffer.data

    @property
    def is_allocation(self) -> bool:
        return self.replaces is not None
