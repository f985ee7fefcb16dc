"""The runtime memory model: DDR, L2 and one L1[k] per engine as byte arrays.

Buffers are placed by `nem.dialect.semantics.layout.layout` (decreasing align,
declaration order among equals; BUF-07: results must not depend on
placement), the layout the capacity check (DEV-16) verifies, so the checker
and the runtime agree on what fits (D-SEM-LAYOUT).  A buffer declared in a
loop body has one instance per concurrently active iteration
(D-SEM-INSTANCES).  DDR is as large as the program's DDR buffers need, backed
by lazily committed zero pages, unless a capacity is imposed (`ddr_size`,
D-SEM-DDR).  A region instance is a byte range of one level plus an optional
element type; `view()` gives a typed numpy view whose strides come from the
region's layout (dense, row-major) or its explicit strides (in elements,
TYPE-04).  `bf16` uses `ml_dtypes.bfloat16`.  `i4` is packed two elements
per byte (decision D-RT-I4: element k of the region's linear element space
sits in byte k // 2, low nibble for even k, high nibble for odd k); `read()`
unpacks it to int8 in [-8, 7] and `write()` packs it back.  Every access is
bounds-checked against its buffer (HAZ-04) and its region extent (EXT-02).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import mmap
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nem.dialect.elements import ELEM_BITS as BITS
from nem.dialect.elements import ELEM_DTYPES as DTYPES
from nem.dialect.semantics.layout import footprint, layout

if TYPE_CHECKING:
    from nem.runtime.quant import Quant

DEFAULT_DDR_SIZE: int | None = None
"""No DDR capacity unless one is imposed: DDR holds what the program declares (D-SEM-DDR)."""
DEFAULT_L2_SIZE = 4 * 1024 * 1024
DEFAULT_L1_SIZE = 1024 * 1024
_LAZY_BYTES = 1 << 24
"""Levels larger than this are anonymous mappings whose pages are committed on first touch."""


class MemoryError_(Exception):
    """An out-of-bounds or allocation failure; the engine attaches the location."""

    def __init__(self, message: str, rule: str, fix: str | None = None):
        super().__init__(message)
        self.rule = rule
        self.fix = fix
        self.buffer: str | None = None


@dataclass
class BufferInfo:
    name: str
    level: str  # "DDR", "L2", "L1[k]"
    offset: int  # byte offset inside the level
    size: int
    align: int
    index: int  # declaration order
    elem_hint: str | None = None  # element type of the first typed region over it
    instance: int = 0  # which instance of a loop-body buffer (D-SEM-INSTANCES)
    instances: int = 1

    @property
    def label(self) -> str:
        return (
            self.name
            if self.instances == 1
            else f"{self.name} (instance {self.instance + 1} of {self.instances})"
        )


def _zeros(size: int) -> np.ndarray:
    """A zeroed byte array; large ones are mapped without reserving memory, so a
    level costs only the pages a run touches."""
    if size <= _LAZY_BYTES:
        return np.zeros(size, dtype=np.uint8)
    noreserve = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)
    flags = mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20) | noreserve
    return np.frombuffer(mmap.mmap(-1, size, flags=flags), dtype=np.uint8)


_MADV_POPULATE_WRITE = 23  # Linux 5.14 and later
COMMIT_LIMIT = 256 << 20
"""The most bytes `Memory.commit` commits ahead of a run (D-RT-PREPARE)."""


@functools.cache
def _madvise() -> Callable[[int, int, int], int] | None:
    """libc's madvise, or None off Linux or where it cannot be loaded."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    fn.restype = ctypes.c_int
    return fn


