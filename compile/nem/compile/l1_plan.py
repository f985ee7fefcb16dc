"""What one tiled op keeps in each engine's L1, and tile sizes that fit it
(decision D-COMPILE-L1).

The tile sizes of D-COMPILE-TILES come from a model of the tile's footprint
(the boxes its affine accesses cover, doubled when pipelined).  What the
lowering then declares can be more: the peeled copies of a tile that does
not divide its loop (`transform.loop.peel` clones the promoted tile with its
own L1 buffers, all of them in the same top-level statement), buffers in
the bodies of nested pipelined loops (two slots each, or as many as `plan`
gives short tile loops: D-LOW-PIPE-BODY, D-LOW-PIPE), and the lowering's
scratch tiles (accumulators, intermediate results: D-LOW-ACCUM,
D-LOW-CAST-TREE, D-LOW-BCAST-OPERAND).

So each op is measured once tiled, on the IR itself: per fast memory space
(engine k's L1 is space 2 + k), the bytes of every L1 allocation the tiled
op holds, each rounded up to the 64-byte alignment the lowering gives it,
times its slots, plus the scratch the lowering may add for each compute op
writing there (`nem.compile.l1_scratch`), and the tiles a fused
convolution's broadcast epilogue and prologue inputs are made into, where
`fusion.finish` places them.  When that
exceeds `l1_size_bytes`, the op is tiled again
with its budget scaled down, until it fits or its tiles are single points
(`fit`).  Buffers of different ops are never live at the same time once
`nem-share-buffers` packs them (each op's buffers are used by its own
top-level statements only: D-LOW-SHARE), so an op that fits alone fits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from mlir import ir

from nem.compile.fusion import broadcast_inputs
from nem.compile.fusion_prologue import has_prologue, staged_into
from nem.compile.fusion_tiles import FUSE
from nem.compile.hoist import varies
from nem.compile.l1_scratch import ALIGN, COPIES, prologue_scratch, scratch, temporaries
from nem.compile.nest_ir import ops_named, owner_op, scf_trips
from nem.compile.plan import Plan
from nem.compile.target import FAST_SPACE
from nem.compile.tile_time import DMA_BYTES, NMU_MACS
from nem.compile.writers import VIEWS
from nem.passes.lowering.structure import WIDE, tile_window

if TYPE_CHECKING:
    from nem.dialect.device_model import Device

MAX_ROUNDS = 12
"""Re-tilings of one op before giving up (each at least halves its budget)."""
LOOPS = ("scf.for", "affine.for")


@dataclass(frozen=True)
class Need:
    """Bytes a tiled op needs in each fast memory space."""

    by_space: dict[int, int]

    def over(self, capacity: int) -> int | None:
        """The largest need above `capacity`, or None when every space fits."""
        worst = max(self.by_space.values(), default=0)
        return worst if worst > capacity else None


def _bytes(t: ir.MemRefType) -> int:
    """The bytes of a statically shaped memref, rounded up to ALIGN (0 for a
    dynamic shape: only the static allocations it views hold bytes)."""
    if not t.has_static_shape:
        return 0
    n: int = math.prod(t.shape)
    elem = t.element_type
    width = elem.width if hasattr(elem, "width") else 64  # index: 64 bits
    return -(-(n * max(width // 8, 1)) // ALIGN) * ALIGN


def _space(t: ir.Type) -> int | None:
    """The integer memory space of a memref type, or None (DDR: no space)."""
    if not isinstance(t, ir.MemRefType) or t.memory_space is None:
        return None
    space: int = ir.IntegerAttr(t.memory_space).value
    return space


def _in_loop(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.name in LOOPS:
            return True
        parent = parent.parent
    return False


def _top(op: ir.Operation, index: dict[ir.Operation, int]) -> int:
    """The position in `index` of the top-level op holding `op`."""
    cur = op
    while cur not in index:
        cur = cur.parent.operation
    return index[cur]


def _alloc_of(v: ir.Value) -> ir.Operation | None:
    """The allocation whose bytes the memref `v` views (None: not an allocation)."""

    op = owner_op(v)
    while op is not None and op.name in VIEWS:
        op = owner_op(op.operands[0])
    return op if op is not None and op.name in ("memref.alloc", "memref.alloca") else None


def measure(
    roots: Iterable[ir.Operation], pipeline: bool, strip: tuple[str, ...] = (), window: int = 2
) -> Need:
    """The L1 bytes per fast memory space of the ops `roots` (one tiled op
    and everything its tiling made, in order), as the module doc counts them:
    each allocation is live over the top-level ops that use it (through its
    views), as `nem-share-buffers` sees its buffer (D-LOW-SHARE); each
    compute op adds its scratch at its top-level op; the need is the peak
    over the top-level ops.  `strip`: attributes removed from the linalg
    ops on the way (the caller's markers: no walk of its own for them).
    `window`: the slots of a pipelined loop's body (`plan`'s)."""
    roots = [r.operation if isinstance(r, ir.OpView) else r for r in roots]
    index = {op: k for k, op in enumerate(roots)}
    live: dict[int, list[int]] = {}

    def add(space: int | None, n: int, first: int, last: int) -> None:
        if space is not None and space >= FAST_SPACE and n:
            row = live.setdefault(space, [0] * (len(roots) + 1))
            row[first] += n
            row[last + 1] -= n

    def slots(op: ir.Operation) -> int:
        return window if pipeline and _in_loop(op) else 1

    def span(v: ir.Value, at: int) -> tuple[int, int]:
        first = last = at
        stack = [v]
        while stack:
            for use in stack.pop().uses:
                user = use.owner
                user = user.operation if isinstance(user, ir.OpView) else user
                k = _top(user, index)
                first, last = min(first, k), max(last, k)
                if user.name in VIEWS:
                    stack.extend(user.results)
        return first, last

    def scratch_bytes(v: ir.Value) -> int:
        t = ir.MemRefType(v.type)
        if t.has_static_shape:
            return _bytes(t)
        alloc = _alloc_of(v)  # a peeled tile's dynamic view: its buffer's bytes
        return _bytes(ir.MemRefType(alloc.results[0].type)) if alloc is not None else 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name.startswith("linalg."):
            if name not in COPIES:
                outs = [v for v in op.operands if _space(v.type) is not None][-1:]
                at = _top(op, index)
                for v in outs:
                    add(
                        _space(v.type),
                        scratch(scratch_bytes(v), temporaries(op)) * slots(op),
                        at,
                        at,
                    )
                    if FUSE in op.attributes:
                        add(
                            _space(v.type),
                            scratch_bytes(v) * _broadcast_slots(op, pipeline, window),
                            at,
                            at,
                        )
                if FUSE in op.attributes and (pro := prologue_scratch(op)) is not None:
                    x, tree, ys, copy = pro  # (from its input's staging to the tile)
                    first = _top(copy, index) if copy is not None else at
                    # (each broadcast tile is made where its staging copy is:
                    # outside the loops once hoisted, else in each step's slot)
                    held = sum(
                        window if pipeline and cp is not None and _in_loop(cp) else 1
                        for cp in map(staged_into, ys)
                    )
                    add(
                        _space(x.type),
                        scratch(scratch_bytes(x), tree) * slots(op) + scratch_bytes(x) * held,
                        min(first, at),
                        max(first, at),
                    )
            if strip:  # after `_top`: an op hashes by its attributes (`index`)
                attributes = op.attributes
                for key in strip:
                    if key in attributes:
                        del attributes[key]
            # its body holds scalar ops only (nothing counted): not walked
            return ir.WalkResult.SKIP
        if name in ("memref.alloc", "memref.alloca"):
            v = op.results[0]
            at = _top(op, index)
            add(_space(v.type), _bytes(ir.MemRefType(v.type)) * slots(op), *span(v, at))
        elif name == "affine.for" and not _has_loop(op):
            at = _top(op, index)
            for v in {s.operands[1] for s in ops_named(op, "affine.store")}:
                add(_space(v.type), scratch(scratch_bytes(v), temporaries(op)) * slots(op), at, at)
        return ir.WalkResult.ADVANCE

    for root in roots:
        # two thirds of a tiled op's top-level ops are the tiling's index
        # constants (41,676 of 63,844 on DenseNet-121): no regions, nothing
        # counted, so not walked (a walk calls back into Python for each)
        if root.name != "arith.constant":
            root.walk(visit, ir.WalkOrder.PRE_ORDER)
    peaks = {}
    for space, row in live.items():
        total, peak = 0, 0
        for delta in row:
            total += delta
            peak = max(peak, total)
        peaks[space] = peak
    return Need(peaks)


def plan(
    roots: Sequence[ir.Operation],
    pipeline: bool,
    capacity: int,
    dmas: int,
    macs: int,
    nmus: int,
    strip: tuple[str, ...] = (),
) -> tuple[Need, int]:
    """What `measure` counts of the tiled op `roots`, with its innermost tile
    loops' iterations in flight as `structure.tile_window` says for an
    engine of `nmus` NMUs where the op is compute bound and their slots fit
    `capacity`, the loops marked `structure.WIDE` for the lowering; else
    two.  Returns the need and the window (0: two).  One window for all of
    them, the largest: the engine parts' loops jam only with the same
    `@max_in_flight` (D-NEM-JAM-ENGINES).  Checked here, not left to `fit`,
    which would shrink the tiles for a wider window instead
    (D-COMPILE-TILE-TIME, sessions 35, 51 and 52)."""
    inner = innermost_loops(roots)
    window = max((tile_window(scf_trips(loop) or 0, nmus) for loop in inner), default=2)
    if pipeline and window > 2 and compute_bound(inner, macs, dmas):
        need = measure(roots, pipeline, strip, window)
        if need.over(capacity) is None:
            mark(inner, window)
            return need, window
        strip = ()  # stripped
    return measure(roots, pipeline, strip), 0


def compute_bound_op(op: ir.Operation, macs: int, nmus: int, dmas: int) -> bool:
    """Whether op `op` of `macs` multiply-adds keeps its engines' `nmus` NMUs
    at least as long as its operands, each moved once, keep their `dmas`
    DMAs, at the tile estimate's rates (`tile_time`): the roofline's bound
    of its least work is the NMUs' (D-RT-ROOFLINE).  Such an op is re-tiled
    for its measured overshoot, not at least half its budget (`fit`,
    D-COMPILE-L1 session 61): VGG-19's 224x224 3x3 convolution of 64
    channels, whose fused epilogue's tiles the footprint model does not
    count, fits L1 in tiles of all 64 output channels (its weights loaded
    once) that the halving skipped for 32 (loaded per tile): 320,125 ->
    230,590 cycles, 1.42 -> 1.02 of its bound."""
    memrefs = [v.type for v in op.operands if isinstance(v.type, ir.MemRefType)]
    moved = sum(_bytes(ir.MemRefType(t)) for t in memrefs)
    return _nmus_bind(macs, nmus, moved, dmas)


def _nmus_bind(macs: int, nmus: int, moved: int, dmas: int) -> bool:
    """Whether `macs` multiply-adds over `nmus` NMUs take at least as long
    as `moved` bytes over `dmas` DMAs, at the tile estimate's rates."""
    return macs > 0 and -(-macs // (NMU_MACS * nmus)) * DMA_BYTES * dmas >= moved


def compute_bound(loops: Sequence[ir.Operation], macs: int, dmas: int) -> bool:
    """Whether the tile loops `loops` keep their engines' NMUs at least as
    long as their copies keep the engines' `dmas` DMAs each, at the tile
    estimate's rates (`tile_time`): `macs`, the tiled op's multiply-adds,
    against the bytes the loops' copies move (`moved`), both per engine
    part.  Only such loops gain from more iterations in flight (an op of no
    multiply-adds is not one): a DMA-bound body's copies already fill the
    DMAs, and each extra iteration's tokens are taken from the copies
    around it (D-COMPILE-TILE-TIME, session 37) -- but for a convolution
    with a prologue (D-COMPILE-FUSE-L1) whose stores move at least what its
    loads do (session 65): its prologue's ops lengthen each iteration's
    chain between its loads and its stores, and with two slots iteration
    k + 2's loads wait for iteration k's stores, the DMAs idle meanwhile
    (DenseNet-121's first two 1x1 convolutions, 56x56 -> 128 channels: 42%
    busy, 2.39x their bound with two slots; about 2,700 cycles fewer each
    with three).  Without a prologue such a layer's DMAs are busy (ResNet-50's
    64 -> 256 channel 1x1 convolutions at 56x56: 96%, 3,024 cycles slower
    each with three)."""
    loads, stores = moved(loops)
    if macs > 0 and stores >= loads and _prologue_in(loops):
        return True
    return _nmus_bind(macs, 1, loads + stores, dmas)


def _prologue_in(loops: Sequence[ir.Operation]) -> bool:
    """Whether a fused convolution with a prologue is tiled in `loops`."""
    found = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal found
        found = found or has_prologue(op)
        return ir.WalkResult.SKIP if op.name.startswith("linalg.") else ir.WalkResult.ADVANCE

    for loop in loops:
        loop.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def moved(loops: Sequence[ir.Operation]) -> tuple[int, int]:
    """The bytes the copies of the tile loops `loops` load into L1 and store
    out of it (each copy's static side, the DDR slice, times the trips of
    the loops around it; a copy between L1 buffers counts as a load)."""
    loads = stores = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal loads, stores
        if op.name in ("linalg.copy", "linalg.transpose"):
            n = max(_bytes(ir.MemRefType(v.type)) for v in op.operands)
            if (_space(op.operands[1].type) or 0) < FAST_SPACE:
                stores += n * runs
            else:
                loads += n * runs
        return ir.WalkResult.SKIP if op.name.startswith("linalg.") else ir.WalkResult.ADVANCE

    for loop in loops:
        runs, at = 1, loop
        while at is not None:
            trips = scf_trips(at)
            runs *= 1 if trips is None else trips
            at = at.parent
        loop.walk(visit, ir.WalkOrder.PRE_ORDER)
    return loads, stores


def mark(loops: Iterable[ir.Operation], window: int) -> None:
    """Mark the tile loops `loops` `structure.WIDE`: `window` iterations in flight."""
    for loop in loops:
        loop.attributes[WIDE] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), window)


