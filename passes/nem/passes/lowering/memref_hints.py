"""`nem-drop-memref-hints` (D-LOW-MEMREF-HINTS): the memref ops that say
something about memory NEM's static buffers make moot, gone before the
conversion, which then has no entry for them (issue 36 item 1: a handler of
the conversion's table as a rewrite pattern in a pass of its own).

- `memref.dealloc`: a NEM buffer is declared at program scope; its lifetime
  is the span of the statements that use it (`nem-share-buffers`, D-LOW-SHARE),
  so a deallocation adds nothing.  The analyses that read deallocations
  (`memref_roots.only_dma_tags`, `partial_tiles`' narrowing) count them as no
  use, so erasing them changes none of their answers.
- `memref.assume_alignment`: an assumption about an address that the
  compiler may use, never a change of the data; its result is its operand
  (the same type, `SameOperandsAndResultType`), so its uses take the operand.
  The conversion used to bind no view to the result, so a use of it was an
  error ("no NEM view", issue 36 session 23).

The pass runs last of the preparation, after `nem-outline-kernels`, so the
passes before it read the input they always read; the functions of outlined
kernels (`nem_lowering.kernel`) are left as they are: their text is the
escape-hatch task's, printed as MLIR wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from nem.dialect.kernel_op import KernelOp
from nem.passes.lowering.prepare import entry_function, rewrite_once


def in_kernel(op: Operation) -> bool:
    """Whether `op` is inside an outlined kernel's function (kept as written)."""
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, KernelOp):
            return True
        parent = parent.parent_op()
    return False


class DropDealloc(RewritePattern):
    """`memref.dealloc %m` -> nothing."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.DeallocOp, rewriter: PatternRewriter) -> None:
        if not in_kernel(op):
            rewriter.erase(op)


class DropAssumeAlignment(RewritePattern):
    """`%r = memref.assume_alignment %m, N` -> `%m` wherever `%r` was used."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.AssumeAlignmentOp, rewriter: PatternRewriter) -> None:
        if not in_kernel(op):
            rewriter.replace_matched_op([], [op.memref])


@dataclass(frozen=True)
class DropMemrefHintsPass(ModulePass):
    """Erase the entry function's `memref.dealloc`s and `memref.assume_alignment`s
    (the latter's uses take its operand), outside outlined kernels (D-LOW-MEMREF-HINTS).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-drop-memref-hints"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_once(entry_function(op, self.entry).body, DropDealloc(), DropAssumeAlignment())
