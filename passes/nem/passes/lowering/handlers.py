"""The lowering of every op class `convert-affine-to-nem` takes: the driver's
handler table (`Lowerer(options, HANDLERS)`).  A new construct is one
handler function (`state.Handler`) and one entry here; a subclass of an op
listed here is lowered by its base's handler (`Lowerer.handler_of`)."""

from __future__ import annotations

from xdsl.dialects import affine, scf
from xdsl.ir import Operation

from nem.dialect.kernel_op import KernelOp
from nem.frontends.upstream_dialects.affine_if import AffineIfOp
from nem.passes.lowering import (
    async_ops,
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
    **async_ops.HANDLERS,
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
}
"""The lowering of every op class the conversion takes."""
