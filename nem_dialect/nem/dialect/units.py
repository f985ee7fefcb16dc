"""Which unit types can run a task (SPEC §1 "Resource Classes and Task
Mapping", RES-07): the one home of that fact, shared by the device checks
(`nem-verify-device`) and the bytecode's device requirements."""

from __future__ import annotations

from nem.dialect.ops import ComputeOp, StoreOp, TaskOp, TransferOp


def task_kind(op: TaskOp) -> str:
    if isinstance(op, TransferOp):
        return "transfer"
    if isinstance(op, StoreOp):
        return "store"
    return op.opcode  # type: ignore[attr-defined]


def eligible_units(op: TaskOp) -> tuple[str, ...]:
    """Unit types that can run `op`, preferred first (SPEC §1 "Resource Classes
    and Task Mapping", RES-07): the registry's unit for a compute opcode, DMA
    too for view ops, VPU as the fallback for every compute op; DMA for
    transfers; CSTL for stores."""
    if isinstance(op, TransferOp):
        return ("DMA",)
    if isinstance(op, StoreOp):
        return ("CSTL",)
    assert isinstance(op, ComputeOp)
    units = [op.SPEC.unit]
    if op.SPEC.category == "view":
        units.append("DMA")
    units.append("VPU")
    return tuple(dict.fromkeys(units))
