"""The small sections of a `.nemb` file (ProgramInfo, Requirements,
Relocations, Data, BuildInfo), read with every string, index and size
checked (docs/bytecode.md, sections 3, 6 to 8)."""

from __future__ import annotations

import re

from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Attribute, Block, Region

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.ops import LoopOp, ProgramOp
from nem.frontends.bytecode import nem_bytecode_generated as fb
from nem.frontends.bytecode.container import (
    BytecodeError,
    CheckedTable,
    GeneratedTable,
    RawSection,
    TableT,
    checked,
)
from nem.frontends.bytecode.requirements import READ, WRITE, Requirements, Slot
from nem.frontends.bytecode.tables import TableReader

IDENT_RE = r"[A-Za-z_][A-Za-z0-9_]*\Z"
DEVICE_KINDS = {
    fb.DeviceKind.None_: None,
    fb.DeviceKind.File: "file",
    fb.DeviceKind.Name: "name",
    fb.DeviceKind.Inline: "inline",
}


def program_op(info: fb.ProgramInfo, block: Block, r: TableReader) -> ProgramOp:
    kind = info.DeviceKind()
    if kind not in DEVICE_KINDS:
        raise BytecodeError(info._tab.Pos, f"unknown device kind {kind}")
    dkind = DEVICE_KINDS[kind]
    device = _utf8(info.Device(), info._tab.Pos, "device") if info.Device() is not None else None
    if (dkind is None) != (device is None):
        raise BytecodeError(info._tab.Pos, "device kind and device text disagree")
    includes = tuple(
        _utf8(info.Includes(j), info._tab.Pos, "include") for j in range(info.IncludesLength())
    )
    name_idx = info.Name()
    name = None
    if name_idx:
        name = r.name(name_idx, info._tab.Pos, "program name")
    if dkind == "name" and not re.match(IDENT_RE, device or ""):
        raise BytecodeError(info._tab.Pos, f"device name {device!r} is not an identifier")
    if dkind is not None and not device:
        raise BytecodeError(info._tab.Pos, "empty device directive")
    if dkind == "inline" and device is not None:
        _check_inline_device(device, info._tab.Pos)
    for text in (*includes, *([device] if dkind == "file" and device is not None else [])):
        if '"' in text or "\n" in text or "\\" in text:
            raise BytecodeError(info._tab.Pos, f"path {text!r} cannot be written in .nem")
    props: dict[str, Attribute] = {}
    if name:
        props["sym_name"] = StringAttr(name)
    if dkind and device:
        props["device_kind"] = StringAttr(dkind)
        props["device"] = StringAttr(device)
    if includes:
        props["includes"] = ArrayAttr(tuple(StringAttr(i) for i in includes))
    prog = ProgramOp.create(regions=[Region(block)], properties=props)
    if r.locs:
        prog.location = r.locs[0] or prog.location
    return prog


def _utf8(raw: bytes | str, at: int, what: str) -> str:
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    except UnicodeDecodeError:
        raise BytecodeError(at, f"{what} is not valid UTF-8") from None
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise BytecodeError(at, f"{what} has control characters")
    return text


def section_size(s: RawSection) -> int:
    """Bytes of a section's vectors and strings (its payload), 0 if unknown:
    scalar vectors by their element size, vectors of strings and tables
    (the Data section's segments) by what they hold, recursively, plus an
    offset each (`nem-opt --dump-nemb`)."""
    return 0 if s.body is None else _vectors(s.body)


def _vectors(obj: object) -> int:
    total = 0
    for attr in dir(obj):
        if not attr.endswith("Length") or not callable(getattr(obj, attr)):
            continue
        base = attr[: -len("Length")]
        as_numpy = getattr(obj, base + "AsNumpy", None)
        if as_numpy is not None:  # flatc: 0 for an absent vector
            arr = as_numpy()
            total += int(getattr(arr, "nbytes", 0))
            continue
        get = getattr(obj, base)
        for k in range(getattr(obj, attr)()):
            item = get(k)
            total += 4 + (len(item) if isinstance(item, bytes | str) else _vectors(item))
    return total


def _str(raw: bytes | str | None, at: int, what: str) -> str:
    return _utf8(raw, at, what) if raw is not None else ""


