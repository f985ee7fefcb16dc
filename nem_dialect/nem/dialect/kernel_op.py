"""`nem_lowering.kernel`: a loop nest or linalg op that the lowering runs as
one escape-hatch task (D-LOW-ESCAPE), outlined before the conversion
(D-LOW-OUTLINE):

    "nem_lowering.kernel"(%A, %B, %i) <{what = "loop nest", why = "...",
        operandSegmentSizes = array<i32: 1, 1, 1>}> ({
      func.func @kernel(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %j: index) { ... }
    }) : (memref<4x8xf32>, memref<4x8xf32>, index) -> ()

Operands: the memrefs the kernel reads only (`ins`), those it writes
(`outs`, read-modify-write), then the index values it uses (`index_args`).
Its one region holds `func.func @kernel`, whose arguments are, in order, one
memref per `ins` and `outs` operand, of the operand's element type and
shape with the identity layout (the task's region, indexed by its logical
indices), then one `index` per `index_args` operand: the function the task's
`kernel` attribute prints (`escape.kernel_function`).  `what` names what
runs (the remark's "loop nest", "linalg.generic"), `why` is why it is not
raised, as the remark prints it (D-OPT-REMARKS).

It lives with the IR, not with the lowering's passes, because it imports
nothing of the toolchain: every context that parses lowering input
(`lowering_context`, nem-opt's universe) registers it without an import
cycle.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import IndexType, MemRefType, NoneAttr, StringAttr
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import IsolatedFromAbove, NoTerminator
from xdsl.utils.exceptions import VerifyException

from nem.dialect.buffer_op import BufferOp
from nem.dialect.element_copy_op import ElementCopyOp
from nem.dialect.scope_op import ScopeOp, ScopeYieldOp
from nem.dialect.view_op import ViewOp


@irdl_op_definition
class KernelOp(IRDLOperation):
    """One escape-hatch task, decided before the conversion (module docstring)."""

    name = "nem_lowering.kernel"

    ins = var_operand_def(MemRefType)
    outs = var_operand_def(MemRefType)
    index_args = var_operand_def(IndexType)
    what = prop_def(StringAttr)
    why = prop_def(StringAttr)
    body = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(NoTerminator(), IsolatedFromAbove())

    def __init__(
        self,
        ins: Sequence[SSAValue],
        outs: Sequence[SSAValue],
        index_args: Sequence[SSAValue],
        kernel: func.FuncOp,
        what: str,
        why: str,
    ):
        super().__init__(
            operands=[ins, outs, index_args],
            properties={"what": StringAttr(what), "why": StringAttr(why)},
            regions=[Region(Block([kernel]))],
        )

    @property
    def kernel(self) -> func.FuncOp:
        """The `func.func @kernel` the region holds (checked by `verify_`)."""
        k = self.body.block.first_op
        assert isinstance(k, func.FuncOp)
        return k

    def verify_(self) -> None:
        ops = list(self.body.block.ops)
        if len(ops) != 1 or not isinstance(ops[0], func.FuncOp):
            raise VerifyException("its region holds one func.func @kernel")
        k = ops[0]
        if any(
            isinstance(v.type, MemRefType) and not v.type.has_static_shape()
            for v in (*self.ins, *self.outs)
        ):
            raise VerifyException(
                "its memrefs have static shapes (a nest on a view sized per "
                "lowered copy stays the conversion's, D-LOW-OUTLINE)"
            )
        if k.sym_name.data != "kernel":
            raise VerifyException(f"its function is @kernel, not @{k.sym_name.data}")
        want: list[Attribute] = [region_type(v) for v in (*self.ins, *self.outs)]
        want += [IndexType()] * len(self.index_args)
        got = k.function_type
        if list(got.inputs.data) != want or got.outputs.data:
            raise VerifyException(
                f"@kernel's type is {got}, expected "
                f"({', '.join(map(str, want))}) -> (): one identity-layout memref per ins "
                "and outs operand (its element type and shape), then one index per index_args"
            )
        if not self.outs:
            raise VerifyException("a kernel writes at least one memref (outs)")


def region_type(v: SSAValue) -> MemRefType:
    """The type of memref `v`'s kernel argument: its element type and
    shape, the identity layout, no memory space."""
    t = v.type
    assert isinstance(t, MemRefType)
    return MemRefType(t.element_type, t.get_shape(), NoneAttr(), NoneAttr())


NEM_LOWERING = Dialect(
    "nem_lowering", [KernelOp, ViewOp, BufferOp, ScopeOp, ScopeYieldOp, ElementCopyOp], []
)
"""The lowering's own ops (the kernel, `view_op.ViewOp`, `buffer_op.BufferOp`,
`scope_op.ScopeOp` with its yield and `element_copy_op.ElementCopyOp`),
registered with the MLIR input dialects."""
