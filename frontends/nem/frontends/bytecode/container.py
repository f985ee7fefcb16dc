"""The `.nemb` container: header, checksum, bounds-checked FlatBuffers access,
the section directory, and the varint streams (docs/bytecode.md).

Nothing here trusts the input.  FlatBuffers' Python runtime reads wherever
an offset points; `CheckedTable` is a drop-in `flatbuffers.table.Table`
whose every read is bounds-checked, and `checked()` swaps it into any object
the generated accessors return.  Every failure is a `BytecodeError` carrying
the file offset of the bad byte.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
from flatbuffers import number_types as N
from flatbuffers.table import Table

from nem.frontends.bytecode import MAGIC
from nem.frontends.bytecode import nem_bytecode_generated as fb

FORMAT_MAJOR = 1
FORMAT_MINOR = 2
"""The newest minor version this reader knows and writers may write (1.1: operand
decorators on Transfer/Store, task-flag bit 2; 1.2: the ONNX node of each
location, `Debug.nodes`, D-BC-NODES); a writer writes the lowest one that
holds the program."""
HEADER = struct.Struct("<4sHHII")  # magic, major, minor, payload size, CRC-32 of the payload
HEADER_SIZE = HEADER.size  # 16
MAX_VARINT_BYTES = 9  # values below 2**63 (docs/bytecode.md, "Varints")

SECTION_NAMES = {
    v: k
    for k, v in vars(fb.SectionBody).items()
    if not k.startswith("_") and isinstance(v, int) and v
}
"""Section kind number -> name, from the schema's `SectionBody` union."""
SECTION_TYPES = {kind: getattr(fb, name) for kind, name in SECTION_NAMES.items()}


class BytecodeError(Exception):
    """A malformed or unsupported `.nemb` file: what is wrong, where, and how
    to fix it (None: the file is damaged, `REWRITE_FIX`)."""

    def __init__(self, offset: int, message: str, fix: str | None = None):
        self.offset = offset
        self.message = message
        self.fix = fix
        super().__init__(f"byte {offset}: {message}")


REWRITE_FIX = (
    "the file is damaged or was not written by nem-opt: write it again from its "
    "source (nem-opt PROGRAM.nem -t nemb -o FILE.nemb)"
)


def is_nemb(data: bytes) -> bool:
    """Does `data` start with the bytecode magic?"""
    return data[:4] == MAGIC


def crc32(payload: bytes | memoryview) -> int:
    return zlib.crc32(payload) & 0xFFFFFFFF


def seal(payload: bytes, major: int = FORMAT_MAJOR, minor: int = FORMAT_MINOR) -> bytes:
    """Header + payload: the bytes of a `.nemb` file."""
    return HEADER.pack(MAGIC, major, minor, len(payload), crc32(payload)) + payload


@dataclass(frozen=True)
class Header:
    major: int
    minor: int
    payload_size: int
    crc: int


def read_header(data: bytes, check_crc: bool = True) -> Header:
    """Check magic, version, size and checksum; the loader dispatches on the
    major version before reading anything else (docs/bytecode.md, "Compatibility")."""
    if len(data) < HEADER_SIZE:
        raise BytecodeError(
            len(data), f"file is {len(data)} bytes, shorter than the {HEADER_SIZE}-byte header"
        )
    magic, major, minor, size, crc = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise BytecodeError(
            0,
            f"bad magic {magic!r}: not a NEM bytecode file (expected {MAGIC!r})",
            "give a .nemb written by nem-opt -t nemb, or a .nem / MLIR text file",
        )
    if major != FORMAT_MAJOR:
        newer = "a newer" if major > FORMAT_MAJOR else "an older"
        raise BytecodeError(
            4,
            f"file format version {major}.{minor} has {newer} major version "
            f"than this reader's {FORMAT_MAJOR}.{FORMAT_MINOR}; only major "
            f"{FORMAT_MAJOR} can be read",
            "write the file again from its source with this toolchain, or read "
            "it with the toolchain version that wrote it (docs/bytecode.md, "
            "Compatibility)",
        )
    if size != len(data) - HEADER_SIZE:
        raise BytecodeError(
            8,
            f"header says the payload is {size} bytes but the file holds "
            f"{len(data) - HEADER_SIZE} (truncated or padded file)",
        )
    if check_crc:
        actual = crc32(memoryview(data)[HEADER_SIZE:])
        if actual != crc:
            raise BytecodeError(
                12,
                f"checksum mismatch: header says {crc:#010x}, payload has "
                f"{actual:#010x} (corrupted file)",
            )
    return Header(major, minor, size, crc)


