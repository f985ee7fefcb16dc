"""`nem-declare-allocations` (D-LOW-DECLARE): the allocations the conversion
lowers one by one become `nem_lowering.buffer`s, named before the
conversion, which reads the names instead of inventing them (issue 36
item 1):

    %a = memref.alloc() : memref<16xf32, 2>
    %0 = memref.alloca() : memref<4xf32>
    -> %a = "nem_lowering.buffer"() <{buffer = "a", replaces = "memref.alloc"}>
               : () -> memref<16xf32, 2>
       %0 = "nem_lowering.buffer"() <{buffer = "DDR_buf2", replaces = "memref.alloca"}>
               : () -> memref<4xf32>

Each stays where it was: the conversion hoists it to program scope, in two
slots inside a pipelined loop, as it hoisted the allocation (D-LOW-BUF).
The pass resumes the generator `nem-declare-buffers` left in the IR
(`declare_buffers.resumed_names`) and leaves it there again, its names
taken and its `DEFAULT<n>` count on the function: a name is the
allocation's MLIR name when it is a free NEM identifier, else
`LEVEL_buf<n>` after its memory space (`memory-spaces`).  It names, in
program order (pattern `AllocationToBuffer`, one walk), the allocations the
conversion gave a buffer: not the tags of DMAs (`only_dma_tags`), not one
the conversion rejects (dynamic sizes, element type, layout, memory space:
those keep no name, and the conversion reports them at their turn, word for
word as before).  Not those in an outlined kernel or a pure nest (as
`nem-rewrite-views`): their kernels hold them.

The conversion named an allocation when it reached it, between the names
of the loop variables and staging regions before it; the pass names the
allocations first.  The names are the same unless an allocation's name
would have met one of those: a loop variable without an MLIR name takes a
`DEFAULT<n>` number (`i<n>`) from the same count as an unnamed allocation,
and a loop variable, staging region or typed view named like an allocation
takes the `_v<k>` suffix in the allocation's place (D-LOW-DECLARE's decided
change; the differential test shows the lowering inputs unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from nem.dialect.buffer_op import BufferOp
from nem.dialect.diagnostics import NemDiagnosticError
from nem.passes.lowering import declare_buffers
from nem.passes.lowering.context import DEFAULT_SPACES, Names, parse_spaces, space_level
from nem.passes.lowering.memory_ops import allocation_strides
from nem.passes.lowering.memref_roots import only_dma_tags
from nem.passes.lowering.prepare import entry_function, rewrite_once
from nem.passes.lowering.view_ops import LoweredOneByOne


@dataclass
class AllocationToBuffer(RewritePattern):
    """`memref.alloc` / `memref.alloca` -> `nem_lowering.buffer` in its
    place, named when the conversion gives it a buffer (module docstring)."""

    names: Names
    spaces: dict[int, str]
    lowered: LoweredOneByOne = field(default_factory=LoweredOneByOne)

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: memref.AllocOp | memref.AllocaOp, rewriter: PatternRewriter
    ) -> None:
        if not self.lowered(op):
            return
        result = op.results[0]
        level = self.level(op)
        name = None
        if level is not None:
            name = self.names.fresh(result.name_hint, f"{level.split('[')[0]}_buf")
        buf = BufferOp(name, None, result.type, op.name, op.operands)
        buf.location = op.location
        rewriter.replace_op(op, buf)

    def level(self, op: memref.AllocOp | memref.AllocaOp) -> str | None:
        """The level of the buffer the conversion declares for `op`, None
        when it declares none (DMA tags) or rejects `op`: the conversion's
        checks, in its order (`memory_ops.lower_alloc`)."""
        t = op.results[0].type
        assert isinstance(t, MemRefType)
        if op.operands or only_dma_tags(op.results[0]):
            return None
        try:
            allocation_strides(op, t)
            return space_level(op, t, self.spaces)
        except NemDiagnosticError:
            return None  # the conversion reports it, at its turn


def declare(fn: func.FuncOp, spaces: dict[int, str]) -> None:
    """Make `fn`'s allocations buffers, named by the generator
    `nem-declare-buffers` left (module docstring).  Declared already, there
    is no allocation left to rewrite, and the generator's state stays."""
    names = declare_buffers.resumed_names(fn)
    pattern = AllocationToBuffer(names, spaces)
    rewrite_once(fn.body, pattern)
    declare_buffers.keep(fn, names)


@dataclass(frozen=True)
class DeclareAllocationsPass(ModulePass):
    """Replace the entry function's `memref.alloc`s and `memref.alloca`s by
    `nem_lowering.buffer`s, named with the generator the conversion resumes
    (D-LOW-DECLARE).  Runs after `nem-declare-buffers`.

    Options:
      memory-spaces: memref memory space to NEM level, e.g. 0:DDR,1:L2,2:L1[0]
        (the conversion's: an unnamed buffer is named after its level)
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-declare-allocations"

    memory_spaces: tuple[str, ...] = (DEFAULT_SPACES,)
    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = entry_function(op, self.entry)
        declare_buffers.declare(fn)
        declare(fn, parse_spaces(self.memory_spaces))