def _commit(data: np.ndarray, nbytes: int) -> None:
    """Commit the whole pages of data[:nbytes] without changing a byte
    (MADV_POPULATE_WRITE), so that the page faults of their first touches are
    paid here, by `NemInterpreter.prepare`, not by the first run
    (D-RT-PREPARE).  Where the call is missing or fails (an older kernel), the
    pages are committed on first touch, as without it."""
    fn = _madvise()
    if fn is None or nbytes <= 0:
        return
    addr = data.ctypes.data
    start = -(-addr // mmap.PAGESIZE) * mmap.PAGESIZE
    end = (addr + nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
    if end > start:
        fn(start, end - start, _MADV_POPULATE_WRITE)


class MemoryLevel:
    """One memory instance: a zero-initialized byte array of `size` bytes
    (its capacity, or for DDR without one, the program's footprint)."""

    __slots__ = ("name", "size", "data", "top", "ident", "capacity")

    def __init__(
        self,
        name: str,
        size: int,
        ident: int,
        data: np.ndarray | None = None,
        capacity: int | None = None,
    ):
        self.name = name
        self.size = size
        self.ident = ident
        self.capacity = capacity
        self.data = _zeros(size) if data is None else data
        self.top = 0

    def check(self, offset: int, size: int) -> None:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise MemoryError_(
                f"access [{offset}, {offset + size}) is outside {self.name} ({self.size} bytes)",
                "HAZ-04",
            )

    def read(self, offset: int, size: int) -> bytes:
        self.check(offset, size)
        return self.data[offset : offset + size].tobytes()

    def write(self, offset: int, data: bytes | np.ndarray) -> None:
        raw = (
            np.frombuffer(bytes(data), dtype=np.uint8)
            if not isinstance(data, np.ndarray)
            else np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        )
        self.check(offset, raw.size)
        self.data[offset : offset + raw.size] = raw

    def __repr__(self) -> str:
        return f"<MemoryLevel {self.name}: {self.size} bytes, {self.top} allocated>"


@dataclass(frozen=True)
class BufferSpec:
    """A buffer to place: name, level, size, align (None: 1) and instance count."""

    name: str
    level: str
    size: int
    align: int | None = None
    instances: int = 1


class Memory:
    """All memory levels of a run: DDR, L2, L1[0..E-1]."""

    def __init__(
        self,
        num_engines: int = 1,
        l2_size: int = DEFAULT_L2_SIZE,
        l1_size: int = DEFAULT_L1_SIZE,
        ddr_size: int | None = DEFAULT_DDR_SIZE,
        device: str | None = None,
    ):
        self.num_engines = num_engines
        self.device = device  # named in errors; None: the default topology
        self.capacities: dict[str, int | None] = {"DDR": ddr_size, "L2": l2_size}
        self.capacities.update({f"L1[{k}]": l1_size for k in range(num_engines)})
        self.levels: dict[str, MemoryLevel] = {}
        self.by_id: list[MemoryLevel] = []
        self.buffers: dict[str, BufferInfo] = {}
        self.instances: dict[str, list[BufferInfo]] = {}
        self._specs: list[BufferSpec] = []
        self._place()

    def level_name(self, name: str) -> str:
        if name == "L1":
            name = "L1[0]"  # decision D-RT-L1
        if name not in self.capacities:
            where = f"device {self.device}" if self.device else "the default topology"
            raise MemoryError_(
                f"memory level {name} does not exist on {where} ({self.num_engines} engine(s))",
                "BUF-05",
                f"use one of {', '.join(self.capacities)}",
            )
        return name

    def level(self, name: str) -> MemoryLevel:
        return self.levels[self.level_name(name)]

    def allocate_all(self, specs: list[BufferSpec]) -> list[list[BufferInfo]]:
        """Place every buffer of a program (each level by `semantics.layout`) and
        create the levels; returns the instances of each spec.  A level whose
        layout exceeds its capacity is a DEV-16 error."""
        self._specs = list(specs)
        self._place()
        return [self.instances[s.name] for s in specs]

    def allocate(self, name: str, level: str, size: int, align: int | None) -> BufferInfo:
        """Add one buffer (and re-place the level); for tests and tools."""
        return self.allocate_all([*self._specs, BufferSpec(name, level, size, align)])[-1][0]

    def _place(self) -> None:
        per_level: dict[str, list[tuple[tuple[int, int], int, int]]] = {}
        names = {}
        for k, spec in enumerate(self._specs):
            try:
                lv = self.level_name(spec.level)
            except MemoryError_ as e:
                e.buffer = spec.name  # located at this buffer, not the last one
                raise
            names[k] = lv
            for c in range(spec.instances):
                per_level.setdefault(lv, []).append(((k, c), spec.size, spec.align or 1))
        infos: dict[tuple[int, int], BufferInfo] = {}
        tops: dict[str, int] = {}
        for lv, items in per_level.items():
            slots = layout(items)
            top = footprint(slots)
            cap = self.capacities[lv]
            if cap is not None and top > cap:
                sizes = sum(s.size for s in slots)
                why = (
                    ""
                    if sizes > cap
                    else f" (the sizes fit; {top - sizes} bytes of alignment padding do not)"
                )
                first = min((s for s in slots if s.end > cap), key=lambda s: s.offset)
                err = MemoryError_(
                    f"{lv} is full: its buffers need {top} bytes but it has {cap}{why}",
                    "DEV-16",
                    "make the buffers of this level smaller (smaller "
                    "tiles), move some to another level, or target a device "
                    "with more memory",
                )
                err.buffer = self._specs[first.key[0]].name
                raise err
            tops[lv] = top
            for sl in slots:
                k, c = sl.key
                spec = self._specs[k]
                infos[sl.key] = BufferInfo(
                    spec.name,
                    lv,
                    sl.offset,
                    spec.size,
                    sl.align,
                    k,
                    instance=c,
                    instances=spec.instances,
                )
        old = self.levels
        self.levels = {}
        for i, lv in enumerate(self.capacities):
            cap = self.capacities[lv]
            # DDR holds exactly the program's buffers; on-chip levels their capacity
            size = cap if cap is not None and lv != "DDR" else tops.get(lv, 0)
            prev = old.get(lv)
            try:
                level = (
                    prev
                    if prev is not None and prev.size == size
                    else MemoryLevel(lv, size, i, capacity=cap)
                )
            except (OverflowError, OSError, ValueError) as e:  # mmap refused the size
                err = MemoryError_(
                    f"not supported: {lv} needs {size} bytes for its buffers, more "
                    f"than this machine can map ({e}); the runtime holds each "
                    "memory level as one byte array",
                    "EXEC-03",
                )
                err.buffer = max(
                    (sp for k, sp in enumerate(self._specs) if names[k] == lv),
                    key=lambda sp: sp.size,
                ).name
                raise err from None
            level.top = tops.get(lv, 0)
            self.levels[lv] = level
        self.by_id = list(self.levels.values())
        self.instances = {}
        for k, spec in enumerate(self._specs):
            self.instances[spec.name] = [infos[(k, c)] for c in range(spec.instances)]
        self.buffers = {n: v[0] for n, v in self.instances.items()}

    def all_buffers(self) -> list[BufferInfo]:
        """Every buffer instance, in declaration order."""
        return [b for v in self.instances.values() for b in v]

    def buffer(self, name: str) -> BufferInfo:
        info = self.buffers.get(name)
        if info is None:
            known = ", ".join(self.buffers) or "none"
            raise KeyError(f"no buffer named '{name}' (buffers: {known})")
        return info

    def buffer_bytes(self, name: str) -> np.ndarray:
        b = self.buffer(name)
        return self.levels[b.level].data[b.offset : b.offset + b.size]

    def instance_bytes(self, b: BufferInfo) -> np.ndarray:
        return self.levels[b.level].data[b.offset : b.offset + b.size]

    def clone(self) -> Memory:
        """A copy of the allocated part of every level (fresh state for another schedule)."""
        new = Memory.__new__(Memory)
        new.levels = {}
        for n, lv in self.levels.items():
            data = _zeros(lv.size)
            data[: lv.top] = lv.data[: lv.top]
            c = MemoryLevel(n, lv.size, lv.ident, data, lv.capacity)
            c.top = lv.top
            new.levels[n] = c
        new.by_id = list(new.levels.values())
        new.buffers = dict(self.buffers)
        new.instances = dict(self.instances)
        new.capacities = dict(self.capacities)
        new._specs = list(self._specs)
        new.num_engines = self.num_engines
        new.device = self.device
        return new

    def commit(self, limit: int = COMMIT_LIMIT) -> None:
        """Commit the pages of the levels' allocated parts (`_commit`), in level
        order, up to `limit` bytes in all: a program that declares more still
        costs only the pages its runs touch."""
        for lv in self.by_id:
            n = min(lv.top, limit)
            _commit(lv.data, n)
            limit -= n

    def digests(self) -> list[bytes]:
        """A digest of every buffer instance's bytes (declaration order): what a
        schedule comparison keeps instead of a copy of memory."""
        return [
            hashlib.blake2b(self.instance_bytes(b).tobytes(), digest_size=16).digest()
            for b in self.all_buffers()
        ]

    def first_difference(self, other: Memory) -> tuple[str, int] | None:
        """(buffer, byte offset) of the first differing byte in declaration order."""
        for b, o in zip(self.all_buffers(), other.all_buffers()):
            x, y = self.instance_bytes(b), other.instance_bytes(o)
            if not np.array_equal(x, y):
                return b.label, int(np.flatnonzero(x != y)[0])
        return None


# ---------------------------------------------------------------------------
# i4 packing (decision D-RT-I4)
# ---------------------------------------------------------------------------


def unpack_i4(raw: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Elements at linear element indices `idx` of packed bytes `raw` -> int8 in [-8, 7]."""
    b = raw[idx >> 1]
    nib = (b >> ((idx & 1) << 2).astype(np.uint8)) & 0xF
    out: np.ndarray = ((nib.astype(np.int8) ^ 8) - 8).astype(np.int8)
    return out


def pack_i4_into(raw: np.ndarray, idx: np.ndarray, values: np.ndarray) -> None:
    """Store int values (low 4 bits, two's complement) at element indices `idx`."""
    v = (np.asarray(values).astype(np.int64) & 0xF).astype(np.uint8).reshape(-1)
    idx = idx.reshape(-1)
    byte = idx >> 1
    hi = (idx & 1).astype(bool)
    lo = ~hi
    # two passes: the two nibbles of one byte must not overwrite each other
    raw[byte[lo]] = (raw[byte[lo]] & 0xF0) | v[lo]
    raw[byte[hi]] = (raw[byte[hi]] & 0x0F) | (v[hi] << 4).astype(np.uint8)


# ---------------------------------------------------------------------------
# Region instances
# ---------------------------------------------------------------------------


class RegionInst:
    """One evaluated region: level, absolute byte range, element type, geometry."""

    __slots__ = (
        "name",
        "level",
        "buffer",
        "start",
        "extent",
        "elem",
        "shape",
        "strides",
        "quant",
        "dense",
        "exact",
        "_view",
        "_view_of",
    )

    def __init__(
        self,
        name: str,
        level: MemoryLevel,
        buffer: BufferInfo,
        start: int,
        extent: int,
        elem: str | None = None,
        shape: tuple[int, ...] | None = None,
        strides: tuple[int, ...] | None = None,
        quant: Quant | None = None,
        dense: bool = True,
    ) -> None:
        self.name = name
        self.level = level
        self.buffer = buffer
        self.start = start  # absolute byte offset in the level
        self.extent = extent
        self.elem = elem
        self.shape = shape
        self.strides = strides  # in elements; None = dense row-major
        self.quant = quant
        self.dense = dense
        self.exact = False
        """Accesses touch its elements' bytes, not its span (D-HAZ-ELEMENTS):
        typed, with a shape and strides that are constants in the program."""
        self._view: np.ndarray | None = None  # view() of the level bytes in `_view_of`
        self._view_of: np.ndarray | None = None

    @property
    def offset(self) -> int:
        """Byte offset inside its buffer."""
        return self.start - self.buffer.offset

    def elem_strides(self) -> tuple[int, ...]:
        if self.strides is not None:
            return self.strides
        out, acc = [], 1
        for d in reversed(self.shape or ()):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))

    def check(self) -> None:
        """Bounds of the region in its buffer (HAZ-04) and of its elements (EXT-02)."""
        b = self.buffer
        if self.offset < 0 or self.extent < 0 or self.offset + self.extent > b.size:
            raise MemoryError_(
                f"region {self.name} [{self.offset}, {self.offset + self.extent}) is outside "
                f"buffer {b.name} ({b.size} bytes)",
                "HAZ-04",
                "keep the region inside its buffer for every loop iteration: shrink the region "
                "or enlarge the buffer",
            )
        if self.elem is None or not self.shape:
            return
        if min(self.shape) <= 0:
            raise MemoryError_(
                f"region {self.name} has shape {list(self.shape)}",
                "REG-06",
                "give every dimension a size of at least 1",
            )
        span = (
            math.prod(self.shape)
            if self.strides is None
            else sum((d - 1) * s for d, s in zip(self.shape, self.strides)) + 1
        )
        need = math.ceil(span * BITS[self.elem] / 8)
        if need > self.extent:
            raise MemoryError_(
                f"region {self.name}: its elements span {need} bytes but its extent is "
                f"{self.extent}",
                "EXT-02",
                "enlarge the extent, or make the shape or strides smaller",
            )

    def raw(self) -> np.ndarray:
        return self.level.data[self.start : self.start + self.extent]

    def view(self) -> np.ndarray:
        """A writable typed view (not for i4; use read/write); built once per
        instance (a replayed run reads the same instances again, D-RT-REPLAY)."""
        data = self.level.data
        view = self._view
        if view is not None and self._view_of is data:
            return view
        if self.elem is None:
            v = data[self.start : self.start + self.extent]
        else:
            dt = DTYPES[self.elem]
            shape = self.shape or (self.extent // dt.itemsize,)
            strides = (
                tuple(s * dt.itemsize for s in self.strides)
                if self.shape and self.strides is not None
                else None
            )  # None: row-major
            v = np.ndarray(shape, dtype=dt, buffer=data, offset=self.start, strides=strides)
        self._view, self._view_of = v, data
        return v

    def _i4_index(self) -> np.ndarray:
        shape = self.shape or (self.extent * 2,)
        idx = np.zeros(shape, dtype=np.int64)
        for ax, (d, s) in enumerate(zip(shape, self.elem_strides() if self.shape else (1,))):
            sh = [1] * len(shape)
            sh[ax] = d
            idx = idx + (np.arange(d, dtype=np.int64) * s).reshape(sh)
        return idx

    def read(self) -> np.ndarray:
        """The region's values (a view, or an unpacked copy for i4)."""
        if self.elem == "i4":
            return unpack_i4(self.raw(), self._i4_index())
        return self.view()

    def write(self, values: np.ndarray) -> None:
        if self.elem == "i4":
            pack_i4_into(self.raw(), self._i4_index(), values)
            return
        v = self.view()
        values = np.asarray(values)
        if values.shape != v.shape:
            values = values.reshape(v.shape)
        v[...] = values

    def describe(self) -> str:
        t = f" {self.elem}{list(self.shape) if self.shape else ''}" if self.elem else " untyped"
        return (
            f"{self.name} = {self.buffer.name}[{self.offset}:{self.offset + self.extent}] "
            f"({self.level.name} bytes [{self.start}, {self.start + self.extent})){t}"
        )

    def __repr__(self) -> str:
        return f"<Region {self.describe()}>"
