"""The lowering of every op class `convert-affine-to-nem` takes: the driver's
handler table (`Lowerer(options, HANDLERS)`).  A new construct is one
handler function (`state.Handler`) and one entry here; a subclass of an op
listed here is lowered by its base's handler (`Lowerer.handler_of`)."""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Operation
from xdsl.traits import IsTerminator

from nem.dialect.kernel_op import KernelOp
from nem.dialect.scope_op import ScopeOp
from nem.passes.lowering import (
    compute,
    index_ops,
    loops,
    memory_ops,
    memref_views,
    outline_kernels,
)
from nem.passes.lowering.escape import LINALG_OPS
from nem.passes.lowering.state import BlockState, Handler, Lowering


def lower_scope(lw: Lowering, op: ScopeOp, st: BlockState) -> None:
    """The scope's tasks at its place, with scratch buffers of their own
    (`staging.scratch`, which reads the scope from the IR: `task_scope`): they may run concurrently with the others, as the
    `async.execute` it was (D-LOW-ASYNC-INLINE).  Its results are the views
    (memrefs) and affine values (indices) its yield gives, which the walk
    leaves to it (D-LOW-WALK)."""
    ctx = lw.ctx
    lw.lower_block(op.body.block, st.builder)
    yielded = op.yielded
    for r, v in zip(op.results, yielded.operands):
        if isinstance(v.type, MemRefType) and r.uses:
            ctx.views[r] = ctx.view(v, yielded)
        elif isinstance(v.type, IndexType) and r.uses:
            ctx.env[r] = ctx.index(v, yielded)


HANDLERS: dict[type[Operation], Handler] = {
    **index_ops.HANDLERS,
    **memory_ops.HANDLERS,
    **memref_views.HANDLERS,
    **loops.HANDLERS,
    # xDSL's linalg ops, and linalg.softmax, which xDSL lacks; the contractions
    # NEM's contexts parse in place of xDSL's (as upstream builds them,
    # `linalg_named.UPSTREAM_CONTRACTIONS`) subclass them, and so do the
    # affine accesses (`affine_ssa_maps`): the driver finds a subclass's
    # handler by its MRO (`Lowerer.handler_of`); not `linalg.yield`, its
    # op's terminator (D-LOW-WALK)
    **{cls: compute.lower_linalg for cls in LINALG_OPS if not cls.has_trait(IsTerminator)},
    # no control flow (`scf`, `cf`, `affine.if`, `affine.parallel`):
    # `nem-check-task-control-flow` rejected it first (D-LOW-TASK-CF), but
    # the `scf.execute_region` of a re-rolled loop's last iteration, which
    # the loop lowers (`loops.lower_for`, D-LOW-PIPE); no terminator: each
    # is its parent's (`Lowerer.block_ops`, D-LOW-WALK)
    KernelOp: outline_kernels.lower_kernel,  # D-LOW-OUTLINE
    ScopeOp: lower_scope,  # D-LOW-ASYNC-INLINE
}
"""The lowering of every op class the conversion takes."""
