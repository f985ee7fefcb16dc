"""A constant staged once per engine for a run of fill tiles (decision
D-COMPILE-FILL-TILES).

A padded tensor's border is filled strip by strip (`pads`, D-COMPILE-PAD-
IN-PLACE), and each strip's `linalg.generic` is tiled like any op: every
tile fills a buffer of the engine's L1 with the constant and copies it out.

    %a = memref.alloc() : memref<6528xi8, 2>
    %v = memref.view %a[%c0][] : ... to memref<1x1x3x544xf32, 2>
    linalg.generic {...} outs(%v) { linalg.yield %cst : f32 }
    linalg.copy ins(%v) outs(%border_0)
    memref.dealloc %a
    %b = memref.alloc() : memref<6528xi8, 2>          (the next strip's tile,
    ...                                                same engine: fill, copy)

Each fill waits for the copy before it to have left its buffer (the L1
arena is reused), so an engine's border tiles run one after the other, a
fill and a copy each: ShuffleNet's 7x7 depthwise convolutions spent about
as long filling their input's border (four such rounds per engine) as
computing.  Here, in a run of consecutive fill tiles (nothing but fill
tiles and pure index or view ops between them), the tiles of one engine
(memory space), element type and constant, three or more (`MIN_SHARED`),
share one buffer: the largest
tile's, allocated and filled before the run's first tile and freed after
its engine's last copy; every other tile's copy reads a view of it, and
its own allocation and fill go.  The buffer holds the constant wherever a
copy reads it, so each copy moves the same bytes as before (bit-identical
results); the copies then only read one region and may all run at once.
No other buffer of that engine is allocated within the run, so the L1 it
needs is its largest tile's, as before.

On unless `CompileOptions.share_staged` says otherwise (`nem-compile
--no-share-staged`, D-COMPILE-SHARE-STAGED: staging the same bytes once).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from nem.compile.hoist import PURE, dealloc_of, staged_buffer
from nem.compile.nest_ir import as_operation, owner_op

MIN_SHARED = 3
"""The fewest tiles of one key a run shares one buffer among.  Two, measured
(session 61, npm_pro_x1): the nine light CNNs 8,611,363 -> 8,591,761 cycles
but convolutions within 2x of their bound 375 -> 367, DenseNet-121's 7x7
borders, two tiles per engine, then stored early beside the layer before
(their layer's busy cycles spread, 119 -> 108 of 121 within 2x); three keeps
the long chains, ShuffleNet's 7x7 borders of 544 channels, three or four
tiles per engine: see D-COMPILE-FILL-TILES."""


@dataclass(frozen=True)
class FillTile:
    """One tile of a constant fill: `alloc`, `view` of it, `fill` (a
    `linalg.generic` of no input writing the view with `value`, defined
    outside it), `copy` of the view out, `free` of the allocation."""

    alloc: ir.Operation
    view: ir.Operation
    fill: ir.Operation
    copy: ir.Operation
    free: ir.Operation
    value: ir.Value

    @property
    def ops(self) -> tuple[ir.Operation, ...]:
        return (self.alloc, self.view, self.fill, self.copy, self.free)

    @property
    def bytes(self) -> int:
        shape: list[int] = ir.MemRefType(self.alloc.results[0].type).shape
        return shape[0]

    def key(self) -> tuple[str, str, ir.Value]:
        """What tiles sharing one buffer have in common: the memory space,
        the element type, the constant."""
        view = ir.MemRefType(self.view.results[0].type)
        return str(view.memory_space), str(view.element_type), self.value


Positions = dict[ir.Operation, int]
"""Each op of one block and its index: read once per block (`runs`), since
`is_before_in_block` may renumber the block on each query after a move."""


def positions(block: ir.Block) -> Positions:
    return {as_operation(op): i for i, op in enumerate(block.operations)}


def fill_tile(copy: ir.Operation, at: Positions) -> FillTile | None:
    """The fill tile whose buffer `copy` (a `linalg.copy` of the block `at`
    numbers) copies out, if its source is one: a view of a fast-memory
    buffer (`hoist.staged_buffer`'s conditions) used only by one constant
    fill before the copy, the copy, and the allocation's one
    `memref.dealloc` after it."""
    view = owner_op(copy.operands[0])
    if view is None or view.name != "memref.view":
        return None
    alloc = staged_buffer(view)
    if alloc is None:
        return None
    free = dealloc_of(alloc)
    users = [u.owner for u in view.results[0].uses]
    if free is None or len(users) != 2 or len(list(alloc.results[0].uses)) != 2:
        return None
    fill = next((as_operation(u) for u in users if as_operation(u) != copy), None)
    if fill is None or fill.name != "linalg.generic" or len(fill.operands) != 1:
        return None
    body = fill.regions[0].blocks[0]
    ops = list(body.operations)
    if len(ops) != 1 or len(ops[0].operands) != 1:
        return None
    value = ops[0].operands[0]
    if isinstance(value.owner, ir.Block):  # a block argument: not a constant
        return None
    if fill not in at or free not in at:  # (in another block)
        return None
    if not at[fill] < at[copy] < at[free]:
        return None
    return FillTile(alloc, view, fill, copy, free, value)


def runs(block: ir.Block, at: Positions) -> list[list[FillTile]]:
    """The runs of `block`'s fill tiles (`at`: its positions): tiles with
    nothing between them but other fill tiles' ops and pure ops
    (`hoist.PURE`: views, constants, index arithmetic), in order."""
    tiles: dict[ir.Operation, FillTile] = {}
    for op in at:
        if op.name == "linalg.copy" and len(op.operands) == 2:
            tile = fill_tile(op, at)
            if tile is not None:
                tiles[op] = tile
    if len(tiles) < 2:
        return []
    member = {o for t in tiles.values() for o in t.ops}
    found: list[list[FillTile]] = []
    run: list[FillTile] = []
    for op in at:
        if op in tiles:
            run.append(tiles[op])
        elif op not in member and (op.name not in PURE or len(op.regions)):
            if len(run) > 1:
                found.append(run)
            run = []
    if len(run) > 1:
        found.append(run)
    return found


def share(run: list[FillTile], at: Positions) -> int:
    """Give each group of `run`'s tiles of one key (`FillTile.key`) one
    buffer (the module doc); returns how many fills went.  `at` numbers
    the block before any run of it is shared: sharing moves ops only within
    their run, so its order of a run's ops and the constants they use
    stays right."""
    groups: dict[tuple[str, str, ir.Value], list[FillTile]] = {}
    for tile in run:
        groups.setdefault(tile.key(), []).append(tile)
    first = min((tile.alloc for tile in run), key=at.__getitem__)  # the run's first op
    shared = [
        (group, max(group, key=lambda t: t.bytes))  # the first of the largest
        for group in groups.values()
        if len(group) >= MIN_SHARED
    ]
    # every kept tile moved before any tile goes: `first` may be one that goes
    # (an outside user's 2x2 Conv with pads [1, 0, 2, 1], session 61)
    for _, keep in shared:
        if keep.alloc != first:  # (else it is where it goes)
            for op in (keep.alloc, keep.view, keep.fill):
                op.move_before(first)
            _dominate(keep, first, at)
    gone = 0
    for group, keep in shared:
        for tile in group:
            if tile is keep:
                continue
            tile.view.operands[0] = keep.alloc.results[0]
            tile.fill.erase()
            tile.free.erase()
            tile.alloc.erase()
            gone += 1
        keep.free.move_after(group[-1].copy)
    return gone


def _dominate(keep: FillTile, first: ir.Operation, at: Positions) -> None:
    """Move the constants the moved tile uses (its view's byte shift, its
    fill's value) before `first` when they are defined after it in its
    block: constants are pure, so moving them up changes nothing."""
    for v in (*keep.view.operands[1:], keep.value):
        op = owner_op(v)
        if op is not None and at.get(op, -1) > at[first]:
            op.move_before(keep.alloc)


def share_fill_tiles(fn: ir.Operation) -> int:
    """`share` every run of fill tiles of `fn`'s blocks (those of its body
    and of the loops in it; not into linalg bodies); returns how many
    fills went."""
    blocks: list[ir.Block] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg."):
            return ir.WalkResult.SKIP  # a body of scalar ops
        for region in op.regions:
            blocks.extend(region.blocks)
        return ir.WalkResult.ADVANCE

    fn.walk(visit, ir.WalkOrder.PRE_ORDER)
    shared = 0
    for block in blocks:
        at = positions(block)
        shared += sum(share(run, at) for run in runs(block, at))
    return shared
