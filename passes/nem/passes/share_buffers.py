"""`nem-share-buffers{level=L1}`: buffers of one memory level whose
lifetimes do not overlap share storage (decision D-LOW-SHARE).

The analysis (`nem.analysis.buffer_lifetimes`) gives each program-scope
buffer of the level its lifetime, the interval of top-level statements that
use it, and packs those of one level (`L1[k]`, `L1`, `L2`) first-fit into
one arena.  The rewrite here declares the arena where the first packed
buffer was declared, named after the level (`L1_0_arena` for `L1[0]`), and
makes every region of a packed buffer a region of the arena at the packed
offset (the region's offset expression `+ base`); the packed buffers are
removed.  With `remarks=true` a remark per arena says how many bytes were
saved.

Reuse creates conflicts the program did not have: the last accesses of the
old contents against the first accesses of the new ones (write-after-read,
write-after-write, and read-after-write for a read of not yet written
bytes).  They are ordered by the machinery of `nem-synthesize-deps`
(D-DEPS-SYNTH), run on the packed program for the arenas' accesses only,
and only for pairs of accesses of different packed buffers (each buffer
and the other buffers were race-free, and added ordering keeps them so): a
dep from the earlier task or the closing wait of the loop that held it.  The two accesses are in
different top-level statements, so no loop window has to shrink.

Packing assumes the level holds scratch data: what a packed buffer holds
before its first use or after its last (memory starts zeroed, D-RT-MEM;
`nem-run --input`, `--embed`) is not preserved.  That is what the lowering's
staging buffers are (`memref.alloc` contents are undefined, D-LOW-BUF);
nem-compile runs the pass on L1 after `lower-to-nem`, with
`over-capacity-only=true`: reuse orders a later nest's loads after an
earlier nest's reads, so it is only worth it where the buffers do not fit;
and where a level then has room left, the packing spends it keeping the
buffers of neighbouring phases apart (`buffer_lifetimes.spread`, `_roomy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from nem.analysis.buffer_lifetimes import Cycles, Packing, Plan, plan, replan, spread
from nem.analysis.capacity import capacity, level_key
from nem.analysis.ir_walk import block_ops
from nem.analysis.race_memos import ShapeMemos
from nem.dialect.attributes import BufferType, MemLevelAttr
from nem.dialect.builder import index_constant
from nem.dialect.device_model import Device
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import BufferOp, ProgramOp, RegionOp, programs
from nem.dialect.semantics.cost import UnitChars
from nem.dialect.semantics.layout import footprint, layout
from nem.passes.finish_times import FinishTimes
from nem.passes.pass_context import report, shape_memos

LEVELS = ("L1", "L2")
"""What `level=` takes besides `L1[k]`: `L1` is every `L1` and `L1[k]` level."""


def selected_levels(option: str, program: ProgramOp) -> list[str]:
    """The levels of `program`'s buffers that `level=option` selects."""
    ok = option in LEVELS or (
        option.startswith("L1[") and option.endswith("]") and option[3:-1].isdigit()
    )
    if not ok:
        why = (
            "DDR buffers hold the program's inputs and outputs, which are never shared"
            if option == "DDR"
            else "levels: L1 (every L1[k]), L1[k], L2"
        )
        raise NemDiagnosticError(
            [
                Diagnostic(
                    "error",
                    f"nem-share-buffers: not supported: level={option} ({why})",
                    fix='write level=L1, level="L1[k]" (quoted) or level=L2',
                )
            ]
        )
    levels = {
        op.result.type.level.data for op in block_ops(program.block) if isinstance(op, BufferOp)
    }
    if option == "L1":
        return sorted(lv for lv in levels if MemLevelAttr(lv).kind == "L1")
    return [option] if option in levels else []


def arena_name(level: str, program: ProgramOp, taken: set[str] | None = None) -> str:
    """`L1[0]` -> `L1_0_arena` (`_2`, `_3`, ... if the program has that name);
    `taken`: the names of the program's top-level buffers, if known (`share`
    keeps them for all its arenas: one listing of the program, not one per
    arena), the name chosen is added to it."""
    base = level.replace("[", "_").replace("]", "") + "_arena"
    if taken is None:
        taken = {op.buffer_name.data for op in block_ops(program.block) if type(op) is BufferOp}
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _index(value: int, before: Operation) -> arith.ConstantOp:
    # built as the lowering builds its index literals (one attribute per value,
    # `create`): xDSL's generic constructor was most of the pack (issue 30)
    c = index_constant(value)
    Rewriter.insert_op(c, InsertPoint.before(before))
    return c


def _plus(offset: SSAValue, base: int, before: RegionOp) -> SSAValue:
    """`offset + base`, computed before `before`: folded when `offset` is a
    literal, else an addition (named constants and loop variables stay
    readable: `i * 256 + 512`)."""
    owner = offset.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return _index(owner.value.value.data + base, before).result
    add = arith.AddiOp(offset, _index(base, before).result, IndexType())
    Rewriter.insert_op(add, InsertPoint.before(before))
    return add.result


