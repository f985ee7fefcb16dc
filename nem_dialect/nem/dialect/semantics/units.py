"""Which units may run a task on a given device (SPEC §1 "Resource Classes and
Task Mapping"; RES-03..07, D-SEM-UNITS)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nem.dialect.attributes import RegionType
from nem.dialect.ops import ComputeOp, StoreOp, TaskOp, TransferOp

PER_ENGINE_UNITS = ("NMU", "CSTL", "DMA", "VPU", "SEQ")
"""Unit types every engine has instances of (SPEC §1)."""
DEVICE_UNITS = ("sDMA", "WDM")
"""Unit types shared by the device."""
UNIT_TYPES = PER_ENGINE_UNITS + DEVICE_UNITS
RESOURCE_UNITS = ("NMU", "CSTL", "DMA", "VPU")
"""Valid `@resource` targets (RES-01)."""


def _levels(op: TaskOp) -> set[str]:

    levels: set[str] = set()
    for v, _ in op.operand_regions():
        rtype = v.type
        assert isinstance(rtype, RegionType)  # task operands are regions
        levels.add(rtype.level.kind)
    return levels


def task_kind(op: TaskOp) -> str:
    """`transfer`, `store`, or the compute opcode (how diagnostics name a task's kind)."""

    if isinstance(op, TransferOp):
        return "transfer"
    if isinstance(op, StoreOp):
        return "store"
    assert isinstance(op, ComputeOp)  # the third kind of task
    return op.opcode


def eligible_units(op: TaskOp) -> tuple[str, ...]:
    """Unit types that may execute `op`, preferred first (D-SEM-UNITS):
    a transfer that touches DDR and no L1: sDMA, then DMA; any other transfer: DMA;
    a store: CSTL; a compute op: the registry's unit, DMA too for view ops,
    then VPU (the fallback for every compute op)."""

    if isinstance(op, TransferOp):
        levels = _levels(op)
        return ("sDMA", "DMA") if "DDR" in levels and "L1" not in levels else ("DMA",)
    if isinstance(op, StoreOp):
        return ("CSTL",)
    assert isinstance(op, ComputeOp)
    units = [op.SPEC.unit]
    if op.SPEC.category == "view":
        units.append("DMA")
    units.append("VPU")
    return tuple(dict.fromkeys(units))


@dataclass(frozen=True)
class UnitBinding:
    """The unit type (and instance, when fixed) a task runs on, with how it was
    chosen: `rule` is None (usual unit), RES-03 (exact), RES-04 (same-type
    remap), RES-05 (cross-type translation, or `error` when impossible) or RES-07
    (`error`: a present unit that cannot run the task), and the `fix` of an error."""

    unit: str | None
    index: int | None
    rule: str | None
    error: str | None = None
    fix: str | None = None


def bind_unit(
    op: TaskOp, resource: tuple[str, int] | None, count: Callable[[str], int]
) -> UnitBinding:
    """The Target Resource Validity Rule: the unit `op` runs on, given its
    `@resource(U[i])` (or None) and the device's instance count per unit type
    (`count`, per engine or device-wide); `nem-verify-device`'s and the runtime's."""
    eligible = eligible_units(op)
    names, target = ", ".join(eligible), f"target a device with one of {', '.join(eligible)}"
    alt = next((u for u in eligible if count(u) > 0), None)
    if resource is not None:
        unit, i = resource
        c = count(unit)
        if c > 0 and unit not in eligible:
            return UnitBinding(
                None,
                None,
                "RES-07",
                f"{unit} cannot run this task (eligible: {names})",
                f"use @resource({eligible[0]}[0]) or drop @resource "
                "(decisions D-DEV-RES, D-SEM-UNITS)",
            )
        if c > 0:
            return UnitBinding(unit, i if i < c else i % c, "RES-03" if i < c else "RES-04")
        if alt is None:
            return UnitBinding(
                None,
                None,
                "RES-05",
                f"the device has no {unit} and no other unit "
                f"type that can run this task (eligible: {names})",
                target + ", or drop @resource and the task",
            )
        return UnitBinding(alt, None, "RES-05")
    if alt is None:
        return UnitBinding(
            None,
            None,
            "RES-05",
            f"the device has no unit that can run this task (eligible: {names})",
            target,
        )
    return UnitBinding(alt, None, None)
