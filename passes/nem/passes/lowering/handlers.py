"""The lowering of every op class `convert-affine-to-nem` takes: the driver's
handler table (`Lowerer(options, HANDLERS)`).  A new construct is one
handler function (`state.Handler`) and one entry here."""

from __future__ import annotations

from xdsl.dialects import affine, linalg, scf
from xdsl.ir import Operation

from nem.frontends.upstream_dialects import mlir_dialect_factories
from nem.frontends.upstream_dialects.affine_if import AffineIfOp
from nem.passes.lowering import (
    async_ops,
    compute,
    index_ops,
    loops,
    memory_ops,
    memref_globals,
    memref_views,
    reshape,
    scf_loops,
)
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.state import BlockState, Handler, Lowering


def reject_control_flow(lw: Lowering, op: Operation, st: BlockState) -> None:
    raise reject(
        op,
        "control flow other than affine.for is not supported at task level",
        "keep conditionals inside a compute loop nest (its kernel runs them)",
    )


def _control_flow_ops() -> list[type[Operation]]:
    from xdsl.dialects import cf

    ops: list[type[Operation]] = [AffineIfOp, affine.ParallelOp]
    ops += list(scf.Scf.operations) + list(cf.Cf.operations)
    return ops


HANDLERS: dict[type[Operation], Handler] = {
    **index_ops.HANDLERS,
    **memory_ops.HANDLERS,
    **reshape.HANDLERS,
    **memref_views.HANDLERS,
    **memref_globals.HANDLERS,
    **loops.HANDLERS,
    **async_ops.HANDLERS,
    # xDSL's linalg ops and the ones NEM's contexts parse in their place
    # (linalg.softmax, the contractions as upstream builds them)
    **{
        cls: compute.lower_linalg
        for cls in (*linalg.Linalg.operations, *mlir_dialect_factories()["linalg"]().operations)
    },
    **{cls: reject_control_flow for cls in _control_flow_ops()},
    **scf_loops.HANDLERS,
}
"""The lowering of every op class the conversion takes."""
