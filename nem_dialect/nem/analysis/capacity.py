"""Memory maps of a program's buffers and the capacity rule (DEV-16).

SPEC §5 Schema rule 6: the sum of the sizes of the buffers declared at one
level must not exceed its capacity (`l2_size_bytes` for L2, `l1_size_bytes`
for each `L1[k]`).  The policy (docs/spec-decisions.md, D-DEV-CAP,
D-SEM-LAYOUT, D-SEM-INSTANCES):

* a level's buffers are placed by `semantics.layout` (decreasing align,
  declaration order among equals, each at the next multiple of its align):
  the layout the runtime allocates, so the two agree byte for byte; the
  footprint is the end of the last placed buffer;
* the error says whether the sizes alone exceed the capacity (the spec's
  rule) or only the alignment padding does;
* an unindexed `L1` buffer is `L1[0]` (D-DEV-L1);
* a buffer declared inside loop bodies has one instance per concurrently
  active iteration (`semantics.loop_copies`);
* DDR has no declared capacity and is not checked (D-SEM-DDR).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.ir import Block, Operation

from nem.dialect.attributes import MemLevelAttr
from nem.dialect.device_model import Device
from nem.dialect.diagnostics import Diagnostic, SourceLoc, error
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.ops import BufferOp, LoopOp, ProgramOp
from nem.dialect.semantics.instances import loop_copies as copies_of_windows
from nem.dialect.semantics.instances import static_windows
from nem.dialect.semantics.layout import footprint, layout


def level_key(level: MemLevelAttr) -> str:
    """`L2`, `DDR`, or `L1[k]` with unindexed `L1` read as `L1[0]` (D-DEV-L1)."""
    if level.kind == "L1":
        return f"L1[{level.engine if level.engine is not None else 0}]"
    return level.kind


@dataclass(frozen=True)
class Placed:
    """One buffer (instance) in a level's memory map."""

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
        which = f" (instance {self.copy + 1} of {self.copies})" if self.copies > 1 else ""
        return (
            f"'{self.name}'{which} at [{self.offset}, {self.end}) size {self.size} "
            f"align {self.align} ({where})"
        )


def loop_copies(loops: tuple[LoopOp, ...], ev: Evaluator) -> int:
    """Instances of a declaration in the body of `loops`: one per concurrently
    active iteration (`semantics.loop_copies`, D-SEM-INSTANCES)."""
    return copies_of_windows(static_windows(loops, ev))


def buffer_instances(op: BufferOp, ev: Evaluator) -> int:
    """Instances of a buffer (D-SEM-INSTANCES)."""
    loops = []
    p = op.parent_op()
    while isinstance(p, LoopOp):
        loops.append(p)
        p = p.parent_op()
    return loop_copies(tuple(reversed(loops)), ev)


def all_buffers(block: Block) -> Iterator[BufferOp]:
    """The buffers declared in `block` and its loops, in program order."""
    return iter(_buffers_in(block))


def _buffers_in(block: Block) -> list[BufferOp]:
    """`all_buffers` as a list, walked along the op links with `type(op) is`
    (no op class derives from BufferOp or LoopOp; isinstance on xDSL's ABC
    op classes runs Python code, and a lowered CNN has millions of index
    constants to pass: 60% of `memory_maps`, issue 30)."""
    out: list[BufferOp] = []
    stack: list[Operation | None] = [block.first_op]
    while stack:
        op = stack.pop()
        while op is not None:
            t = type(op)
            if t is BufferOp:
                out.append(op)  # type: ignore[arg-type]
            elif t is LoopOp:
                stack.append(op.next_op)
                op = op.block.first_op  # type: ignore[attr-defined]
                continue
            op = op.next_op
    return out


def size_and_align(op: BufferOp, ev: Evaluator) -> tuple[int, int] | None:
    """A buffer's static size and its align (1 when absent); None when the
    size is not a positive static integer (the static verifier reports it)."""
    try:
        size = ev.static(op.size)
    except ExprError:
        size = None
    if size is None or size <= 0:
        return None
    return size, op.align.value.data if op.align is not None else 1


def memory_maps(prog: ProgramOp, ev: Evaluator | None = None) -> dict[str, list[Placed]]:
    """Level key -> its buffer instances as `semantics.layout` places them
    (sorted by offset).  Buffers whose size is not a static integer are left
    out (the static verifier reports them)."""
    ev = ev or Evaluator()
    items: dict[str, list[tuple[Placed, int, int]]] = {}
    copies_in: dict[int, int] = {}  # by the id of the op a buffer is declared in
    for op in _buffers_in(prog.block):
        placed = size_and_align(op, ev)
        if placed is None:
            continue
        size, align = placed
        parent = op.parent_op()
        copies = copies_in.get(id(parent))  # the parents are alive (the program's)
        if copies is None:  # one loop nest's windows, not one per buffer declared in it
            copies = copies_in[id(parent)] = buffer_instances(op, ev)
        for c in range(copies):
            items.setdefault(level_key(op.result.type.level), []).append(
                (Placed(op, op.buffer_name.data, 0, size, align, c, copies), size, align)
            )
    maps: dict[str, list[Placed]] = {}
    for key, lst in items.items():
        slots = layout(lst)
        maps[key] = sorted(
            (
                Placed(s.key.op, s.key.name, s.offset, s.size, s.align, s.key.copy, s.key.copies)
                for s in slots
            ),
            key=lambda p: p.offset,
        )
    return maps


def capacity(device: Device, key: str) -> int | None:
    topo = device.topology
    if key == "L2":
        return topo.l2_size_bytes
    if key.startswith("L1"):
        # an engine the device lacks is BUF-05's error, not a capacity one
        return topo.l1_size_bytes if int(key[3:-1]) < topo.num_engines else None
    return None


def check_capacity(
    prog: ProgramOp, device: Device, ev: Evaluator | None = None
) -> list[Diagnostic]:
    """DEV-16: one error per level whose footprint exceeds its capacity, at the
    first buffer that crosses the limit, with the level's memory map as a note."""
    diags = []
    for key, placed in memory_maps(prog, ev).items():
        cap = capacity(device, key)
        total = footprint(placed)
        if cap is None or not placed or total <= cap:
            continue
        sizes = sum(p.size for p in placed)
        first = next(p for p in placed if p.end > cap)
        field = "l2_size_bytes" if key == "L2" else "l1_size_bytes"
        if sizes > cap:
            what = (
                f"buffers at {key} need {sizes} bytes (the sum of their sizes"
                + (f", plus {total - sizes} bytes of alignment padding" if total > sizes else "")
                + f") but device '{device.name}' has {field} = {cap}"
            )
            fix = (
                f"shrink or remove buffers at {key} (their sizes must total at most {cap} "
                "bytes), tile the data more finely, or target a device with more memory"
            )
        else:
            what = (
                f"buffers at {key} fit by size ({sizes} of {cap} bytes) but their alignment "
                f"padding ({total - sizes} bytes) makes them end at byte {total}, past "
                f"{field} = {cap} of device '{device.name}'; the padding is what overflows"
            )
            fix = "lower the align of some buffers or pad their sizes to a multiple of the largest align"
        d = error(
            f"{what}; buffer '{first.name}' ends at byte {first.end}",
            first.op,
            "DEV-16",
            fix + " (decision D-DEV-CAP)",
        )
        lines = [
            f"memory map of {key} ({len(placed)} buffer instance(s), capacity {cap} bytes, "
            "placed by decreasing align, padding counted):"
        ]
        lines += ["  " + p.describe() for p in placed]
        d.notes.append(Diagnostic("note", "\n".join(lines)))
        diags.append(d)
    return diags