def share(
    program: ProgramOp, packing: Packing, taken: set[str] | None = None
) -> tuple[BufferOp, dict[Operation, str]]:
    """Rewrite `program` so that `packing`'s buffers are regions of one
    arena; returns it with the packed buffer (its name) each of its regions
    was a region of.  `taken`: as `arena_name`'s."""
    origin: dict[Operation, str] = {}
    members = list(packing.offsets)  # in declaration order
    first = members[0]
    size = _index(packing.size, first)
    arena = BufferOp(
        arena_name(packing.level, program, taken),
        BufferType(MemLevelAttr(packing.level)),
        size.result,
        packing.align,
        [],
    )
    arena.location = first.location
    Rewriter.insert_op(arena, InsertPoint.before(first))
    for buf in members:
        base = packing.offsets[buf]
        for use in list(buf.result.uses):
            region = use.operation
            assert isinstance(region, RegionOp)
            if base:
                region.operands[1] = _plus(region.offset, base, region)
            region.operands[0] = arena.result
            origin[region] = buf.buffer_name.data
        old_size = buf.size.owner
        Rewriter.erase_op(buf)
        if isinstance(old_size, arith.ConstantOp) and not old_size.result.uses:
            Rewriter.erase_op(old_size)
    return arena, origin


@dataclass
class Packed:
    """A program whose arenas `nem-share-buffers` declared, not yet ordered."""

    program: ProgramOp
    limit: int | None
    """The live-token limit the ordering keeps to."""
    arenas: list[SSAValue]
    members: dict[Operation, str]
    """Each region of an arena -> the packed buffer it was a region of."""
    memos: ShapeMemos
    """The driver's answers by shape (`shape_memos`, D-HAZ-SYMBOLIC)."""
    unit_chars: UnitChars
    """The device's unit characteristics (the token fit's estimate, D-DEPS-SYNTH)."""

    def order(self) -> None:
        """Order the reuse (D-LOW-SHARE): only accesses of the arenas, and
        only pairs of different packed buffers, are new conflicts (each
        buffer was race-free, the rest of the program too, and ordering
        added for them keeps it so)."""
        from nem.passes.synthesize_deps import synthesize

        synthesize(
            self.program,
            self.limit,
            buffers=self.arenas,
            members=self.members,
            memos=self.memos,
            unit_chars=self.unit_chars,
        )


@dataclass(frozen=True)
class ShareBuffersPass(ModulePass):
    """Share storage between buffers of a level whose lifetimes do not overlap (D-LOW-SHARE).

    Options:
      level: L1 (every L1 and L1[k]; the default), "L1[k]" (quoted) or L2
      over-capacity-only: pack only the levels whose buffers do not fit the device (DEV-16)
      device: the target whose SEQ.max_active_tokens bounds live tokens (default: --device, else the program's directive)
      max-tokens: the live-token limit (overrides the device's)
      remarks: a remark per arena: the buffers packed and the bytes saved
      include-dirs: directories where device=NAME's file is found first (nem-opt -I adds its own)
    """

    name = "nem-share-buffers"

    level: str = "L1"
    over_capacity_only: bool = False
    """Pack only the levels whose buffers exceed the device's capacity (DEV-16)."""
    device: str | None = None
    max_tokens: int | None = None
    remarks: bool = False
    include_dirs: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for packed in self.pack(ctx, op):
            packed.order()

    def pack(
        self, ctx: Context, op: ModuleOp, plans: Mapping[ProgramOp, Plan] | None = None
    ) -> list[Packed]:
        """Declare the arenas (and report the remarks); the programs then
        need `Packed.order` to be race-free (`nem-compile` checks L1 in
        between: a program that still overflows is tiled again, and its
        ordering would be wasted).  `plans`: each program's packing as
        `estimate` computed it earlier (`nem-compile`, before ordering), used
        when the program still packs the same (`buffer_lifetimes.replan`)."""
        from nem.passes.device import target_device

        diags: list[Diagnostic] = []
        out = []
        for prog in list(programs(op)):
            device = target_device(ctx, prog, self.device, self.include_dirs)
            levels = self.levels(prog, device)
            old = plans.get(prog) if plans else None
            found = replan(prog, levels, old, _cycles(device))
            if self.over_capacity_only and (old is None or found.packings is not old.packings):
                found = _roomy(prog, found, device, _footprints(prog, found))[0]
            arenas: list[SSAValue] = []
            members: dict[Operation, str] = {}
            taken: set[str] | None = None
            for packing in found.packings:
                if taken is None:
                    taken = {
                        o.buffer_name.data for o in block_ops(prog.block) if type(o) is BufferOp
                    }
                arena, regions = share(prog, packing, taken)
                arenas.append(arena.result)
                members.update(regions)
                diags.append(_remark(packing, arena))
            if not arenas:
                continue
            limit = self.max_tokens
            if limit is None and device is not None:
                limit = device.max_active_tokens
            chars = device.unit_characteristics if device is not None else {}
            out.append(Packed(prog, limit, arenas, members, shape_memos(ctx), chars))
        report(ctx, diags if self.remarks else [])
        return out

    def levels(self, program: ProgramOp, device: Device | None) -> list[str]:
        """The levels of `program` this pass packs on `device`."""
        levels = selected_levels(self.level, program)
        if self.over_capacity_only:
            levels = _over_capacity(program, device, levels)
        return levels

    def estimate(self, program: ProgramOp, device: Device | None) -> tuple[Plan, dict[str, int]]:
        """`program`'s packing as `pack` would compute it now, and the bytes
        each level key would span once packed (`packed_footprints`): what
        `nem-compile` asks of the unordered program (D-COMPILE-L1); the plan
        goes to `pack` afterwards."""
        found = plan(program, self.levels(program, device), _cycles(device))
        foot = _footprints(program, found)
        if self.over_capacity_only:
            return _roomy(program, found, device, foot)
        return found, foot