def innermost_loops(roots: Iterable[ir.Operation]) -> list[ir.Operation]:
    """The `scf.for` loops of `roots` with no loop inside (the tile loops
    the lowering pipelines, D-LOW-PIPE-BODY)."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.for" and not _has_loop(op):
            found.append(op)
        return ir.WalkResult.SKIP if op.name.startswith("linalg.") else ir.WalkResult.ADVANCE

    for root in roots:
        if root.name != "arith.constant":
            root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def strip(roots: Iterable[ir.Operation], keys: tuple[str, ...]) -> None:
    """Delete attributes `keys` from the linalg ops in `roots`, as
    `measure(roots, .., strip=keys)` does, without measuring (a need known
    already)."""

    def visit(op: ir.Operation) -> ir.WalkResult:
        if not op.name.startswith("linalg."):
            return ir.WalkResult.ADVANCE
        attributes = op.attributes
        for key in keys:
            if key in attributes:
                del attributes[key]
        return ir.WalkResult.SKIP  # its body holds scalar ops

    for root in roots:
        if root.name != "arith.constant":
            root.walk(visit, ir.WalkOrder.PRE_ORDER)


def _broadcast_slots(op: ir.Operation, pipeline: bool, window: int) -> int:
    """The L1 slots of output-sized tiles that `fusion.finish` broadcasts the
    fused tile `op`'s per-channel inputs into (`fusion.broadcast_inputs`):
    each is hoisted out of every loop around `op` that its source does not
    vary in (`hoist.hoist_op`), so it is in a loop, `window` slots when
    pipelined, only if its source varies in the outermost one (the channel
    loop when it is outside the spatial ones; a tile of `--no-hoist`).
    The staged slice each is broadcast from is counted as allocated here,
    although `finish` broadcasts from its DDR source and drops it when the
    tile was its only reader (a few hundred bytes over, never under)."""
    outer, parent = None, op.parent
    while parent is not None:
        if parent.name in LOOPS:
            outer = parent
        parent = parent.parent
    return sum(
        window if pipeline and outer is not None and varies(y, outer) else 1
        for y in broadcast_inputs(op)
    )


def _has_loop(loop: ir.Operation) -> bool:
    return any(o.operation.name in LOOPS for o in loop.regions[0].blocks[0].operations)


class DoesNotFit(Exception):
    """No tile sizes of an op fit L1 (raised by `fit` with the sizes tried last;
    `too_big` makes it the compile's error)."""

    def __init__(self, need: int, capacity: int, sizes: Sequence[int]):
        super().__init__(
            f"needs {need} bytes of L1 with tiles of {list(sizes)}, {capacity} available"
        )
        self.need, self.capacity, self.sizes = need, capacity, list(sizes)


def fit(
    budget: int,
    capacity: int,
    sizes_for: Callable[[int], list[int]],
    tile: Callable[[list[int]], Need],
    halve: bool = True,
) -> list[int]:
    """Tile sizes whose measured need fits `capacity`: `tile(sizes)` tiles the
    op (undoing the previous attempt) and measures it; the budget that
    `sizes_for` turns into sizes starts at `budget` and is scaled by the
    overshoot (at least halved unless not `halve`, and halved again while
    the sizes do not change) until the op fits.  Raises DoesNotFit when no
    budget gives smaller sizes."""
    sizes = sizes_for(budget)
    for _ in range(MAX_ROUNDS):
        need = tile(sizes).over(capacity)
        if need is None:
            return sizes
        scaled = int(budget * capacity / need * 0.9)
        budget = max(min(budget // 2, scaled) if halve else scaled, 1)
        smaller = sizes_for(budget)
        while smaller == sizes and budget > 1:  # the footprint model's sizes step
            budget //= 2  # coarsely: shrink until they move
            smaller = sizes_for(budget)
        if smaller == sizes:
            raise DoesNotFit(need, capacity, sizes)
        sizes = smaller
    need = tile(sizes).over(capacity)
    if need is None:
        return sizes
    raise DoesNotFit(need, capacity, sizes)


def one_tile_retiled(
    plan: Plan, budget: int, capacity: int, tile: Callable[[list[int]], Need]
) -> Plan:
    """`plan`, or where `tile_cost.channel_cut` cut a part of one tile
    (`plan.one_tile`) and that one tile does not fit `capacity` once
    measured (`tile`), the plan of the tiles `fit` makes of it where
    `plan.retiled` prefers them to the cut (D-COMPILE-TILE-TIME, session
    60): the cut was priced against a one tile that never runs."""
    whole, prefer = plan.one_tile, plan.retiled
    if whole is None or prefer is None or tile(whole).over(capacity) is None:
        return plan
    uncut = plan.whole(budget)
    assert uncut.resize is not None
    try:
        sizes = fit(budget, capacity, uncut.resize, tile)
    except DoesNotFit:
        return plan
    return uncut if prefer(sizes) else plan


def too_big(
    op: ir.Operation,
    e: DoesNotFit,
    device: Device,
    extents: Sequence[int],
    parts: int = 1,
    forced: Sequence[int] | None = None,
    fitting: Sequence[int] | None = None,
) -> Exception:
    """The compile error of an op whose smallest tiles do not fit L1, led by
    the ONNX node it came from (`m.onnx: node 3 'conv1' (Conv)`, the
    importer's location) or its location, naming the op and its loops: a
    node lowers to several loop nests (a convolution's, its bias fill's),
    which one `--tile-sizes` list sizes alike.  `extents`: the loops the
    sizes cut, those of one of the `parts` the op is split into over the
    engines (D-COMPILE-ENGINES: the same sizes can fit a part and not the
    whole).  `forced`: the user's `--tile-sizes`, which are never shrunk:
    the message says the sizes are theirs, and the fix offers `fitting`
    (`smaller_fit`'s sizes, measured to fit this op alone) with the user's
    entries past this op's loops kept (session 49: an outside user's forced
    sizes were refused "even with tile sizes" with a fix naming only a
    bigger device)."""
    from nem.compile.errors import CompileError

    tiles = [min(s, x) for s, x in zip(e.sizes, extents)]
    if forced is not None:
        whole = ": a loop with no entry is whole" if len(forced) < len(tiles) else ""
        sizes = f"--tile-sizes {_listed(forced)} (tiles {tiles}{whole})"
        fix = (
            f"fix: --tile-sizes {_option(forced, fitting, extents)} fits this op alone "
            "(measured; the option sizes every op's loops, so another may need smaller ones)"
            if fitting is not None
            else "fix: pass smaller --tile-sizes"
        ) + ", or leave --tile-sizes out to let the compiler choose per op"
    else:
        sizes = f"tiles {tiles}, the smallest its L1 budget reaches"
        fix = "fix: target a device with a larger L1, or split the node into smaller ones"
    part = f" on each of the {parts} parts it is split into over the engines" if parts > 1 else ""
    nest = "loop nest" if op.name == "affine.for" else op.name  # (the affine route's)
    return CompileError(
        "tile",
        (
            f"{_where(op)}: error: not supported: its {nest} over loops {list(extents)}"
            f"{part} needs {e.need} bytes of L1 with {sizes}, and device '{device.name}' has "
            f"l1_size_bytes = {e.capacity} [DEV-16]\n{fix} (decision D-COMPILE-L1)"
        ),
    )


def smaller_fit(
    budget: int,
    capacity: int,
    forced: Sequence[int],
    sizes: Sequence[int],
    own: Callable[[int], list[int]],
    tile: Callable[[list[int]], Need],
    narrow: Collection[int] = frozenset(),
    extents: Sequence[int] = (),
) -> list[int] | None:
    """Tile sizes no larger than `sizes` (the user's `--tile-sizes`,
    `forced`, padded with whole loops; they do not fit) that fit
    `capacity`, or None: `fit` on the compiler's own sizes (`own`) capped
    by them, first in the loops the user gave no entry for only (their
    entries kept), then in all; the loops `narrow` (the reduction of an f16
    or bf16 result, which no tile may cut: `refuse_narrow_cut`) whole, at
    their `extents`."""
    given = len(forced)
    whole = {d: max(sizes[d], extents[d]) for d in narrow}

    def capped(b: int, start: int) -> list[int]:
        mine = own(b)
        return [whole.get(d, s if d < start else min(s, mine[d])) for d, s in enumerate(sizes)]

    for start in (given, 0):
        try:
            return fit(budget, capacity, partial(capped, start=start), tile)
        except DoesNotFit:
            continue
    return None


def _listed(sizes: Sequence[int]) -> str:
    return ",".join(map(str, sizes))


def _option(forced: Sequence[int], sizes: Sequence[int], extents: Sequence[int]) -> str:
    """`sizes` as a --tile-sizes value: the user's own entries (`forced`)
    where the fit kept them (clamped to the loop: as written) and past the
    op's loops, trailing whole loops the user gave no entry for left out."""
    n = len(sizes)
    while n > max(len(forced), 1) and sizes[n - 1] >= extents[n - 1]:
        n -= 1
    kept = [f if s >= min(f, x) else s for f, s, x in zip(forced, sizes, extents)]
    return _listed([*kept, *sizes[len(kept) : n], *forced[n:]])


def refuse_narrow_cut(
    op: ir.Operation,
    narrow: frozenset[int],
    extents: Sequence[int],
    sizes: Sequence[int],
    device: Device,
    forced: Sequence[int] | None = None,
) -> None:
    """Raise the compile error of tile sizes that cut one of the loops
    `narrow` (`engines.narrow_sums`: a reduction of an f16 or bf16 result;
    a size of 0 or the extent: not cut).  The tiles would each round their
    partial sum to that type and add the roundings, where NEM's f16
    `matmul`/`conv2d` sums wide and rounds once (D-NUM-LINEAR-FLOAT), and no
    NEM opcode writes an f16 product into an f32 accumulator
    (D-COMPILE-TILES, session 28).  Where the user's `--tile-sizes`
    (`forced`) cut it, the fix gives them with the reduction loops whole,
    not the device's L1 (an outside user, session 62: a 13-long f16 Gemm
    and a 7-long linear Resize under `--tile-sizes 2,3,5` were told of
    npm_pro_x1's 1 MiB of L1); a Resize says it is a matrix product."""
    from nem.compile.errors import CompileError

    cut = [d for d in sorted(narrow) if 0 < sizes[d] < extents[d]]
    if not cut:
        return
    d, where = cut[0], _where(op)
    mine = [e for e in cut if forced is not None and e < len(forced) and forced[e] == sizes[e]]
    if mine:
        assert forced is not None
        whole = [extents[e] if e in mine else f for e, f in enumerate(forced)]
        fix = (
            f"give --tile-sizes {_listed(whole)} (reduction loop{'s' * (len(mine) > 1)} "
            f"{', '.join(map(str, mine))} whole), or compute the node in f32 (an f32 model)"
        )
    else:
        fix = (
            "compute the node in f32 (an f32 model), target a device whose L1 holds one "
            f"output's whole reduction (device '{device.name}' has l1_size_bytes = "
            f"{device.topology.l1_size_bytes}), or give --tile-sizes that leave the reduction "
            "loops whole"
        )
    resize = " (a Resize is one matrix product per resized axis, D-COMPILE-RESIZE)"
    raise CompileError(
        "tile",
        (
            f"{where}: error: not supported: its tiles cut reduction loop {d} "
            f"({extents[d]} iterations) into pieces of {sizes[d]} (tile sizes {list(sizes)}), "
            "and its result is f16 or bf16: each piece's partial sum would be rounded to it, "
            "where NEM's f16 matmul and conv2d sum the whole reduction and round once"
            f"{resize if where.endswith('(Resize)') else ''} "
            f"[D-NUM-LINEAR-FLOAT]\nfix: {fix} (decision D-COMPILE-TILES)"
        ),
    )


def _where(op: ir.Operation) -> str:
    """The ONNX node `op` came from (`m.onnx: node 3 'conv1' (Conv)`, read
    from the importer's location, D-COMPILE-LOC), or its location and name."""
    from nem.frontends.onnx.locations import describe

    node = describe(str(op.location))
    return node if node is not None else f"{op.location} ({op.name})"
