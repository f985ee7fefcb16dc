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
* `check_write(memory, program, name, shape, dtype, ...)`: those checks
  on a shape and dtype alone, before any array is read (a `.npy` header).
* `encode_tensor(memory, name, array)`: the bytes a typed write puts in
  buffer `name`, checked as a write is (`nem-opt --embed`).
* `read_tensor(memory, program, name, shape=None, dtype=None, offset=0)`:
  the target's values typed by default (a region's shape, a buffer's
  elements), or `dtype`/`shape` read from the bytes at `offset`; bounds
  checked the same way, and a read of the rest of the target from an offset
  at or past its end is an overrun (not an empty array).
* Arguments are checked here, once for every caller (outsider28_rt): `name`
  a str, or None for DDR by byte offset; `offset` an int; `shape` positive
  ints (`check_shape`, nem-run's rule for `--output X:T[SHAPE]`: a negative
  dimension made a negative byte count that passed the bounds check and read
  other buffers); `dtype` an element type or a numeric numpy dtype
  (`read_type`).  A wrong type is a TypeError, a wrong value a
  TensorIOError, each one line naming the parameter.
* `parse_spec("f16[64,32]")` reads the `dtype[shape]` suffix of
  `nem-run --output NAME:f16[64,32]=FILE` (`f16[]`: a 0-d array).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np
import numpy.typing as npt

from nem.dialect.elements import ELEM_BITS as BITS
from nem.dialect.elements import ELEM_DTYPES as DTYPES
from nem.dialect.elements import dtype_mismatch
from nem.runtime.memory import (
    BufferInfo,
    Memory,
    RegionInst,
    pack_i4_into,
    unpack_i4,
)

if TYPE_CHECKING:
    from nem.runtime.engine import CompiledProgram


class TensorIOError(ValueError):
    """A write or read that does not fit, or whose type does not match."""


