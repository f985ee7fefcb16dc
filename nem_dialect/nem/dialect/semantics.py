"""The NEM execution model, written once.

Everything a NEM program *means* when it runs is stated here as code, and the
static checker (`nem.dialect.verifier`, `nem.analysis.happens_before`,
`nem.analysis.capacity`, the device and placement passes), the reference
runtime (`nem.runtime`: scheduler, engine, kernels, memory, checks, API) and
the lowering import it.  When two of them disagree, one of them holds a
second copy of a fact in this file: remove the copy (docs/design.md,
"Execution model"; decisions D-SEM-* in docs/spec-decisions.md).

* **Element types** (`ELEM_TYPES`): spec name, bit width, float/signed, the
  xDSL type, the MLIR spelling and the numpy / ml_dtypes dtype.
* **What a transfer moves** (`moved_bytes`, `fills_range`): a typed region
  its elements, an untyped one its byte range (D-SEM-TRANSFER).
* **Integer expressions** have their own module, `nem.dialect.expressions`
  (`apply_binop`, `Evaluator`): `/` truncates toward zero, `mod` is the
  truncated remainder (D-EXPR-MOD).
* **Streams, loops and ends** (`LOOP_END`, `PROGRAM_END`, `ITERATION_END`):
  the program body and each loop iteration are instruction streams; a
  `wait`/`.sync` blocks its own stream; `endloop` waits for every iteration
  to be *issued and past its waits* but not for its tasks to complete
  (D-SEM-ENDLOOP); the program's end waits for every task (D-SEM-PROGRAM-END);
  an iteration ends when its stream ended and all it issued completed.
* **The `@max_in_flight(N)` window** (`max_in_flight`, `window_error`,
  `window_orders`, `complete_at_loop_end`): iteration `j` opens once every
  iteration `<= j - N` has completed (LOOP-01/02/05/06, D-HAZ-PIPE).
* **Instances of loop-body declarations** (`loop_copies`, `instance_index`):
  a buffer declared in a loop body has one instance per iteration that can be
  in flight (D-SEM-INSTANCES).
* **Which units may run a task** (`eligible_units`, `bind_unit`), on a given
  device (D-SEM-UNITS, RES-03/04/05/07).
* **Memory layout of a level** (`layout`): the placement the capacity check
  verifies is the one the runtime uses (D-SEM-LAYOUT, DEV-16).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import ml_dtypes
import numpy as np
import numpy.typing as npt
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute

from nem.dialect.expressions import Evaluator, ExprError

if TYPE_CHECKING:
    import islpy as isl

    from nem.dialect.ops import LoopOp, TaskOp

# ---------------------------------------------------------------------------
# Element types (SPEC §3; TYPE-01, TYPE-02, TYPE-05; D-RT-I4)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ElemType:
    """One element type of the spec.  `dtype` is the numpy dtype values have
    in kernels and typed views (`i4` is unpacked to int8 values in [-8, 7];
    in memory it is packed two per byte, D-RT-I4)."""

    name: str
    bits: int
    is_float: bool
    signed: bool
    dtype: np.dtype
    mlir: str

    @cached_property
    def xdsl(self) -> Attribute:
        if self.name == "f16":
            return Float16Type()
        if self.name == "bf16":
            return BFloat16Type()
        if self.name == "f32":
            return Float32Type()
        return IntegerType(self.bits, Signedness.SIGNLESS if self.signed else Signedness.UNSIGNED)

    @property
    def is_int(self) -> bool:
        return not self.is_float

    def int_range(self) -> tuple[int, int]:
        """The integer range of an integer type."""
        if self.signed:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return 0, (1 << self.bits) - 1


def _e(name: str, bits: int, is_float: bool, signed: bool, dtype: npt.DTypeLike,
       mlir: str | None = None) -> ElemType:
    return ElemType(name, bits, is_float, signed, np.dtype(dtype), mlir or name)


ELEM_TYPES: dict[str, ElemType] = {e.name: e for e in (
    _e("i4", 4, False, True, np.int8),
    _e("i8", 8, False, True, np.int8),
    _e("i16", 16, False, True, "<i2"),
    _e("i32", 32, False, True, "<i4"),
    _e("u8", 8, False, False, np.uint8, "ui8"),
    _e("u16", 16, False, False, "<u2", "ui16"),
    _e("u32", 32, False, False, "<u4", "ui32"),
    _e("f16", 16, True, True, "<f2"),
    _e("bf16", 16, True, True, ml_dtypes.bfloat16),
    _e("f32", 32, True, True, "<f4"),
)}
"""The spec's element types in its order of listing (TYPE-01)."""

