"""The lowering of every op class `convert-affine-to-nem` takes: the driver's
handler table (`Lowerer(options, HANDLERS)`).  A new construct is one
handler function (`state.Handler`) and one entry here; a subclass of an op
listed here is lowered by its base's handler (`Lowerer.handler_of`)."""

from __future__ import annotations

from xdsl.dialects import affine, scf
from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Operation

from nem.dialect.kernel_op import KernelOp
from nem.dialect.scope_op import ScopeOp
from nem.frontends.upstream_dialects.affine_if import AffineIfOp
from nem.passes.lowering import (
    compute,
    index_ops,
    loops,
    memory_ops,
    memref_views,
    outline_kernels,
    scf_loops,
)
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.escape import LINALG_OPS
from nem.passes.lowering.reroll import last_iteration
from nem.passes.lowering.state import BlockState, Handler, Lowering


def reject_control_flow(lw: Lowering, op: Operation, st: BlockState) -> None:
    raise reject(
        op,
        "control flow other than affine.for is not supported at task level",
        "keep conditionals inside a compute loop nest (its kernel runs them)",
    )


def lower_execute_region(lw: Lowering, op: scf.ExecuteRegionOp, st: BlockState) -> None:
    """Only the last iteration of a re-rolled pipelined loop, which that
    loop's handler lowered (`reroll.last_iteration`, D-LOW-PIPE)."""
    prev = op.prev_op
    if not (isinstance(prev, affine.ForOp) and last_iteration(prev) is op):
        reject_control_flow(lw, op, st)


def lower_scope(lw: Lowering, op: ScopeOp, st: BlockState) -> None:
    """The scope's tasks at its place, with scratch buffers of their own
    (`staging.scratch`): they may run concurrently with the others, as the
    `async.execute` it was (D-LOW-ASYNC-INLINE).  Its results are the views
    (memrefs) and affine values (indices) it yields."""
    ctx = lw.ctx
    ctx.task_scopes.append(op)
    try:
        lw.lower_block(op.body.block, st.builder)
    finally:
        ctx.task_scopes.pop()
    yielded = op.yielded
    for r, v in zip(op.results, yielded.operands):
        if isinstance(v.type, MemRefType) and r.uses:
            ctx.views[r] = ctx.view(v, yielded)
        elif isinstance(v.type, IndexType) and r.uses:
            ctx.env[r] = ctx.index(v, yielded)


def _control_flow_ops() -> list[type[Operation]]:
    from xdsl.dialects import cf

    ops: list[type[Operation]] = [AffineIfOp, affine.ParallelOp]
    ops += list(scf.Scf.operations) + list(cf.Cf.operations)
    return ops


HANDLERS: dict[type[Operation], Handler] = {
    **index_ops.HANDLERS,
    **memory_ops.HANDLERS,
    **memref_views.HANDLERS,
    **loops.HANDLERS,
    # xDSL's linalg ops, and linalg.softmax, which xDSL lacks; the contractions
    # NEM's contexts parse in place of xDSL's (as upstream builds them,
    # `linalg_named.UPSTREAM_CONTRACTIONS`) subclass them, and so do the
    # affine accesses (`affine_ssa_maps`): the driver finds a subclass's
    # handler by its MRO (`Lowerer.handler_of`)
    **{cls: compute.lower_linalg for cls in LINALG_OPS},
    **{cls: reject_control_flow for cls in _control_flow_ops()},
    **scf_loops.HANDLERS,
    scf.ExecuteRegionOp: lower_execute_region,
    KernelOp: outline_kernels.lower_kernel,  # D-LOW-OUTLINE
    ScopeOp: lower_scope,  # D-LOW-ASYNC-INLINE
}
"""The lowering of every op class the conversion takes."""