@dataclass(frozen=True)
class Target:
    """Where an array goes: a buffer, or a region instance inside one (or, for
    name None, the whole DDR level as one untyped buffer)."""

    name: str
    buffer: BufferInfo
    region: RegionInst | None
    elem: str | None
    ddr: bool = False

    @property
    def kind(self) -> str:
        return "region" if self.region is not None else "buffer"

    @property
    def size(self) -> int:
        """Its size in bytes."""
        return self.region.extent if self.region is not None else self.buffer.size

    @property
    def where(self) -> str:
        """`buffer X (1024 bytes)`, as errors name it."""
        if self.ddr:
            return f"DDR ({self.size} bytes; buffer=None reads and writes DDR by byte offset)"
        return f"{self.kind} {self.name} ({self.size} bytes)"

    @property
    def shape(self) -> tuple[int, ...]:
        if self.region is not None and self.region.shape is not None:
            return tuple(self.region.shape)
        return (self.size * 8 // BITS[self.elem],) if self.elem else (self.size,)

    @property
    def dtype(self) -> np.dtype:
        return DTYPES[self.elem] if self.elem else np.dtype(np.uint8)

    def describe(self) -> str:
        what = f"{self.elem}{list(self.shape)}" if self.elem else f"{self.shape[0]} bytes, untyped"
        return f"{self.kind} {self.name} ({what})"


def target(memory: Memory, program: CompiledProgram | None, name: str | None) -> Target:
    """The buffer or top-level region `name` (`program`: the compiled
    program, for regions; None: buffers only); name None: DDR by byte offset."""
    if name is None:
        ddr = memory.levels["DDR"]
        return Target("DDR", BufferInfo("DDR", "DDR", 0, ddr.size, 1, -1), None, None, True)
    if not isinstance(name, str):
        raise TypeError(
            "buffer must be the name of a buffer or region (a str) or None (DDR by "
            f"byte offset), not {name!r} ({type(name).__name__})"
        )
    if name in memory.buffers:
        b = memory.buffers[name]
        return Target(name, b, None, b.elem_hint)
    for tpl in getattr(program, "regions", ()) if program is not None else ():
        if tpl.name == name:
            if tpl.depth > 0:
                raise TensorIOError(
                    f"region {name} is declared inside a loop (one instance per "
                    "iteration); name its buffer instead"
                )
            r = tpl.instantiate(memory, ())
            return Target(name, r.buffer, r, r.elem)
    regions = (
        [
            t.name
            for t in getattr(program, "regions", ())
            if t.depth == 0 and not t.name.startswith("region(")
        ]
        if program is not None
        else []
    )
    raise TensorIOError(f"no buffer or region named '{name}'{_known(memory, regions, name)}")


_KNOWN_LISTED = 12
"""At most this many names in the list of known ones: a compiled model has hundreds of
buffers, the ones a user names are its DDR tensors."""


def _known(memory: Memory, regions: list[str], name: str) -> str:
    """The close matches (difflib) and the known names, DDR buffers (a compiled model's
    inputs, outputs and weights) first, at most `_KNOWN_LISTED` of them."""
    import difflib

    ddr = [b for b, info in memory.buffers.items() if info.level == "DDR"]
    names = [*ddr, *regions, *(b for b in memory.buffers if b not in set(ddr))]
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    shown = ", ".join(names[:_KNOWN_LISTED]) or "none"
    more = f", and {len(names) - _KNOWN_LISTED} more" if len(names) > _KNOWN_LISTED else ""
    return f"{hint} (known: {shown}{more})"


def _span(t: Target, offset: int, nbytes: int, what: str) -> tuple[int, int]:
    """Absolute [start, end) of `nbytes` at `offset` of the target, checked."""
    base = t.region.start if t.region is not None else t.buffer.offset
    if offset < 0 or offset + nbytes > t.size:
        raise TensorIOError(
            f"{what} {nbytes} bytes at offset {offset} of {t.where}: out of bounds [HAZ-04]"
        )
    return base + offset, base + offset + nbytes


def int_like(x: object) -> TypeGuard[int | np.integer[Any]]:
    """An int or a numpy integer, not a bool: what offsets, dimensions,
    seeds and counts of the runtime API take."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def check_offset(offset: object) -> int:
    """`offset` as an int (a float or a str failed deep inside numpy's
    slicing); its bounds are `_span`'s."""
    if not int_like(offset):
        raise TypeError(
            "offset must be an int (bytes from the start of the buffer or region), "
            f"not {offset!r} ({type(offset).__name__})"
        )
    return int(offset)


def _not_positive(what: str, example: str, zero_d: str) -> TensorIOError:
    """The one wording of the shape rule, for the API and nem-run --output."""
    return TensorIOError(
        f"{what}: the shape must be positive integers, e.g. {example} "
        f"(or {zero_d}, for a 0-d array)"
    )


def check_shape(shape: Sequence[int] | None) -> tuple[int, ...] | None:
    """`shape` as a tuple of positive ints (None: the target's own).  A
    negative dimension made a negative byte count that passed the bounds
    check and read the rest of the memory level; a zero one reads nothing."""
    if shape is None:
        return None
    try:
        given = None if isinstance(shape, str | bytes) else tuple(shape)
    except TypeError:  # not iterable (an int, a 0-d array)
        given = None
    if given is None or not all(int_like(d) for d in given):
        raise TypeError(
            "shape must be a sequence of ints such as (64, 32) or (16,), not "
            f"{shape!r} ({type(shape).__name__})"
        )
    dims = tuple(int(d) for d in given)
    if any(d <= 0 for d in dims):
        raise _not_positive(f"shape={dims}", "(64, 32)", "()")
    return dims


def read_type(dtype: npt.DTypeLike | None, default: str | None) -> tuple[str | None, np.dtype]:
    """(element type or None, numpy dtype) that `dtype` reads: an element-type
    name (`f16`, `i4`), or a numpy dtype, as an object (`np.float16`,
    `np.dtype(...)`) or by numpy's name (`'float16'`); one of an element type
    reads as that type, another numeric one (float64, int64) reinterprets the
    bytes; None: `default`, else bytes.  numpy's short codes are not taken,
    since NEM's names differ (`'i8'` is NEM's 8-bit integer, numpy's 64-bit
    one), nor dtypes of no numbers (object: numpy failed deep inside)."""
    if dtype is None:
        return default, DTYPES[default] if default else np.dtype(np.uint8)
    dt: np.dtype | None = None
    if isinstance(dtype, str):
        if dtype in DTYPES:
            return dtype, DTYPES[dtype]
        try:
            dt = np.dtype(dtype)
        except (TypeError, ValueError):
            pass
        if dt is not None and dt.name != dtype:  # a short code, 'f8', '<f4'
            dt = None
    else:
        try:
            dt = np.dtype(dtype)
        except (TypeError, ValueError):
            pass
    if dt is None or dt.kind not in "biufc" and dt.name != "bfloat16":
        raise TensorIOError(
            f"dtype must be an element type ({', '.join(DTYPES)}) or a numeric "
            "numpy dtype, as an object or by numpy's name (np.float16 or "
            f"'float16' for f16), not {dtype!r}"
        )
    elem = next((k for k, v in DTYPES.items() if k != "i4" and v == dt), None)
    return elem, dt


def check_write(
    memory: Memory,
    program: CompiledProgram | None,
    name: str | None,
    shape: tuple[int, ...],
    dtype: np.dtype,
    offset: int = 0,
    raw: bool = False,
) -> Target:
    """The target of a write of an array of `shape` and `dtype`, checked as
    `write_tensor` checks it (element type, a region's shape, bounds) before
    any array exists: `nem-run --input` and `nem-opt --embed` check a `.npy`
    header with it before the data is read (D-LIMITS)."""
    t = target(memory, program, name)
    offset = check_offset(offset)
    if not isinstance(raw, (bool, np.bool_)):  # raw="no" is truthy: bytes written untyped
        raise TypeError(f"raw must be a bool, not {raw!r} ({type(raw).__name__})")
    count = math.prod(shape)
    if raw or t.elem is None:
        _span(t, offset, count * dtype.itemsize, "writing")
        return t
    fix = ", or write the bytes as they are (raw=True, nem-run --input-raw)"
    if why := dtype_mismatch(dtype, t.elem, t.describe(), fix):
        raise TensorIOError(why)
    if t.region is not None and offset == 0:
        if tuple(shape) != t.shape:
            raise TensorIOError(
                f"shape {list(shape)} does not match {t.describe()}: "
                "reshape the array, or write the bytes as they are "
                "(raw=True, nem-run --input-raw)"
            )
        return t
    _span(t, offset, math.ceil(count / 2) if t.elem == "i4" else count * dtype.itemsize, "writing")
    return t


def write_tensor(
    memory: Memory,
    program: CompiledProgram | None,
    name: str | None,
    array: npt.ArrayLike | None,
    offset: int = 0,
    raw: bool = False,
) -> int:
    """Write `array` into buffer or region `name`; the number of bytes written
    (so that a caller can tell a partial fill, which is allowed, from a full one)."""
    arr = np.asarray(array)
    if arr.dtype.hasobject:
        got = "None" if array is None else f"a {type(array).__name__} of Python objects"
        raise TypeError(f"tensor must be an array of numbers, not {got}")
    t = check_write(memory, program, name, arr.shape, arr.dtype, offset, raw)
    level = memory.levels[t.buffer.level]
    if raw or t.elem is None:
        return _store(level.data, *_span(t, offset, arr.nbytes, "writing"), arr)
    if t.elem == "i4" and arr.size and (arr.min() < -8 or arr.max() > 7):
        raise TensorIOError(
            f"int8 values outside [-8, 7] do not fit {t.describe()}: write an "
            f"array of {t.elem} ({t.dtype}), or write the bytes as they are "
            "(raw=True, nem-run --input-raw)"
        )
    if t.region is not None and offset == 0:
        t.region.write(arr)
        return t.region.extent
    if t.elem == "i4":
        first = offset * 2
        lo, hi = _span(t, offset, math.ceil(arr.size / 2), "writing")
        base = t.region.start if t.region is not None else t.buffer.offset
        pack_i4_into(level.data[base:hi], np.arange(first, first + arr.size), arr)
        return hi - lo
    return _store(level.data, *_span(t, offset, arr.nbytes, "writing"), arr)


def _store(data: np.ndarray, lo: int, hi: int, arr: np.ndarray) -> int:
    """Put `arr`'s elements in C order into bytes [lo, hi) of `data` (the
    bounds are checked): numpy copies straight into memory, so a broadcast
    view (stride 0, e.g. 4 TiB of one value) is never made contiguous first
    (D-RT-TENSOR-IO); its size was checked against the target before."""
    if arr.size:
        np.copyto(data[lo:hi].view(arr.dtype).reshape(arr.shape), arr, casting="no")
    return hi - lo


def encode_tensor(
    memory: Memory, program: CompiledProgram | None, name: str, array: npt.ArrayLike
) -> tuple[str, int, bytes]:
    """(buffer, byte offset in it, bytes): what a typed `write_tensor(name,
    array)` puts into buffer or top-level region `name`, with its checks
    (element type, a region's shape, bounds).  `nem-opt --embed NAME=FILE.npy`
    stores these as initial contents, so the file is held to the rules of
    `nem-run --input` (D-RT-TENSOR-IO).  Writes into `memory`, which should
    be a scratch one."""
    t = target(memory, program, name)
    n = write_tensor(memory, program, name, np.asarray(array))
    lo = t.region.start if t.region is not None else t.buffer.offset
    return (
        t.buffer.name,
        lo - t.buffer.offset,
        bytes(memory.levels[t.buffer.level].data[lo : lo + n]),
    )


def read_tensor(
    memory: Memory,
    program: CompiledProgram | None,
    name: str | None,
    shape: Sequence[int] | None = None,
    dtype: npt.DTypeLike | None = None,
    offset: int = 0,
) -> np.ndarray:
    """A copy of the target's values (see the module docstring)."""
    t = target(memory, program, name)
    shape, offset = check_shape(shape), check_offset(offset)
    elem, dt = read_type(dtype, t.elem)
    level = memory.levels[t.buffer.level]
    if (
        t.region is not None
        and offset == 0
        and elem == t.elem
        and (shape is None or shape == t.shape)
    ):
        return np.array(t.region.read(), copy=True)
    if shape is None:  # the rest of the target: at least one element, or an overrun
        count = (t.size - offset) * 2 if elem == "i4" else (t.size - offset) // dt.itemsize
        if count < 1 and offset >= 0:
            unit = f"{elem or dt} element" if elem or dtype is not None else "byte"
            raise TensorIOError(
                f"reading from offset {offset} of {t.where}: out of bounds, "
                f"not one whole {unit} left [HAZ-04]"
            )
    else:
        count = math.prod(shape)
    if elem == "i4":
        lo, hi = _span(t, offset, math.ceil(count / 2), "reading")
        out = unpack_i4(level.data[lo:hi], np.arange(count))
        return out.reshape(shape) if shape is not None else out
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
        raise TensorIOError(
            f"'{text}' is not ELEM or ELEM[d0,d1,...] with ELEM one of " + ", ".join(DTYPES)
        )
    if m["shape"] is None:
        return m["elem"], None
    if not m["shape"].strip():
        return m["elem"], ()
    dims = [d.strip() for d in m["shape"].split(",")]
    if not all(d.isdigit() and int(d) > 0 for d in dims):
        raise _not_positive(f"'{text}'", "f16[64,32]", "none, f16[]")
    return m["elem"], tuple(int(d) for d in dims)
