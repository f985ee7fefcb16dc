"""`nem-raise-scalar-copies` (D-LOW-SCALAR-COPY): the one-element copies
leave the conversion's scalar-access handler for a pass of rewrite patterns
before it (issue 36 item 1), placed after `nem-inline-async-executes` (its
`nem_lowering.scope` bodies are lowered op by op too) and before
`nem-check-task-control-flow`.

`%v = load A[i]; store %v, B[j]` (affine or memref, the load's one use the
store, in the same block: `escape.copied_by`) where the conversion lowers
ops one by one, what `affine-data-copy-generate` emits for a one-element
copy, becomes a `nem_lowering.element_copy` holding the load and the store
as they were, at the store's place; the conversion lowers it as it lowered
the pair (D-LOW-COPYNEST): the load's bounds checked, then the store's
(D-LOW-BOUNDS), and one `transfer` `copy` of one element, the source region
at the load, the destination at the store.

Where the conversion lowers ops one by one: the entry function's block,
the bodies of the loops it keeps as NEM loops (`structure.is_structural`,
or marked `nem_lowering.tile_loop`), `nem_lowering.scope` bodies and the
last iteration `nem-reroll-pipelines` put after a re-rolled loop
(`task_control_flow`'s scopes; a pair in the body of a loop the conversion
then rejects, or that has no iteration, is raised and never lowered).  A
pair inside a compute nest is its kernel's, left as it is.

The pair was lowered at the store, the load's bounds checked at the load:
an op between them that the conversion rejects is now reported before the
load's bounds error (both are errors), and, as before, the element is read
at the store's place: a pair with an op between that may write memory
(no `Pure` trait nor effects without writes: a store, a call, a DMA) is
rejected at that op, "not supported" (the old conversion made it the same
transfer and missed the write).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import affine, func, memref, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.traits import is_side_effect_free

from nem.dialect.element_copy_op import ElementCopyOp
from nem.dialect.scope_op import ScopeOp
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.escape import copied_by
from nem.passes.lowering.prepare import entry_function, rewrite_once
from nem.passes.lowering.reroll import is_last_iteration
from nem.passes.lowering.structure import kept_as_loop


@dataclass
class TaskLevel:
    """Whether an op of function `fn` is where the conversion lowers ops one
    by one (module docstring), one answer per block."""

    fn: func.FuncOp
    _blocks: dict[Block, bool] = field(default_factory=dict)

    def __call__(self, op: Operation) -> bool:
        block = op.parent_block()
        if block is None:
            return False
        known = self._blocks.get(block)
        if known is None:
            known = self._blocks[block] = self._block(block)
        return known

    def _block(self, block: Block) -> bool:
        parent = block.parent_op()
        if parent is self.fn:
            return True
        if parent is None:
            return False
        if isinstance(parent, affine.ForOp):
            ok = kept_as_loop(parent)
        elif isinstance(parent, scf.ExecuteRegionOp):
            ok = is_last_iteration(parent)
        else:
            ok = isinstance(parent, ScopeOp)
        return ok and self(parent)


@dataclass
class RaiseScalarCopy(RewritePattern):
    """`%v = load A[i]; store %v, B[j]` at task level -> a
    `nem_lowering.element_copy` holding both, at the store's place."""

    task_level: TaskLevel

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: affine.StoreOp | memref.StoreOp, rewriter: PatternRewriter
    ) -> None:
        load = op.value.owner
        if not isinstance(load, Operation) or copied_by(load) is not op:
            return
        if not self.task_level(op):
            return
        _check_nothing_written_between(load, op)
        new_load = load.clone()
        new_load.location = load.location
        new_store = op.clone(value_mapper={load.results[0]: new_load.results[0]})
        new_store.location = op.location
        copy = ElementCopyOp(Block([new_load, new_store]))
        copy.location = op.location
        rewriter.replace_op(op, copy, new_results=[])
        rewriter.erase(load)


def _check_nothing_written_between(load: Operation, store: Operation) -> None:
    """Reject the pair where an op between the load and the store may write
    memory: the copy reads its element at the store's place (one transfer
    there), which would see that write; the program read it before."""
    o = load.next_op
    while o is not None and o is not store:
        if not is_side_effect_free(o):
            raise reject(
                o,
                "not supported: this op may write memory between the load and the "
                "store of a one-element copy, which NEM makes one transfer at the "
                "store (D-LOW-SCALAR-COPY)",
                "store the loaded value right after the load, or move this op after the store",
            )
        o = o.next_op


@dataclass(frozen=True)
class RaiseScalarCopiesPass(ModulePass):
    """Raise the entry function's one-element copies at task level into
    `nem_lowering.element_copy`s (D-LOW-SCALAR-COPY).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-raise-scalar-copies"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = entry_function(op, self.entry)
        rewrite_once(fn.body, RaiseScalarCopy(TaskLevel(fn)))