def packed_footprints(
    program: ProgramOp, device: Device | None, option: str = "L1", over_capacity_only: bool = True
) -> dict[str, int]:
    """The bytes each level key of `program` would span once `pack` (with
    these options) packed it, as `capacity.memory_maps` lays the arenas and
    the other buffers out, computed without rewriting: `nem-compile` asks
    before ordering the program whether its L1 will fit (D-COMPILE-L1).
    Equal to the packed program's when the statements using buffers do not
    change in between (the ordering adds deps and waits only)."""
    share = ShareBuffersPass(level=option, over_capacity_only=over_capacity_only)
    return share.estimate(program, device)[1]


def _footprints(program: ProgramOp, found: Plan) -> dict[str, int]:
    """`packed_footprints` of `program` packed as `found` says."""
    from nem.analysis.capacity import all_buffers, buffer_instances, level_key, size_and_align

    arena_at = {}  # the first packed buffer in statement order -> its packing
    packed: set[BufferOp] = set()
    for packing in found.packings:
        arena_at[next(iter(packing.offsets))] = packing
        packed.update(packing.offsets)
    ev = Evaluator()
    items: dict[str, list[tuple[object, int, int]]] = {}
    for op in all_buffers(program.block):
        if op in arena_at:
            p = arena_at[op]
            items.setdefault(level_key(MemLevelAttr(p.level)), []).append((p, p.size, p.align))
        if op in packed:
            continue
        placed = size_and_align(op, ev)
        if placed is None:
            continue
        for c in range(buffer_instances(op, ev)):
            items.setdefault(level_key(op.result.type.level), []).append(((op, c), *placed))
    return {key: footprint(layout(lst)) for key, lst in items.items()}


def _roomy(
    program: ProgramOp, found: Plan, device: Device | None, foot: dict[str, int]
) -> tuple[Plan, dict[str, int]]:
    """`found` spread where its levels have room on `device` (`spread`: the
    buffers of neighbouring phases kept apart, D-LOW-SHARE), when the
    program then still fits every level it packs; else `found`.  With the
    footprints of the plan returned (`foot`: `found`'s)."""
    if device is None or not found.packings:
        return found, foot
    caps = {}
    room = {}
    for p in found.packings:
        key = level_key(MemLevelAttr(p.level))
        cap = caps[key] = capacity(device, key)
        if cap is not None and cap > foot.get(key, 0):
            room[p.level] = cap - foot.get(key, 0)
    roomy = spread(found, room)
    if roomy is found:
        return found, foot
    after = _footprints(program, roomy)
    if any(cap is not None and after.get(key, 0) > cap for key, cap in caps.items()):
        return found, foot
    return roomy, after


def _over_capacity(program: ProgramOp, device: Device | None, levels: list[str]) -> list[str]:
    """The levels of `levels` whose buffers exceed their capacity on
    `device` (the layout of D-DEV-CAP); without a device, nothing is known
    to overflow.  The memory maps are laid out once for all the levels
    (per level, DenseNet-121's eight L1[k] laid the program out eight times,
    twice per compile: issue 30)."""
    from nem.analysis.capacity import capacity, level_key, memory_maps

    if device is None or not levels:
        return []
    maps = memory_maps(program)
    out = []
    for level in levels:
        key = level_key(MemLevelAttr(level))
        limit = capacity(device, key)
        placed = maps.get(key, [])
        if limit is not None and max((p.end for p in placed), default=0) > limit:
            out.append(level)
    return out


def _remark(packing: Packing, arena: BufferOp) -> Diagnostic:
    n = len(packing.offsets)
    return Diagnostic(
        "remark",
        f"{n} buffers of {packing.level} share '{arena.buffer_name.data}' "
        f"({packing.size} bytes instead of {packing.separate}): {packing.saved} bytes saved "
        "(their lifetimes do not overlap, D-LOW-SHARE)",
        SourceLoc.of(arena),
    )


def _cycles(device: Device | None) -> Cycles | None:
    """The device's task cost estimate (`FinishTimes.cycles`, D-RT-COST) for
    `spread`'s buffers loaded ahead (`Lifetime.early`); None without a
    device."""
    if device is None:
        return None
    return FinishTimes(device.unit_characteristics, Evaluator()).cycles
