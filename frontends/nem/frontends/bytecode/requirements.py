"""What a program needs of a device, and its buffers as relocation slots
(docs/bytecode.md, sections Requirements and Relocations).

Both are derived from the IR when a file is written, stored in the file so
that a loader (or `nem-opt --dump-nemb`) can check any target without the
program's source or device file, and recomputed on load to check that the
file does not lie.  The facts come from their one home: type-family
matching (`operand_binding.match_families` over the baseline catalog), the
units that can run a task and the buffer layout policy (`nem.dialect.semantics.units`,
`nem.dialect.semantics.layout`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.ir import Block, Operation

from nem.analysis.capacity import level_key, loop_copies, memory_maps
from nem.dialect.device_model import Device
from nem.dialect.diagnostics import Diagnostic, SourceLoc
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.ops import BufferOp, ComputeOp, LoopOp, ProgramOp, RegionOp, TaskOp
from nem.dialect.semantics.layout import layout
from nem.dialect.semantics.units import eligible_units

READ, WRITE = 1, 2  # Access bits (schema enum Access)


@dataclass(frozen=True)
class Requirements:
    variants: tuple[tuple[str, tuple[str, ...]], ...]  # (opcode, any of these variant refs)
    units: tuple[str, ...]  # "DMA", "CSTL|VPU": any one of them
    memory: tuple[tuple[str, int], ...]  # (level key, footprint bytes)
    engines: int
    opcodes: tuple[int, ...]


@dataclass(frozen=True)
class Slot:
    """One buffer: what the loader must place (docs/bytecode.md, "Relocations")."""

    name: str
    level: str
    size: int
    align: int
    copies: int
    access: int
    in_loop: bool = False


def _variant_need(op: Operation) -> tuple[str, tuple[str, ...]] | None:
    """(opcode, the baseline variants it matches) of a compute task governed
    by type families: what the Requirements section records of it."""
    from nem.dialect.operand_binding import match_families
    from nem.dialect.verifier import baseline_catalog

    if not isinstance(op, ComputeOp) or not op.SPEC.families:
        return None
    refs = match_families(op, baseline_catalog()).matched
    return op.opcode, tuple(sorted(str(r) for r in refs))


def _unit_need(op: Operation) -> str | None:
    """The units that can run a task, as the Requirements section joins them."""
    return "|".join(eligible_units(op)) if isinstance(op, TaskOp) else None


def _engines_need(op: Operation) -> int:
    """The engines an L1[k] buffer needs (k + 1), else 0."""
    if isinstance(op, BufferOp) and op.result.type.level.kind == "L1":
        return (op.result.type.level.engine or 0) + 1
    return 0


def requirements_of(prog: ProgramOp) -> Requirements:
    variants: set[tuple[str, tuple[str, ...]]] = set()
    units: set[str] = set()
    opcodes: set[int] = set()
    for op in prog.walk():
        if not isinstance(op, TaskOp):
            continue
        units.add(_unit_need(op) or "")
        if isinstance(op, ComputeOp):
            opcodes.add(op.SPEC.code)
        need = _variant_need(op)
        if need is not None:
            variants.add(need)
    maps = memory_maps(prog)
    memory = tuple(sorted((k, placed[-1].end) for k, placed in maps.items() if placed))
    engines = max((_engines_need(op) for op in prog.walk()), default=0)
    return Requirements(
        tuple(sorted(variants)), tuple(sorted(units)), memory, engines, tuple(sorted(opcodes))
    )


def slots_of(prog: ProgramOp) -> list[Slot]:
    """Every buffer in body order, with its access by the tasks."""
    ev = Evaluator()
    access: dict[BufferOp, int] = {}
    for op in prog.walk():
        if isinstance(op, TaskOp):
            for value, how in op.operand_regions():
                owner = value.owner
                if isinstance(owner, RegionOp) and isinstance(owner.buffer.owner, BufferOp):
                    buf = owner.buffer.owner
                    access[buf] = access.get(buf, 0) | (READ if how == "read" else WRITE)
    slots: list[Slot] = []

    def rec(block: Block, loops: tuple[LoopOp, ...]) -> None:
        for op in block.ops:
            if isinstance(op, BufferOp):
                try:
                    size = ev.static(op.size)
                except ExprError:
                    size = None
                align = op.align.value.data if op.align is not None else 1
                slots.append(
                    Slot(
                        op.buffer_name.data,
                        op.result.type.level.data,
                        max(size or 0, 0),
                        max(align, 1),
                        loop_copies(loops, ev),
                        access.get(op, 0),
                        bool(loops),
                    )
                )
            elif isinstance(op, LoopOp):
                rec(op.block, loops + (op,))

    rec(prog.block, ())
    return slots


def resolve_slots(slots: list[Slot]) -> list[tuple[str, list[int]]]:
    """(level key, base offset of each copy) per slot: the relocation, laid
    out by the one policy, `semantics.layout` (D-SEM-LAYOUT), as the runtime
    allocates and the capacity check verifies."""
    items: dict[str, list[tuple[tuple[int, int], int, int]]] = {}
    for i, s in enumerate(slots):
        if s.size > 0:
            items.setdefault(_key(s.level), []).extend(
                ((i, c), s.size, s.align) for c in range(s.copies)
            )
    offsets: dict[object, int] = {}  # by `layout` key: (slot, copy)
    for lst in items.values():
        offsets.update((sl.key, sl.offset) for sl in layout(lst))
    return [
        (_key(s.level), [offsets[(i, c)] for c in range(s.copies)] if s.size > 0 else [])
        for i, s in enumerate(slots)
    ]


def _key(level: str) -> str:
    from nem.dialect.attributes import MemLevelAttr

    return level_key(MemLevelAttr(level))


def check_requirements(
    reqs: Requirements,
    device: Device,
    where: SourceLoc | None = None,
    program: ProgramOp | None = None,
) -> list[Diagnostic]:
    """Errors for what `device` lacks: a variant (DEV-13, naming it), every
    unit that could run some kind of task (RES-05), an engine (BUF-05),
    memory (DEV-16).  The full checks on the IR follow at load; these need
    only the Requirements section.

    With `program` (the decoded IR), a missing variant, unit or engine is
    reported at the first statement that needs it when the file kept its
    Debug section (docs/bytecode.md, section 9), as the same check on the
    `.nem` text is; else, and for memory (a sum over buffers), at `where`."""
    diags = []
    effective = {str(r) for r in device.effective}
    for opcode, any_of in reqs.variants:
        if any_of and not effective & set(any_of):
            names = " or ".join(any_of)
            diags.append(
                Diagnostic(
                    "error",
                    f"the program uses {opcode} as {names}, which device '{device.name}' "
                    f"does not offer (not in its effective set)",
                    _first(program, lambda op: _variant_need(op) == (opcode, any_of)) or where,
                    "DEV-13",
                    f"target a device whose effective set lists {any_of[0]}, or recompile the "
                    "program for this device",
                )
            )
    for group in reqs.units:
        options = group.split("|")
        if not any(device.units(u) > 0 for u in options):
            diags.append(
                Diagnostic(
                    "error",
                    f"the program has tasks that run on {' or '.join(options)}, which "
                    f"device '{device.name}' lacks",
                    _first(program, lambda op: _unit_need(op) == group) or where,
                    "RES-05",
                    "target a device with those units",
                )
            )
    if reqs.engines > device.topology.num_engines:
        diags.append(
            Diagnostic(
                "error",
                f"the program uses L1[{reqs.engines - 1}] but device '{device.name}' has "
                f"{device.topology.num_engines} engine(s)",
                _first(program, lambda op: _engines_need(op) == reqs.engines) or where,
                "BUF-05",
                "target a device with more engines",
            )
        )
    for level, nbytes in reqs.memory:
        cap = (
            device.topology.l2_size_bytes
            if level == "L2"
            else device.topology.l1_size_bytes
            if level.startswith("L1")
            else None
        )
        if cap is not None and nbytes > cap:
            diags.append(
                Diagnostic(
                    "error",
                    f"the program's buffers at {level} need {nbytes} bytes but device "
                    f"'{device.name}' has {cap}",
                    where,
                    "DEV-16",
                    "target a device with more memory, or tile the program more finely",
                )
            )
    return diags


def _first(program: ProgramOp | None, pred: Callable[[Operation], bool]) -> SourceLoc | None:
    """The location of the first op of `program` satisfying `pred` (None
    without a program, without such an op, or when it has no location)."""
    if program is None:
        return None
    return next((SourceLoc.of(op) for op in program.walk() if pred(op)), None)
