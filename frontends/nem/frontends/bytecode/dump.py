"""`nem-opt prog.nemb --dump-nemb [--device NAME]`: what a `.nemb` file holds,
in the spirit of `llvm-objdump -h` / `spirv-dis`: header, sections with
their sizes, build info, required capabilities, relocation slots (placed in
the device's memory when a device is given) and data segments."""

from __future__ import annotations

from nem.dialect.device_model import Device
from nem.dialect.registry import opcode_by_code
from nem.frontends.bytecode.reader import LoadedBytecode
from nem.frontends.bytecode.requirements import (
    READ,
    WRITE,
    check_requirements,
    resolve_slots,
)


def dump(loaded: LoadedBytecode, file: str, device: Device | None = None) -> str:
    h = loaded.header
    p = loaded.program
    lines = [
        (
            f"{file}: NEM bytecode {h.major}.{h.minor}, {h.payload_size + 16} bytes, "
            f"CRC-32 {h.crc:#010x} (verified)"
        )
    ]
    b = loaded.build
    if b:
        extra = ", ".join(
            f"{k}={v}" for k, v in b.items() if k not in ("producer", "producer_version")
        )
        lines.append(
            f"build: {b.get('producer', '?')} {b.get('producer_version', '?')}"
            + (f" ({extra})" if extra else "")
        )
    dev = "device-agnostic"
    if p.device_kind is not None and p.device_kind.data == "inline":
        dev = "inline device"
    elif p.device_kind is not None and p.device is not None:  # (ProgramOp.verify_: both)
        dev = f"device {p.device_kind.data} {p.device.data!r}"
    n_ops = sum(1 for _ in p.walk()) - 1
    name = p.sym_name.data if p.sym_name is not None else "(unnamed)"
    lines.append(
        f"program: {name}, {dev}, {n_ops} instructions, names "
        f"{'stripped' if loaded.names_stripped else 'kept'}"
    )
    lines.append("sections:")
    lines.append(f"  {'section':<14}{'required':<10}{'bytes':>10}")
    for sname, required, size in loaded.section_sizes:
        lines.append(f"  {sname:<14}{'yes' if required else 'no':<10}{size:>10}")
    for kind, required in loaded.unknown_sections:
        lines.append(f"  (kind {kind} is unknown to this reader and was skipped: optional)")
    r = loaded.requirements
    if r is not None:
        lines.append("requires:")
        ops = opcode_by_code()
        lines.append(
            "  opcodes: "
            + (
                ", ".join(f"{ops[c].name} ({c})" if c in ops else str(c) for c in r.opcodes)
                or "none"
            )
        )
        for opcode, any_of in r.variants:
            lines.append(f"  variant: {opcode}: one of {', '.join(any_of) or '(none matches)'}")
        lines.append("  units: " + (", ".join(u.replace("|", " or ") for u in r.units) or "none"))
        lines.append("  memory: " + (", ".join(f"{lv} {n} bytes" for lv, n in r.memory) or "none"))
        lines.append(f"  engines: {r.engines}")
    slots = loaded.slots or []
    placed = resolve_slots(slots) if device is not None else None
    lines.append(
        f"relocations: {len(slots)} buffer slot(s)"
        + (f", placed on device '{device.name}'" if device is not None else "")
    )
    width = max([16] + [len(s.name) + 2 for s in slots])  # long names keep their column
    if slots:
        lines.append(
            f"  {'#':>3} {'name':<{width}}{'level':<8}{'size':>10}{'align':>7}{'copies':>7}"
            f"  access" + ("  base offsets" if placed else "")
        )
    for i, s in enumerate(slots):
        access = ("r" if s.access & READ else "-") + ("w" if s.access & WRITE else "-")
        at = ("  " + ", ".join(f"{placed[i][0]}+{o}" for o in placed[i][1])) if placed else ""
        lines.append(
            f"  {i:>3} {s.name:<{width}}{s.level:<8}{s.size:>10}{s.align:>7}{s.copies:>7}"
            f"  {access:<6}{at}"
        )
    lines.append(f"data: {len(loaded.data)} segment(s)")
    for slot, offset, raw in loaded.data:
        lines.append(
            f"  slot {slot} ({slots[slot].name if slot < len(slots) else '?'}) "
            f"+{offset}: {len(raw)} bytes"
        )
    if device is not None and r is not None:
        diags = check_requirements(r, device)
        lines.append(
            f"on device '{device.name}': "
            + ("loadable" if not diags else f"{len(diags)} problem(s)")
        )
        lines += ["  " + d.headline() for d in diags]
    return "\n".join(lines) + "\n"
