"""Device-aware tile sizes, and the affine tiling route.

Tile sizes come from the target's L1 size (`nem.devices`, never re-typed):
a loop band's tile is chosen so that everything one step keeps in L1 fits,
with double buffering (D-COMPILE-TILES):

    2 * (footprint(tile) + output_footprint(tile)) <= l1_size_bytes    (pipelined)
        footprint(tile) + output_footprint(tile)  <= l1_size_bytes    (--no-pipeline)

`footprint` is the bytes of every memref box the tile touches (per memref,
per dimension the extent of its affine index expressions over the tile);
the second output term is the scratch tile the lowering may need for an
accumulation or an intermediate elementwise result (D-LOW-ACCUM,
D-LOW-RAISE).  Starting from the whole iteration space, the outermost tile
dimension larger than 1 is halved (rounding up) until the tile fits; tiles
that do not divide their loop are peeled by the lowering (D-LOW-PEEL).
Sizes within the same budget that move far fewer bytes replace the halving
ones (`nem.compile.tile_cost`, D-COMPILE-TILE-COST: a convolution keeps its
weight tile for many output pixels); on the transform route a convolution's
or matmul's sizes are those with the fewest estimated timed cycles
(`nem.compile.tile_time`, D-COMPILE-TILE-TIME).

The affine route (what `lower-to-nem` takes today) tiles each loop nest on
its own: the nest is moved into a temporary function, upstream's
`-affine-loop-tile{tile-sizes=...}`, `-affine-data-copy-generate` (DMAs into
fast memory space 2, capacity the L1 budget) and
`-affine-pipeline-data-transfer` run on it in-process (PassManager), and the
result moves back.  Upstream's `-affine-loop-tile` applies one list of sizes
to every band of a function, hence the isolation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from mlir import ir
from mlir.passmanager import PassManager

if TYPE_CHECKING:
    from nem.compile.options import CompileOptions
    from nem.dialect.device_model import Device

from nem.compile.nest_ir import (
    Band,
    Isolated,
    access_box,
    analyze_band,
    batch_loops,
    const_bound,
    top_level_nests,
)
from nem.compile.target import FAST_SPACE


def footprint(band: Band, sizes: Sequence[int]) -> tuple[int, int]:
    """(bytes of every memref box one tile of `sizes` touches, bytes of the
    boxes it writes)."""
    ivs = {loop.regions[0].blocks[0].arguments[0]: (0, s - 1) for loop, s in zip(band.loops, sizes)}
    ivs.update({v: (0, e - 1) for v, e in band.inner.items()})
    boxes: dict[ir.Value, list[int]] = {}
    written: set[ir.Value] = set()
    for acc in band.accesses:
        ext = [hi - lo + 1 for lo, hi in access_box(acc, ivs)]
        box = boxes.setdefault(acc.memref, [0] * len(ext))
        for i, x in enumerate(ext):
            box[i] = max(box[i], x)
        if acc.write:
            written.add(acc.memref)

    def nbytes(mem: ir.Value) -> int:
        width: int = ir.MemRefType(mem.type).element_type.width
        n = 1
        for x in boxes[mem]:
            n *= x
        return n * max(width // 8, 1)

    total = sum(nbytes(m) for m in boxes)
    return total, sum(nbytes(m) for m in written)


def fits(band: Band, sizes: Sequence[int], budget: int) -> bool:
    """Whether one tile step of `sizes` keeps within `budget` bytes of L1."""
    total, out = footprint(band, sizes)
    return total + out <= budget


def choose_tile_sizes(band: Band, budget: int) -> list[int]:
    """Halve the outermost tile dimension larger than 1 until `footprint +
    output <= budget`: tiles of whole inner rows first, so that DMAs stay
    contiguous and consecutive tiles touch disjoint bytes (what lets the
    lowering keep two iterations in flight, D-LOW-PIPE).  A batch loop
    (`batch_loops`) is tiled by 1."""
    units = batch_loops(band)
    sizes = [1 if i in units else e for i, e in enumerate(band.extents)]
    while True:
        if fits(band, sizes, budget) or max(sizes) <= 1:
            return sizes
        k = next(i for i, s in enumerate(sizes) if s > 1)
        sizes[k] = -(-sizes[k] // 2)


# --------------------------------------------------------------------------
# per-nest upstream passes


def band_sizes(
    band: Band,
    options: CompileOptions,
    budget: int,
    parts: dict[int, list[int]] | None = None,
    dmas: int = 1,
) -> list[int]:
    """The tile sizes of one band: the `--tile-sizes` override (missing
    entries: the whole loop) or the L1-derived choice: the halving rule's,
    or sizes moving fewer bytes within the same budget (D-COMPILE-TILE-COST;
    on the transform route, a convolution's or matmul's by estimated cycles,
    D-COMPILE-TILE-TIME, its copies over `dmas` DMAs per engine; `parts`:
    loop -> extents of the parts an engine split cuts it into)."""
    if options.tile_sizes:
        given = list(options.tile_sizes)[: len(band.extents)]
        return [min(s, e) for s, e in zip(given + band.extents[len(given) :], band.extents)]
    from nem.compile import tile_cost

    halving = choose_tile_sizes(band, budget)
    timed = options.route == "transform"
    return tile_cost.search(band, budget, halving, parts, timed=timed, dmas=dmas)


def sizer(
    band: Band, options: CompileOptions, budget: int, dmas: int = 1
) -> Callable[[dict[int, list[int]] | None], list[int]]:
    """`band_sizes` of `band` as a function of `parts` alone, each answer
    computed once: the engine split asks it for the whole nest and for each
    candidate split's part (D-COMPILE-ENGINES), the plan again for the split
    it takes, and the search is the dearest step of choosing a split."""
    known: dict[tuple[tuple[int, tuple[int, ...]], ...], list[int]] = {}

    def sizes(parts: dict[int, list[int]] | None) -> list[int]:
        key = tuple(sorted((k, tuple(v)) for k, v in (parts or {}).items()))
        if key not in known:
            known[key] = band_sizes(band, options, budget, parts, dmas)
        return list(known[key])

    return sizes


def l1_budget(device: Device, pipeline: bool) -> int:
    """Bytes one tile step may keep in L1 (half of it when double-buffered)."""
    l1 = device.topology.l1_size_bytes
    return l1 // 2 if pipeline else l1


def tile_module(
    module: ir.Module,
    entry: ir.Operation,
    device: Device,
    options: CompileOptions,
    engines: int,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[tuple[list[int], list[int]]]:
    """The affine route on the bufferized `module` (in place): each linalg
    op becomes an affine nest (`-convert-linalg-to-affine-loops`), and each
    top-level nest is tiled, staged in L1 and pipelined on its own, in the
    L1 of engine `index mod engines` (fast memory space 2 + k: nests spread
    round-robin over the engines, D-COMPILE-ENGINES).  Returns (extents,
    tile sizes) per nest."""
    PassManager.parse("builtin.module(func.func(convert-linalg-to-affine-loops))").run(
        module.operation
    )
    from nem.compile.checkpoints import checkpoint
    from nem.compile.engines import (
        Clock,
        choose_split,
        mac_bytes,
        preloaded_memrefs,
        split_nest,
    )

    checkpoint("affine loops", module)  # the stage bisector's steps (nem.compile.bisect)

    plan: list[tuple[list[int], list[int]]] = []
    work: list[tuple[ir.Operation, Band, int, int]] = []  # nest, band, engine, parts
    turn, clock = 0, Clock.start(engines)
    preloaded = preloaded_memrefs(entry)
    per_mac = mac_bytes(device.units("DMA"), device.units("NMU"))
    budget = l1_budget(device, options.pipeline)
    todo = list(top_level_nests(entry))
    while todo:
        root = todo.pop(0)
        band = analyze_band(root)
        if band is None:
            continue
        split, clock = choose_split(
            band, engines, preloaded, clock, turn % engines, per_mac, sizer(band, options, budget)
        )
        if split is None:
            work.append((root, band, turn % engines, 1))
            turn += 1
            continue
        nests = split_nest(root, band, split)
        if split.partials is not None:
            # the sum of the partials: split over the engines as any
            # elementwise nest (D-COMPILE-ENGINES, session 28)
            todo.insert(0, nests.pop()[0])
        for part, k in nests:
            part_band = analyze_band(part)
            assert part_band is not None  # constant bounds, affine accesses
            work.append((part, part_band, k, len(nests)))
    checkpoint("engine split", module)
    for done, (root, band, engine, parts) in enumerate(work):
        if progress is not None:
            progress("nests tiled", done, len(work))
        where = f"{root.location}, engine {engine}"
        sizes, passes = _tile_nest(root, FAST_SPACE + engine, device, options, parts)
        plan.append((band.extents, sizes))
        checkpoint(
            f"nest {done + 1}/{len(work)}",
            module,
            f"{where}, tile sizes {sizes}, passes {passes.replace(',', ', ')}",
        )
    PassManager.parse("builtin.module(canonicalize,cse)").run(module.operation)
    return plan


def _tile_nest(
    root: ir.Operation, space: int, device: Device, options: CompileOptions, parts: int = 1
) -> tuple[list[int], str]:
    """Tile the nest `root` (one of `parts` of a nest split over the
    engines), stage its tiles in fast memory space `space` and pipeline
    them, with tile sizes whose measured L1 need fits the device
    (D-COMPILE-L1: tiled again from a copy with a smaller budget while it
    does not); returns the sizes and the passes run."""
    from nem.compile import dma_strides, l1_plan
    from nem.compile.engines import narrow_sums

    with Isolated(root) as iso:
        iso.snapshot()
        assert iso.spare is not None
        spare = next(
            o.operation
            for o in iso.spare.regions[0].blocks[0].operations
            if o.operation.name == "affine.for"
        )
        band = analyze_band(spare)  # of the copy, which the passes never touch
        assert band is not None, "a nest analyze_band took"

        def tile(sizes: list[int]) -> l1_plan.Need:
            iso.restore()
            iso.run(_nest_passes(band, sizes, space))
            # upstream's copy DMAs miss strides across unit dimensions
            dma_strides.repair(iso.fn)  # (D-COMPILE-DMA-STRIDES)
            if options.pipeline:
                iso.run(PIPELINE)
            return l1_plan.measure(iso.ops(), options.pipeline)

        budget, capacity = l1_budget(device, options.pipeline), device.topology.l1_size_bytes
        try:
            sizes = l1_plan.fit(budget, capacity, lambda b: band_sizes(band, options, b), tile)
        except l1_plan.DoesNotFit as e:
            forced, own = options.tile_sizes, replace(options, tile_sizes=None)
            fitting = (
                l1_plan.smaller_fit(
                    budget,
                    capacity,
                    forced,
                    e.sizes,
                    lambda b: band_sizes(band, own, b),
                    tile,
                    narrow_sums(band),
                    band.extents,
                )
                if forced
                else None
            )
            raise l1_plan.too_big(spare, e, device, band.extents, parts, forced, fitting) from None
        l1_plan.refuse_narrow_cut(
            spare, narrow_sums(band), band.extents, sizes, device, options.tile_sizes
        )
        run = [_nest_passes(band, sizes, space), "(dma_strides.repair)"]
        return sizes, ",".join(run + [PIPELINE] * options.pipeline)


PIPELINE = "affine-pipeline-data-transfer"


def _nest_passes(band: Band, sizes: list[int], space: int) -> str:
    """The upstream passes tiling one nest by `sizes` and staging its tiles
    in memory space `space`."""
    passes = []
    if any(const_bound(loop, "lowerBoundMap") for loop in band.loops):
        # an engine's part of a split nest (nem.compile.engines): loops from 0,
        # the offset folded into the indices
        passes.append("affine-loop-normalize,canonicalize")
    if sizes != band.extents:
        passes.append("affine-loop-tile{tile-sizes=" + ",".join(map(str, sizes)) + "}")
    # copies at the depth where one tile fits: inside the tile loops
    # (one KiB of slack: upstream's count of a footprint that fills its
    # KiBs exactly can exceed ours, which would push the copies deeper)
    capacity_kib = footprint(band, sizes)[0] // 1024 + 1
    passes.append(
        f"affine-data-copy-generate{{generate-dma fast-mem-space={space} "
        f"fast-mem-capacity={capacity_kib}}}"
    )
    return ",".join(passes)