# ---------------------------------------------------------------------------
# Bounds-checked FlatBuffers access
# ---------------------------------------------------------------------------


class CheckedTable(Table):  # type: ignore[misc]  # flatbuffers ships no types: Table is Any
    """A `flatbuffers.table.Table` that never reads outside `[lo, hi)`.

    The vtable is checked when the table is made; every later read (fields,
    offsets, strings, vectors) checks its own extent.  Generated accessors
    call these methods, so a generated object whose `_tab` is a
    `CheckedTable` is safe on any input."""

    __slots__ = ("hi", "lo", "vt_size")

    def __init__(self, buf: bytes | bytearray, pos: int, lo: int, hi: int):
        self.lo, self.hi = lo, hi
        self._need(pos, 4, "table")
        super().__init__(buf, pos)
        vt = pos - struct.unpack_from("<i", buf, pos)[0]
        self._need(vt, 4, f"vtable of the table at byte {pos}")
        vt_size, _ = struct.unpack_from("<HH", buf, vt)
        if vt_size < 4 or vt_size % 2:
            raise BytecodeError(vt, f"vtable size {vt_size} is invalid")
        self._need(vt, vt_size, f"vtable of the table at byte {pos}")
        self.vt_size = vt_size

    def _need(self, pos: int, size: int, what: str) -> None:
        if pos < self.lo or size < 0 or pos + size > self.hi:
            raise BytecodeError(
                max(pos, 0),
                f"{what} ({size} bytes at byte {pos}) lies outside "
                f"the payload [{self.lo}, {self.hi})",
            )

    def Offset(self, vtableOffset: int) -> int:
        vt = self.Pos - struct.unpack_from("<i", self.Bytes, self.Pos)[0]
        if vtableOffset + 2 > self.vt_size:
            return 0
        field_offset: int = struct.unpack_from("<H", self.Bytes, vt + vtableOffset)[0]
        return field_offset

    def Get(self, flags: N.NumberTypeFlags, off: int) -> bool | int | float:
        self._need(off, flags.bytewidth, "field")
        value: bool | int | float = flags.py_type(flags.packer_type.unpack_from(self.Bytes, off)[0])
        return value

    def Indirect(self, off: int) -> int:
        self._need(off, 4, "offset")
        target: int = off + struct.unpack_from("<I", self.Bytes, off)[0]
        self._need(target, 4, f"object referenced from byte {off}")
        return target

    def String(self, off: int) -> bytes:
        start = self.Indirect(off)
        self._need(start, 4, "string length")
        length = struct.unpack_from("<I", self.Bytes, start)[0]
        self._need(start + 4, length, "string")
        return bytes(self.Bytes[start + 4 : start + 4 + length])

    def _vector_start(self, off: int) -> tuple[int, int]:
        start = self.Indirect(off + self.Pos)
        self._need(start, 4, "vector length")
        length = struct.unpack_from("<I", self.Bytes, start)[0]
        self._need(start + 4, length, "vector")  # at least one byte per element
        return start + 4, length

    def VectorLen(self, off: int) -> int:
        return self._vector_start(off)[1]

    def Vector(self, off: int) -> int:
        return self._vector_start(off)[0]

    def Union(self, t2: Table, off: int) -> None:
        t2.Bytes = self.Bytes
        t2.Pos = self.Indirect(off + self.Pos)

    def GetVectorAsNumpy(self, flags: N.NumberTypeFlags, off: int) -> np.ndarray:
        start, length = self._vector_start(off)
        dtype = np.dtype(N.to_numpy_type(flags)).newbyteorder("<")
        self._need(start, length * dtype.itemsize, "vector")
        return np.frombuffer(self.Bytes, dtype, length, start)