def requirements(sec: fb.Requirements) -> Requirements:
    at = sec._tab.Pos
    variants: list[tuple[str, tuple[str, ...]]] = []
    for j in range(sec.VariantsLength()):
        v = checked_child(sec.Variants(j), sec)
        variants.append(
            (
                _str(v.Opcode(), at, "opcode"),
                tuple(_str(v.AnyOf(k), at, "variant") for k in range(v.AnyOfLength())),
            )
        )
    units = tuple(_str(sec.Units(j), at, "unit") for j in range(sec.UnitsLength()))
    memory: list[tuple[str, int]] = []
    for j in range(sec.MemoryLength()):
        m = checked_child(sec.Memory(j), sec)
        memory.append((_str(m.Level(), at, "level"), m.Bytes()))
    opcodes = tuple(int(x) for x in sec.OpcodesAsNumpy()) if sec.OpcodesLength() else ()
    return Requirements(tuple(variants), units, tuple(memory), sec.Engines(), opcodes)


def checked_child(obj: TableT, parent: GeneratedTable) -> TableT:
    """`obj`, read from `parent`, checked against the same payload bounds."""
    tab = parent._tab
    assert isinstance(tab, CheckedTable)  # every section is read through `checked`
    return checked(obj, tab.lo, tab.hi)


def slots(sec: fb.Relocations, r: TableReader) -> list[Slot]:
    out: list[Slot] = []
    for j in range(sec.SlotsLength()):
        s = checked_child(sec.Slots(j), sec)
        at = s._tab.Pos
        if s.Value() != j or j >= len(r.buffers):
            raise BytecodeError(
                at, f"relocation slot {j} names buffer {s.Value()} of {len(r.buffers)}"
            )
        name_idx = s.Name()
        name = (
            r.buffers[j].buffer_name.data
            if r.stripped and name_idx == 0
            else r.string(name_idx, at, "slot name")
        )
        access = s.Access()
        if access & ~(READ | WRITE):
            raise BytecodeError(at, f"slot access {access} sets unknown bits")
        out.append(
            Slot(name, _str(s.Level(), at, "slot level"), s.Size(), s.Align(), s.Copies(), access)
        )
    return out


def data(sec: fb.Data, r: TableReader) -> list[tuple[int, int, bytes]]:
    out: list[tuple[int, int, bytes]] = []
    for j in range(sec.SegmentsLength()):
        seg = checked_child(sec.Segments(j), sec)
        at = seg._tab.Pos
        slot, offset = seg.Slot(), seg.Offset()
        if slot >= len(r.buffers):
            raise BytecodeError(
                at, f"data segment {j} names buffer slot {slot} of {len(r.buffers)}"
            )
        raw = seg.BytesAsNumpy().tobytes() if seg.BytesLength() else b""
        size = r.buffer_sizes[slot]
        if size is None or offset + len(raw) > size:
            raise BytecodeError(
                at,
                f"data segment {j}: {len(raw)} bytes at offset {offset} do "
                f"not fit buffer {r.buffers[slot].buffer_name.data} ({size} bytes)",
            )
        if r.buffers[slot].parent_op() is not None and isinstance(
            r.buffers[slot].parent_op(), LoopOp
        ):
            raise BytecodeError(
                at,
                f"data segment {j}: buffer "
                f"{r.buffers[slot].buffer_name.data} is declared in a loop",
            )
        out.append((slot, offset, raw))
    return out


def build_info(sec: fb.BuildInfo) -> dict[str, str]:
    at = sec._tab.Pos
    out = {
        "producer": _str(sec.Producer(), at, "producer"),
        "producer_version": _str(sec.ProducerVersion(), at, "version"),
    }
    for j in range(sec.EntriesLength()):
        kv = checked_child(sec.Entries(j), sec)
        out[_str(kv.Key(), at, "key")] = _str(kv.Value(), at, "value")
    return out


def _check_inline_device(text: str, at: int) -> None:
    """An inline device is kept as its canonical text: it must be exactly
    one device declaration that prints back to itself."""
    from nem.frontends.nem_text.config_parser import parse_config_document
    from nem.frontends.nem_text.config_printer import print_device_decl

    try:
        doc = parse_config_document(text, "<inline device>")
    except NemDiagnosticError as e:
        raise BytecodeError(
            at, f"inline device does not parse: {e.diagnostics[0].message}"
        ) from None
    if (
        len(doc.devices) != 1
        or doc.families
        or doc.includes
        or print_device_decl(doc.devices[0]) != text
    ):
        raise BytecodeError(at, "inline device is not one device declaration in canonical form")
