"""Memory maps of a program's buffers and the capacity rule (DEV-16).

SPEC §5 Schema rule 6: the buffers declared at one level must fit its
capacity (`l2_size_bytes` for L2, `l1_size_bytes` for each `L1[k]`).  The
policy (docs/spec-decisions.md, D-DEV-CAP*):

* buffers of a level are laid out in declaration order, each at the next
  offset that is a multiple of its `align` (no `align`: 1), so alignment
  padding counts; the level's footprint is the end of its last buffer;
* an unindexed `L1` buffer is `L1[0]` (D-DEV-L1);
* a buffer declared inside loop bodies exists once per concurrently active
  iteration: `min(@max_in_flight N, trip count)` copies per enclosing loop
  (no `@max_in_flight`: 1);
* DDR has no declared capacity and is not checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.ir import Block

from nem.dialect.attributes import MaxInFlightAttr, MemLevelAttr
from nem.dialect.device_model import Device
from nem.dialect.diagnostics import Diagnostic, SourceLoc, error
from nem.dialect.semantics import Evaluator, ExprError
from nem.dialect.ops import BufferOp, LoopOp, ProgramOp


def level_key(level: MemLevelAttr) -> str:
    """`L2`, `DDR`, or `L1[k]` with unindexed `L1` read as `L1[0]` (D-DEV-L1)."""
    if level.kind == "L1":
        return f"L1[{level.engine if level.engine is not None else 0}]"
    return level.kind


@dataclass(frozen=True)
class Placed:
    """One buffer (copy) in a level's memory map."""

    op: BufferOp
    name: str
    offset: int
    size: int
    align: int
    copy: int = 0
    copies: int = 1

    @property
    def end(self) -> int:
        return self.offset + self.size

    def describe(self) -> str:
        loc = SourceLoc.of(self.op)
        where = f"line {loc.line}" if loc else "unknown location"
        which = f" (copy {self.copy + 1} of {self.copies})" if self.copies > 1 else ""
        return (f"'{self.name}'{which} at [{self.offset}, {self.end}) size {self.size} "
                f"align {self.align} ({where})")


def loop_copies(loops: tuple[LoopOp, ...], ev: Evaluator) -> int:
    """Concurrently live instances of a loop-body object: product over the
    enclosing loops of min(@max_in_flight N, trip count)."""
    n = 1
    for lp in loops:
        mif = next((d.n.data for d in lp.decorator_list() if isinstance(d, MaxInFlightAttr)), 1)
        try:
            lo, hi = ev.static(lp.lower), ev.static(lp.upper)
        except ExprError:
            lo = hi = None
        trips = hi - lo + 1 if lo is not None and hi is not None else mif
        n *= max(1, min(mif, trips))
    return n


def _buffers(block: Block, loops: tuple[LoopOp, ...]) -> Iterator[tuple[BufferOp, tuple[LoopOp, ...]]]:
    for op in block.ops:
        if isinstance(op, BufferOp):
            yield op, loops
        elif isinstance(op, LoopOp):
            yield from _buffers(op.block, loops + (op,))


def memory_maps(prog: ProgramOp, ev: Evaluator | None = None) -> dict[str, list[Placed]]:
    """Level key -> its buffers laid out in declaration order (padding included).
    Buffers whose size is not a static integer are left out (the static
    verifier reports them)."""
    ev = ev or Evaluator()
    maps: dict[str, list[Placed]] = {}
    cursor: dict[str, int] = {}
    for op, loops in _buffers(prog.block, ()):
        try:
            size = ev.static(op.size)
        except ExprError:
            size = None
        if size is None or size <= 0:
            continue
        key = level_key(op.result.type.level)
        align = op.align.value.data if op.align is not None else 1
        copies = loop_copies(loops, ev)
        for c, offset in enumerate(place(cursor, key, size, align, copies)):
            maps.setdefault(key, []).append(
                Placed(op, op.buffer_name.data, offset, size, max(align, 1), c, copies))
    return maps


def place(cursor: dict[str, int], key: str, size: int, align: int, copies: int) -> list[int]:
    """The offsets of the `copies` instances of one buffer at level `key`,
    each at the next multiple of `align` (<= 0 reads as 1) after `cursor[key]`,
    which advances: the one layout policy (D-DEV-CAP), shared by the capacity
    check and the bytecode loader's relocation of buffer slots."""
    align = align if align > 0 else 1
    offsets = []
    for _ in range(copies):
        offset = -(-cursor.get(key, 0) // align) * align
        offsets.append(offset)
        cursor[key] = offset + size
    return offsets


def capacity(device: Device, key: str) -> int | None:
    topo = device.topology
    if key == "L2":
        return topo.l2_size_bytes
    if key.startswith("L1"):
        # an engine the device lacks is BUF-05's error, not a capacity one
        return topo.l1_size_bytes if int(key[3:-1]) < topo.num_engines else None
    return None


def check_capacity(prog: ProgramOp, device: Device, ev: Evaluator | None = None) -> list[Diagnostic]:
    """DEV-16: one error per level whose footprint exceeds its capacity, at the
    first buffer that crosses the limit, with the level's memory map as a note."""
    diags = []
    for key, placed in memory_maps(prog, ev).items():
        cap = capacity(device, key)
        if cap is None or not placed or placed[-1].end <= cap:
            continue
        total = placed[-1].end
        sizes = sum(p.size for p in placed)
        first = next(p for p in placed if p.end > cap)
        field = "l2_size_bytes" if key == "L2" else "l1_size_bytes"
        padding = f" + {total - sizes} bytes of alignment padding" if total > sizes else ""
        why = (" (the sizes alone fit: reorder the buffers by decreasing align or lower "
               "their align)") if sizes <= cap else ""
        d = error(
            f"buffers at {key} need {total} bytes ({sizes} bytes of buffers{padding}) but device "
            f"'{device.name}' has {field} = {cap}; buffer '{first.name}' ends at byte "
            f"{first.end}{why}", first.op, "DEV-16",
            f"shrink or remove buffers at {key} (they must total at most {cap} bytes), "
            "tile the data more finely, or target a device with more memory")
        lines = [f"memory map of {key} ({len(placed)} buffer(s), capacity {cap} bytes, "
                 "declaration order, padding to align counted):"]
        lines += ["  " + p.describe() for p in placed]
        d.notes.append(Diagnostic("note", "\n".join(lines)))
        diags.append(d)
    return diags
