"""`nem_lowering.buffer`: a buffer of the program that `nem-declare-buffers`
declared before the conversion, in place of the `memref.get_global`s of one
global (D-LOW-GLOBAL, issue 36 item 1):

    %w = memref.get_global @w : memref<3x2xf32>
    -> %w = "nem_lowering.buffer"() <{buffer = "w", global = @w}> : () -> memref<3x2xf32>

at the start of the entry function, one per global, in the order of the
globals' first uses.  `buffer` is the name the program's buffer has: the
pass chose it with the name generator the conversion resumes (`Names`), so
the conversion reads names instead of inventing them.  The result type is
the global's (every `get_global` of it has that type).

It lives with the IR, as `nem_lowering.view` does: it imports nothing of
the toolchain, so every context that parses lowering input registers it
without an import cycle.
"""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType, StringAttr, SymbolRefAttr
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def, result_def, traits_def
from xdsl.traits import NoMemoryEffect


@irdl_op_definition
class BufferOp(IRDLOperation):
    """A declared buffer holding a global (module docstring)."""

    name = "nem_lowering.buffer"

    result = result_def(MemRefType)
    buffer = prop_def(StringAttr)
    """The program buffer's name."""
    global_ = prop_def(SymbolRefAttr, prop_name="global")
    """The `memref.global` whose buffer it is (its contents: the weights)."""

    traits = traits_def(NoMemoryEffect())

    def __init__(self, buffer: str, global_: SymbolRefAttr, result: Attribute):
        super().__init__(
            result_types=[result],
            properties={"buffer": StringAttr(buffer), "global": global_},
        )

    @property
    def buffer_name(self) -> str:
        return self.buffer.data
