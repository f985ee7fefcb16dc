"""Arrays in and out of a run's memory: the one implementation behind
`NemInterpreter.write_tensor/read_tensor`, `Session.write_tensor/read_tensor`
and `nem-run --input/--output` (decision D-RT-TENSOR-IO).

A *target* is a buffer or a region declared outside any loop, by name.
Its element type is the region's, or for a buffer the element type of the
first typed region declared over it (untyped: bytes); its shape is the
region's, or for a buffer every whole element it holds.

* `write_tensor(memory, program, name, array, offset=0, raw=False)`: the
  array must fit (offset >= 0, HAZ-04).  Unless `raw`, its dtype must be the
  target's element type, and for a region at offset 0 its shape the region's
  (strided and i4 regions are written element by element); `raw` writes the
  array's bytes in C order.
* `encode_tensor(memory, name, array)`: the bytes a typed write puts in
  buffer `name`, checked as a write is (`nem-opt --embed`).
* `read_tensor(memory, program, name, shape=None, dtype=None, offset=0)`:
  the target's values typed by default (a region's shape, a buffer's
  elements), or `dtype`/`shape` read from the bytes at `offset`; bounds
  checked the same way.
* `parse_spec("f16[64,32]")` reads the `dtype[shape]` suffix of
  `nem-run --output NAME:f16[64,32]=FILE` (`f16[]`: a 0-d array).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from nem.runtime.memory import (
    BITS,
    DTYPES,
    BufferInfo,
    Memory,
    RegionInst,
    pack_i4_into,
    unpack_i4,
)


class TensorIOError(ValueError):
    """A write or read that does not fit, or whose type does not match."""


@dataclass(frozen=True)
class Target:
    """Where an array goes: a buffer, or a region instance inside one."""

    name: str
    buffer: BufferInfo
    region: RegionInst | None
    elem: str | None

    @property
    def kind(self) -> str:
        return "region" if self.region is not None else "buffer"

    @property
    def shape(self) -> tuple[int, ...]:
        if self.region is not None and self.region.shape is not None:
            return tuple(self.region.shape)
        size = self.region.extent if self.region is not None else self.buffer.size
        return (size * 8 // BITS[self.elem],) if self.elem else (size,)

    @property
    def dtype(self) -> np.dtype:
        return DTYPES[self.elem] if self.elem else np.dtype(np.uint8)

    def describe(self) -> str:
        what = f"{self.elem}{list(self.shape)}" if self.elem else f"{self.shape[0]} bytes, untyped"
        return f"{self.kind} {self.name} ({what})"


def target(memory: Memory, program, name: str) -> Target:
    """The buffer or top-level region `name` (`program`: the compiled
    program, for regions; None: buffers only)."""
    if name in memory.buffers:
        b = memory.buffers[name]
        return Target(name, b, None, b.elem_hint)
    for tpl in getattr(program, "regions", ()) if program is not None else ():
        if tpl.name == name:
            if tpl.depth > 0:
                raise TensorIOError(f"region {name} is declared inside a loop (one instance per "
                                    "iteration); name its buffer instead")
            r = tpl.instantiate(memory, ())
            return Target(name, r.buffer, r, r.elem)
    regions = [t.name for t in getattr(program, "regions", ()) if t.depth == 0 and
               not t.name.startswith("region(")] if program is not None else []
    known = ", ".join([*memory.buffers, *regions]) or "none"
    raise TensorIOError(f"no buffer or region named '{name}' (known: {known})")


def _span(t: Target, offset: int, nbytes: int, what: str) -> tuple[int, int]:
    """Absolute [start, end) of `nbytes` at `offset` of the target, checked."""
    base = t.region.start if t.region is not None else t.buffer.offset
    size = t.region.extent if t.region is not None else t.buffer.size
    if offset < 0 or offset + nbytes > size:
        raise TensorIOError(f"{what} {nbytes} bytes at offset {offset} of {t.kind} {t.name} "
                            f"({size} bytes): out of bounds [HAZ-04]")
    return base + offset, base + offset + nbytes


def write_tensor(memory: Memory, program, name: str, array, offset: int = 0,
                 raw: bool = False) -> int:
    """Write `array` into buffer or region `name`; the number of bytes written
    (so that a caller can tell a partial fill, which is allowed, from a full one)."""
    t = target(memory, program, name)
    arr = np.asarray(array)
    level = memory.levels[t.buffer.level]
    if raw or t.elem is None:
        data = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
        lo, hi = _span(t, offset, data.size, "writing")
        level.data[lo:hi] = data
        return hi - lo
    if arr.dtype != t.dtype or (t.elem == "i4" and arr.size and
                                (arr.min() < -8 or arr.max() > 7)):
        got = "int8 values outside [-8, 7] do not fit" if arr.dtype == t.dtype else \
            f"a {arr.dtype} array does not match"
        raise TensorIOError(f"{got} {t.describe()}: write an array of "
                            f"{t.elem} ({t.dtype}), or write the bytes as they are "
                            "(raw=True, nem-run --input-raw)")
    if t.region is not None and offset == 0:
        if arr.shape != t.shape:
            raise TensorIOError(f"shape {list(arr.shape)} does not match {t.describe()}: "
                                "reshape the array, or write the bytes as they are "
                                "(raw=True, nem-run --input-raw)")
        t.region.write(arr)
        return t.region.extent
    if t.elem == "i4":
        first = offset * 2
        lo, hi = _span(t, offset, math.ceil(arr.size / 2), "writing")
        base = t.region.start if t.region is not None else t.buffer.offset
        pack_i4_into(level.data[base:hi], np.arange(first, first + arr.size), arr)
        return hi - lo
    data = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
    lo, hi = _span(t, offset, data.size, "writing")
    level.data[lo:hi] = data
    return hi - lo


def encode_tensor(memory: Memory, program, name: str, array) -> tuple[str, int, bytes]:
    """(buffer, byte offset in it, bytes): what a typed `write_tensor(name,
    array)` puts into buffer or top-level region `name`, with its checks
    (element type, a region's shape, bounds).  `nem-opt --embed NAME=FILE.npy`
    stores these as initial contents, so the file is held to the rules of
    `nem-run --input` (D-RT-TENSOR-IO).  Writes into `memory`, which should
    be a scratch one."""
    t = target(memory, program, name)
    n = write_tensor(memory, program, name, np.asarray(array))
    lo = t.region.start if t.region is not None else t.buffer.offset
    return t.buffer.name, lo - t.buffer.offset, bytes(memory.levels[t.buffer.level].data[lo:lo + n])


def read_tensor(memory: Memory, program, name: str, shape=None, dtype=None,
                offset: int = 0) -> np.ndarray:
    """A copy of the target's values (see the module docstring)."""
    t = target(memory, program, name)
    level = memory.levels[t.buffer.level]
    elem: str | None
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise TensorIOError(f"unknown element type '{dtype}' (one of {', '.join(DTYPES)})")
        elem = dtype
    elif dtype is None:
        elem = t.elem
    else:
        elem = next((k for k, v in DTYPES.items() if v == np.dtype(dtype) and k != "i4"), None)
    dt = DTYPES[elem] if elem else np.dtype(dtype if dtype is not None else np.uint8)
    if t.region is not None and offset == 0 and elem == t.elem and \
            (shape is None or tuple(shape) == t.shape):
        return np.array(t.region.read(), copy=True)
    if elem == "i4":
        count = math.prod(shape) if shape is not None else \
            (t.region.extent if t.region is not None else t.buffer.size) * 2 - offset * 2
        lo, hi = _span(t, offset, math.ceil(count / 2), "reading")
        out = unpack_i4(level.data[lo:hi], np.arange(count))
        return out.reshape(shape) if shape is not None else out
    size = t.region.extent if t.region is not None else t.buffer.size
    count = math.prod(shape) if shape is not None else (size - offset) // dt.itemsize
    lo, hi = _span(t, offset, count * dt.itemsize, "reading")
    out = level.data[lo:hi].copy().view(dt)
    return out.reshape(shape) if shape is not None else out


_SPEC = re.compile(r"^(?P<elem>[a-z0-9]+)(?:\[(?P<shape>[0-9, ]*)\])?$")


def parse_spec(text: str) -> tuple[str, tuple[int, ...] | None]:
    """`f16[64,32]` -> ("f16", (64, 32)); `f32[]` -> ("f32", ()), a 0-d
    array of one element (numpy's shape `()`, what `nem-compile -v` prints
    for a scalar output; D-RT-TENSOR-IO); `i8` -> ("i8", None)."""
    m = _SPEC.match(text.strip())
    if m is None or m["elem"] not in DTYPES:
        raise TensorIOError(f"'{text}' is not ELEM or ELEM[d0,d1,...] with ELEM one of "
                            + ", ".join(DTYPES))
    if m["shape"] is None:
        return m["elem"], None
    if not m["shape"].strip():
        return m["elem"], ()
    dims = [d.strip() for d in m["shape"].split(",")]
    if not all(d.isdigit() and int(d) > 0 for d in dims):
        raise TensorIOError(f"'{text}': the shape must be positive integers, e.g. f16[64,32] "
                            "(or none, f16[], for a 0-d array)")
    return m["elem"], tuple(int(d) for d in dims)