class GeneratedTable(Protocol):
    """What flatc generates for a table: an object reading through `_tab`."""

    _tab: Table


TableT = TypeVar("TableT", bound=GeneratedTable)


def checked(obj: TableT, lo: int, hi: int) -> TableT:
    """`obj` (a generated table object) with a `CheckedTable` in place of its table."""
    obj._tab = checked_table(obj._tab, lo, hi)
    return obj


def checked_table(tab: Table, lo: int, hi: int) -> CheckedTable:
    """A bare `Table` (a union's value) as a `CheckedTable`."""
    return CheckedTable(tab.Bytes, tab.Pos, lo, hi)


@dataclass
class RawSection:
    kind: int
    required: bool
    body: object  # the generated table object (checked), or None for unknown kinds
    pos: int


def sections(data: bytes) -> list[RawSection]:
    """The section directory of a file whose header has been read."""
    lo, hi = HEADER_SIZE, len(data)
    if hi - lo < 8:
        raise BytecodeError(lo, "payload too short for a FlatBuffer")
    if data[lo + 4 : lo + 8] != MAGIC:
        raise BytecodeError(lo + 4, "payload lacks the FlatBuffers file identifier 'NEMB'")
    root = lo + struct.unpack_from("<I", data, lo)[0]
    if not lo + 8 <= root < hi:
        raise BytecodeError(lo, f"root table offset points to byte {root}, outside the payload")
    module = fb.Module()
    module._tab = CheckedTable(data, root, lo, hi)
    out = []
    seen: set[int] = set()
    for j in range(module.SectionsLength()):
        sec = checked(module.Sections(j), lo, hi)
        kind = sec.BodyType()
        required = sec.Required()
        body_tab = sec.Body()
        if body_tab is None:
            raise BytecodeError(sec._tab.Pos, f"section {j} has no body")
        tab = checked_table(body_tab, lo, hi)
        cls = SECTION_TYPES.get(kind)
        if cls is None:
            out.append(RawSection(kind, required, None, tab.Pos))
            continue
        if kind in seen:
            raise BytecodeError(tab.Pos, f"section {SECTION_NAMES[kind]} appears twice")
        seen.add(kind)
        body = cls()
        body.Init(data, tab.Pos)
        out.append(RawSection(kind, required, checked(body, lo, hi), tab.Pos))
    return out


# ---------------------------------------------------------------------------
# Varints (unsigned LEB128, at most MAX_VARINT_BYTES bytes) and zigzag
# ---------------------------------------------------------------------------


def zigzag(v: int) -> int:
    return (v << 1) if v >= 0 else ((-v) << 1) - 1


def unzigzag(u: int) -> int:
    return (u >> 1) if not u & 1 else -((u + 1) >> 1)


class VarintWriter:
    """Appends unsigned varints to a bytearray."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def u(self, v: int) -> None:
        if v < 0x80:
            self.out.append(v)
            return
        if v >= 1 << (7 * MAX_VARINT_BYTES):
            raise ValueError(f"not supported: integer {v} needs more than 63 bits")
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def s(self, v: int) -> None:
        self.u(zigzag(v))


def decode_varints(stream: np.ndarray, base: int) -> tuple[list[int], list[int]]:
    """All varints of a byte stream at once (numpy), with each one's file
    offset (`base` = offset of the stream's first byte) for diagnostics."""
    b = np.asarray(stream, dtype=np.uint8)
    if b.size == 0:
        return [], []
    ends = np.flatnonzero(b < 0x80)
    if ends.size == 0 or ends[-1] != b.size - 1:
        raise BytecodeError(base + b.size - 1, "the stream ends inside a varint")
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if lengths.max() > MAX_VARINT_BYTES:
        k = int(np.argmax(lengths > MAX_VARINT_BYTES))
        raise BytecodeError(base + int(starts[k]), f"varint longer than {MAX_VARINT_BYTES} bytes")
    values = (b[starts] & 0x7F).astype(np.int64)
    for k in range(1, int(lengths.max())):
        more = lengths > k
        values[more] |= (b[starts[more] + k] & 0x7F).astype(np.int64) << (7 * k)
    return values.tolist(), (starts + base).tolist()