ELEM_NAMES: tuple[str, ...] = tuple(ELEM_TYPES)
INT_ELEMS: tuple[str, ...] = tuple(n for n, e in ELEM_TYPES.items() if e.is_int)
FLOAT_ELEMS: tuple[str, ...] = tuple(n for n, e in ELEM_TYPES.items() if e.is_float)
ELEM_BITS: dict[str, int] = {n: e.bits for n, e in ELEM_TYPES.items()}
ELEM_DTYPES: dict[str, np.dtype] = {n: e.dtype for n, e in ELEM_TYPES.items()}
_BY_XDSL: dict[Attribute, str] = {e.xdsl: n for n, e in ELEM_TYPES.items()}


def elem_of_xdsl(attr: Attribute) -> str | None:
    """The spec's name of an xDSL builtin element type, or None."""
    return _BY_XDSL.get(attr)


def elem_bytes(name: str, count: int) -> int:
    """Bytes that `count` packed elements occupy (TYPE-02: ceil for sub-byte types)."""
    return -(-count * ELEM_TYPES[name].bits // 8)


# ---------------------------------------------------------------------------
# What a transfer moves (SPEC §3 Region Type Syntax, §5 transfer.async; D-SEM-TRANSFER)
# ---------------------------------------------------------------------------


def fills_range(elem: str, shape: Sequence[int], strides: Sequence[int] | None,
                extent: int) -> bool:
    """Whether a typed region's elements are exactly its byte range
    `[offset, offset + extent)`: row-major over its shape (no strides, or
    strides that step as row-major ones do; a dimension of size 1 steps
    nothing) and no byte of the extent left over (for i4: whole bytes).
    Such a region moves the same bytes typed or not; only such a typed
    region may face an untyped one in a transfer (TASK-07)."""
    if strides is not None:
        step = 1
        for d in reversed(range(len(shape))):
            if shape[d] != 1 and strides[d] != step:
                return False
            step *= shape[d]
    count = math.prod(shape)
    return count * ELEM_TYPES[elem].bits == 8 * extent


def moved_bytes(elem: str | None, shape: Sequence[int] | None,
                strides: Sequence[int] | None, extent: int) -> npt.NDArray[np.int64]:
    """The bytes of a region a transfer reads (source) or writes
    (destination), as offsets from the region's offset, in the order they
    are moved: an untyped region (or a typed one without a shape) its whole
    range; a typed region its elements in row-major order of its shape
    (addressed by its strides, else row-major), each element's bytes in
    address order (i4: the bytes holding its elements' nibbles).  The
    gaps between strided elements and any extent past the last element are
    not moved.  The runtime copies these (`nem.runtime.engine.prepare_move`);
    the checker's access range `[offset, offset + extent)` holds them
    (D-HAZ-ACCESS)."""
    if elem is None or not shape:
        return np.arange(extent, dtype=np.int64)
    if strides is None:
        strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    grid = np.indices(shape).reshape(len(shape), -1)
    index = np.asarray(strides, dtype=np.int64) @ grid        # element index, row-major order
    bits = ELEM_TYPES[elem].bits
    if bits < 8:     # each byte holding an element's nibble, once, in element order
        byte = index * bits // 8
        _, first = np.unique(byte, return_index=True)
        out: npt.NDArray[np.int64] = byte[np.sort(first)]
        return out
    size = bits // 8
    return (index[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)


# ---------------------------------------------------------------------------
# Streams, loops and ends (SPEC §Execution Semantics, §Loops; IA §4.5)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockEnd:
    """What reaching the end of a block instance waits for.

    `stream_waits`: the statement after the block (or the block's completion)
    waits until every instruction stream the block opened has reached its end
    (every statement issued, every `wait` and `.sync` passed).
    `drains`: it also waits until every task the block issued, in nested
    blocks too, has completed."""

    what: str
    stream_waits: bool
    drains: bool
    decision: str


LOOP_END = BlockEnd("endloop", stream_waits=True, drains=False, decision="D-SEM-ENDLOOP")
"""`endloop` is not a barrier: the statements after a loop are issued once every
iteration has been issued and passed its waits; tasks of the last N iterations
that no wait covered may still run (D-SEM-ENDLOOP, = D-HAZ-ENDLOOP)."""

ITERATION_END = BlockEnd("iteration", stream_waits=True, drains=True, decision="D-HAZ-PIPE")
"""An iteration completes when its stream has ended and everything it issued
(nested loops included) has completed; only then may iteration i + N open (LOOP-06)."""

PROGRAM_END = BlockEnd("program end", stream_waits=True, drains=True,
                       decision="D-SEM-PROGRAM-END")
"""The program completes when every task it issued has completed; results are
read (by the host, `--output`, the API) only then."""


def max_in_flight(loop: LoopOp) -> int:
    """N of the loop's `@max_in_flight(N)`; 1 without it (LOOP-02).  An N < 1 is
    a LOOP-03 error (`window_error`, raised by the `nem.loop` op verifier and
    reported, located, by the static verifier); the
    execution model never sees such a loop."""
    from nem.dialect.attributes import MaxInFlightAttr  # attributes imports this module

    for d in loop.decorator_list():
        if isinstance(d, MaxInFlightAttr):
            return d.n.data
    return 1


def window_error(loop: LoopOp) -> str | None:
    """The LOOP-03 message when the loop's `@max_in_flight(N)` has N < 1."""
    n = max_in_flight(loop)
    return f"@max_in_flight({n}) must be at least 1" if n < 1 else None


def may_open(next_ord: int, first_incomplete_ord: int, n: int) -> bool:
    """Iteration `next_ord` (0-based) may open when every iteration before
    `first_incomplete_ord` has completed: at most N are active (LOOP-01/05)."""
    return next_ord - first_incomplete_ord < n


def window_orders(distance: int, n: int) -> bool:
    """Is every task of iteration i complete before iteration i + distance
    starts?  Yes iff distance >= N (LOOP-06, D-HAZ-PIPE)."""
    return distance >= n


def complete_at_loop_end(ord_: int, trip: int, n: int) -> bool:
    """Is iteration `ord_` (0-based) of a loop of `trip` iterations complete when
    the statement after `endloop` is issued, without any wait covering it?
    Iteration trip - 1 opened, so iterations <= trip - 1 - N completed."""
    return LOOP_END.drains or window_orders(trip - 1 - ord_, n)


def window_orders_set(distance: isl.PwAff, n: int) -> isl.Set:
    """Symbolic twin of `window_orders` (D-HAZ-SYMBOLIC): where `distance`
    (a quasi-affine function of iteration ordinals) is >= N."""
    return (distance - n).nonneg_set()


def complete_at_loop_end_set(ord_: isl.PwAff, trip: isl.PwAff, n: int) -> isl.Set:
    """Symbolic twin of `complete_at_loop_end`: where iteration `ord_` of a loop
    of `trip` iterations is complete after `endloop`."""
    if LOOP_END.drains:  # pragma: no cover - endloop is not a barrier
        return ord_.domain()
    return window_orders_set(trip - 1 - ord_, n)


def loop_window(n: int, trip: int | None) -> int:
    """Iterations of one loop instance that can be active at once: min(N, trip)."""
    return max(1, n if trip is None else min(n, trip))


# ---------------------------------------------------------------------------
# Instances of loop-body declarations (D-SEM-INSTANCES)
# ---------------------------------------------------------------------------


def loop_copies(windows: Iterable[int]) -> int:
    """Instances of a buffer declared in a loop body: one per combination of
    concurrently active iterations of its enclosing loops, i.e. the product of
    their `loop_window`s."""
    n = 1
    for w in windows:
        n *= w
    return n


def static_windows(loops: Sequence[LoopOp], ev: Evaluator) -> tuple[int, ...]:
    """`loop_window` of each loop of a declaration's enclosing loops, from their
    static trip counts (N when a bound depends on an outer loop variable)."""
    out = []
    for lp in loops:
        try:
            lo, hi = ev.static(lp.lower), ev.static(lp.upper)
        except ExprError:
            lo = hi = None
        trip = hi - lo + 1 if lo is not None and hi is not None else None
        out.append(loop_window(max_in_flight(lp), trip))
    return tuple(out)


def instance_index(ords: Sequence[int], windows: Sequence[int]) -> int:
    """The instance a loop-body declaration uses in the iteration with ordinals
    `ords` (0-based, outermost first): `ord mod window` per loop, mixed radix.
    Iterations sharing an instance are ordered by the window (i and i + N)."""
    k = 0
    for o, w in zip(ords, windows):
        k = k * w + o % w
    return k


def same_instance_set(ords_a: Sequence[isl.PwAff], ords_b: Sequence[isl.PwAff],
                      windows: Sequence[int], universe: isl.Set) -> isl.Set:
    """Symbolic twin of `instance_index`: where iterations `ords_a` and
    `ords_b` (ordinals, never negative) use the same instance.  The index is
    mixed radix with digits `ord mod window`, so equal iff every digit is."""
    out = universe
    for a, b, w in zip(ords_a, ords_b, windows):
        if w > 1:
            out = out & a.mod_val(w).eq_set(b.mod_val(w))
    return out


# ---------------------------------------------------------------------------
# Memory layout of one level (DEV-16, D-SEM-LAYOUT)
# ---------------------------------------------------------------------------


K = TypeVar("K")


@dataclass(frozen=True)
class Slot(Generic[K]):
    """One buffer instance placed in a level: `key` identifies it for the caller."""

    key: K
    offset: int
    size: int
    align: int

    @property
    def end(self) -> int:
        return self.offset + self.size


def layout(items: Sequence[tuple[K, int, int]]) -> list[Slot[K]]:
    """Place `(key, size, align)` buffer instances of one level: by decreasing
    `align` (declaration order among equals), each at the next multiple of its
    align.  Buffers are opaque (BUF-07), so the order is free; decreasing
    alignment avoids most padding.  The capacity check (DEV-16) verifies this
    layout and the runtime allocates it, so the two agree byte for byte."""
    order = sorted(range(len(items)), key=lambda k: -max(1, items[k][2]))
    out: list[Slot[K] | None] = [None] * len(items)
    top = 0
    for k in order:
        key, size, align = items[k]
        align = max(1, align)
        off = -(-top // align) * align
        out[k] = Slot(key, off, size, align)
        top = off + size
    return [s for s in out if s is not None]


class Placement(Protocol):
    """Anything placed in a level's memory (a `Slot`, a memory map's entry)."""

    @property
    def end(self) -> int: ...


def footprint(slots: Iterable[Placement]) -> int:
    """The bytes a level's placed buffers span: the end of the last one."""
    return max((s.end for s in slots), default=0)


# ---------------------------------------------------------------------------
# Execution units (SPEC §1 "Resource Classes and Task Mapping"; RES-03..07)
# ---------------------------------------------------------------------------

PER_ENGINE_UNITS = ("NMU", "CSTL", "DMA", "VPU", "SEQ")
"""Unit types every engine has instances of (SPEC §1)."""
DEVICE_UNITS = ("sDMA", "WDM")
"""Unit types shared by the device."""
UNIT_TYPES = PER_ENGINE_UNITS + DEVICE_UNITS
RESOURCE_UNITS = ("NMU", "CSTL", "DMA", "VPU")
"""Valid `@resource` targets (RES-01)."""


def _levels(op: TaskOp) -> set[str]:
    from nem.dialect.attributes import RegionType  # attributes imports this module

    levels: set[str] = set()
    for v, _ in op.operand_regions():
        rtype = v.type
        assert isinstance(rtype, RegionType)  # task operands are regions
        levels.add(rtype.level.kind)
    return levels


def task_kind(op: TaskOp) -> str:
    """`transfer`, `store`, or the compute opcode (how diagnostics name a task's kind)."""
    from nem.dialect.ops import ComputeOp, StoreOp, TransferOp

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
    from nem.dialect.ops import ComputeOp, StoreOp, TransferOp

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


def bind_unit(op: TaskOp, resource: tuple[str, int] | None,
              count: Callable[[str], int]) -> UnitBinding:
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
            return UnitBinding(None, None, "RES-07", f"{unit} cannot run this task (eligible: "
                               f"{names})", f"use @resource({eligible[0]}[0]) or drop @resource "
                               "(decisions D-DEV-RES, D-SEM-UNITS)")
        if c > 0:
            return UnitBinding(unit, i if i < c else i % c, "RES-03" if i < c else "RES-04")
        if alt is None:
            return UnitBinding(None, None, "RES-05", f"the device has no {unit} and no other unit "
                               f"type that can run this task (eligible: {names})",
                               target + ", or drop @resource and the task")
        return UnitBinding(alt, None, "RES-05")
    if alt is None:
        return UnitBinding(None, None, "RES-05", "the device has no unit that can run this task "
                           f"(eligible: {names})", target)
    return UnitBinding(alt, None, None)
