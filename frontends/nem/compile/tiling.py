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
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, func
from mlir.passmanager import PassManager

from nem.compile.pipeline import FAST_SPACE


@dataclass(frozen=True)
class Access:
    memref: ir.Value
    map: ir.AffineMap
    indices: tuple[ir.Value, ...]
    write: bool
    op: ir.Operation


@dataclass
class Band:
    """A top-level affine loop nest: its perfectly nested loops (outermost
    first) with their constant trip extents, and every access below them."""

    root: ir.Operation
    loops: list[ir.Operation]
    extents: list[int]
    inner: dict[ir.Value, int]
    """Induction variables of loops below the band -> their extents."""
    accesses: list[Access]


def _const_bound(op: ir.Operation, key: str) -> int | None:
    amap = ir.AffineMapAttr(op.attributes[key]).value
    if len(amap.results) != 1 or not isinstance(amap.results[0], ir.AffineConstantExpr):
        return None
    return amap.results[0].value


def _extent(op: ir.Operation) -> int | None:
    lo, hi = _const_bound(op, "lowerBoundMap"), _const_bound(op, "upperBoundMap")
    step = ir.IntegerAttr(op.attributes["step"]).value
    if lo is None or hi is None or step != 1 or len(op.operands):
        return None
    return hi - lo


def _body_ops(loop: ir.Operation) -> list[ir.Operation]:
    return [o.operation for o in loop.regions[0].blocks[0].operations
            if o.operation.name != "affine.yield"]


def analyze_band(root: ir.Operation) -> Band | None:
    """The band of `root` (an `affine.for`), or None when a bound is not constant."""
    loops = [root]
    while True:
        body = _body_ops(loops[-1])
        if len(body) == 1 and body[0].name == "affine.for":
            loops.append(body[0])
        else:
            break
    extents = []
    for loop in loops:
        e = _extent(loop)
        if e is None:
            return None
        extents.append(e)
    inner: dict[ir.Value, int] = {}
    accesses: list[Access] = []
    ok = True

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal ok
        name = op.name
        if name == "affine.for" and op not in loops:
            e = _extent(op)
            if e is None:
                ok = False
                return ir.WalkResult.INTERRUPT
            inner[op.regions[0].blocks[0].arguments[0]] = e
        elif name in ("affine.load", "affine.store"):
            write = name == "affine.store"
            mem = op.operands[1 if write else 0]
            idx = tuple(op.operands[2 if write else 1:])
            accesses.append(Access(mem, ir.AffineMapAttr(op.attributes["map"]).value, idx,
                                   write, op))
        elif name in ("memref.load", "memref.store"):
            ok = False
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    if not ok:
        return None
    return Band(root, loops, extents, inner, accesses)


def _range(e: ir.AffineExpr, ranges: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """Interval of an affine expression given the intervals of its inputs."""
    if isinstance(e, ir.AffineConstantExpr):
        return e.value, e.value
    if isinstance(e, ir.AffineDimExpr):
        return ranges[e.position]
    if isinstance(e, ir.AffineSymbolExpr):
        return 0, 0          # loop-invariant: moves the box, not its extent
    a, b = _range(e.lhs, ranges), _range(e.rhs, ranges)
    if isinstance(e, ir.AffineAddExpr):
        return a[0] + b[0], a[1] + b[1]
    if isinstance(e, ir.AffineMulExpr):
        prods = [x * y for x in a for y in b]
        return min(prods), max(prods)
    if isinstance(e, ir.AffineModExpr):
        return 0, max(b[1] - 1, 0)
    if isinstance(e, ir.AffineFloorDivExpr) and b[0] > 0:
        return a[0] // b[0], a[1] // b[0]
    if isinstance(e, ir.AffineCeilDivExpr) and b[0] > 0:
        return -(-a[0] // b[0]), -(-a[1] // b[0])
    raise ValueError(f"affine expression {e} has no interval")


def value_range(v: ir.Value, ivs: dict[ir.Value, tuple[int, int]]) -> tuple[int, int]:
    """Interval of an index value: an induction variable's from `ivs`, an
    `affine.apply` of them through its map (what -convert-linalg-to-affine-loops
    leaves for `oh + kh`), anything else (loop-invariant) 0."""
    if v in ivs:
        return ivs[v]
    owner = owner_op(v)
    if owner is not None and owner.name == "affine.apply":
        amap = ir.AffineMapAttr(owner.attributes["map"]).value
        return _range(amap.results[0], [value_range(o, ivs) for o in owner.operands])
    return 0, 0


def access_box(acc: Access, ivs: dict[ir.Value, tuple[int, int]]) -> list[tuple[int, int]]:
    """Per dimension of the memref, the interval of indices `acc` touches."""
    ranges = [value_range(v, ivs) for v in acc.indices[:acc.map.n_dims]]
    return [_range(e, ranges) for e in acc.map.results]


def footprint(band: Band, sizes: Sequence[int]) -> tuple[int, int]:
    """(bytes of every memref box one tile of `sizes` touches, bytes of the
    boxes it writes)."""
    ivs = {loop.regions[0].blocks[0].arguments[0]: (0, s - 1)
           for loop, s in zip(band.loops, sizes)}
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
        width = ir.MemRefType(mem.type).element_type.width
        n = 1
        for x in boxes[mem]:
            n *= x
        return n * max(width // 8, 1)

    total = sum(nbytes(m) for m in boxes)
    return total, sum(nbytes(m) for m in written)


def choose_tile_sizes(band: Band, budget: int) -> list[int]:
    """Halve the outermost tile dimension larger than 1 until `footprint +
    output <= budget`: tiles of whole inner rows first, so that DMAs stay
    contiguous and consecutive tiles touch disjoint bytes (what lets the
    lowering keep two iterations in flight, D-LOW-PIPE)."""
    sizes = list(band.extents)
    while True:
        total, out = footprint(band, sizes)
        if total + out <= budget or max(sizes) <= 1:
            return sizes
        k = next(i for i, s in enumerate(sizes) if s > 1)
        sizes[k] = -(-sizes[k] // 2)


# --------------------------------------------------------------------------
# per-nest upstream passes


def _defined_inside(value: ir.Value, root: ir.Operation) -> bool:
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner
    while op is not None:
        op = op.operation if isinstance(op, ir.OpView) else op
        if op == root:
            return True
        op = op.parent
    return False


class Isolated:
    """A nest moved into a temporary function of its own, for upstream passes
    and transform scripts that work on a function or a whole payload:
    external values become the function's arguments, constants are cloned
    (`entry`: the function's block, `ret`: its return).  On leaving the
    `with` block, everything the function then holds moves back where the
    nest was (`moved`: those ops, in order)."""

    def __init__(self, root: ir.Operation):
        self.root = root
        self.moved: list[ir.Operation] = []

    def __enter__(self) -> Isolated:
        root = self.root
        external: list[ir.Value] = []
        constants: list[ir.Value] = []

        def collect(op: ir.Operation) -> ir.WalkResult:
            for v in op.operands:
                if not _defined_inside(v, root) and v not in external and v not in constants:
                    owner = owner_op(v)
                    if owner is not None and owner.name == "arith.constant":
                        constants.append(v)
                    else:
                        external.append(v)
            return ir.WalkResult.ADVANCE

        root.walk(collect)
        with ir.Location.unknown(root.context):
            # where the results go back: a marker after the nest (finding the
            # nest's successor by listing the block made each call linear in the
            # block, the tile stage quadratic in the number of nests)
            with ir.InsertionPoint.after(root):
                self.anchor = arith.ConstantOp(ir.IndexType.get(), 0).operation
            self.module = ir.Module.create()
            with ir.InsertionPoint(self.module.body):
                fn = func.FuncOp("nem_tile_nest", ([v.type for v in external], []))
                self.entry = fn.add_entry_block()
            with ir.InsertionPoint(self.entry):
                self.ret = func.ReturnOp([]).operation
            self.fn = fn.operation
            self.spare: ir.Operation | None = None
            mapping = list(zip(external, self.entry.arguments))
            for c in constants:
                owner = owner_op(c)
                assert owner is not None, "a constant has a defining op"
                clone = owner.clone(ir.InsertionPoint(self.ret))
                mapping.append((c, clone.results[0]))
        root.move_before(self.ret)
        _replace_in(root, mapping)
        self.external = external
        return self

    def ops(self) -> list[ir.Operation]:
        """The ops the temporary function holds now (but its return)."""
        return [o.operation for o in self.entry.operations if o.operation.name != "func.return"]

    def run(self, pipeline: str) -> None:
        """Run the func-level upstream `pipeline` on the temporary function."""
        PassManager.parse(f"func.func({pipeline})").run(self.fn)

    def snapshot(self) -> None:
        """Keep a copy of the function as it is now, for `restore`."""
        if self.spare is not None:
            self.spare.erase()
        self.spare = self.fn.clone(ir.InsertionPoint(self.module.body))

    def restore(self) -> None:
        """Make the function what it was at the last `snapshot` again."""
        assert self.spare is not None, "restore without snapshot"
        fresh = self.spare.clone(ir.InsertionPoint(self.module.body))
        self.fn.erase()
        self.fn = fresh
        self.entry = fresh.regions[0].blocks[0]
        self.ret = next(o.operation for o in self.entry.operations
                        if o.operation.name == "func.return")

    def __exit__(self, *exc: object) -> None:
        self.moved = self.ops()
        for op in self.moved:
            op.move_before(self.anchor)
        for arg, value in zip(self.entry.arguments, self.external):
            arg.replace_all_uses_with(value)
        self.anchor.erase()
        del self.module  # the Module object owns (and frees) the temporary function


def run_on_nest(root: ir.Operation, pipeline: str) -> list[ir.Operation]:
    """Run the func-level upstream `pipeline` on the nest `root` alone (in a
    temporary function, `Isolated`); returns the ops that replace the nest,
    in order."""
    with Isolated(root) as iso:
        iso.run(pipeline)
    return iso.moved


def _replace_in(root: ir.Operation, mapping: Sequence[tuple[ir.Value, ir.Value]]) -> None:
    def visit(op: ir.Operation) -> ir.WalkResult:
        for old, new in mapping:
            op.replace_uses_of_with(old, new)
        return ir.WalkResult.ADVANCE

    root.walk(visit)


def top_level_nests(fn: ir.Operation) -> list[ir.Operation]:
    return [o.operation for o in fn.regions[0].blocks[0].operations
            if o.operation.name == "affine.for"]


def band_sizes(band: Band, options, budget: int) -> list[int]:
    """The tile sizes of one band: the `--tile-sizes` override (missing
    entries: the whole loop) or the L1-derived choice."""
    if options.tile_sizes:
        given = list(options.tile_sizes)[:len(band.extents)]
        return [min(s, e) for s, e in zip(given + band.extents[len(given):], band.extents)]
    return choose_tile_sizes(band, budget)


def l1_budget(device, pipeline: bool) -> int:
    """Bytes one tile step may keep in L1 (half of it when double-buffered)."""
    l1 = device.topology.l1_size_bytes
    return l1 // 2 if pipeline else l1


def tile_module(module: ir.Module, entry: ir.Operation, device, options, engines: int,
                progress: Callable[[str, int, int], None] | None = None
                ) -> list[tuple[list[int], list[int]]]:
    """The affine route on the bufferized `module` (in place): each linalg
    op becomes an affine nest (`-convert-linalg-to-affine-loops`), and each
    top-level nest is tiled, staged in L1 and pipelined on its own, in the
    L1 of engine `index mod engines` (fast memory space 2 + k: nests spread
    round-robin over the engines, D-COMPILE-ENGINES).  Returns (extents,
    tile sizes) per nest."""
    PassManager.parse("builtin.module(func.func(convert-linalg-to-affine-loops))").run(
        module.operation)
    from nem.compile.checkpoints import checkpoint
    from nem.compile.engines import choose_split, preloaded_memrefs, split_nest

    checkpoint("affine loops", module)   # the stage bisector's steps (nem.compile.bisect)

    plan = []
    work: list[tuple[ir.Operation, Band, int]] = []
    turn, ready = 0, 0
    preloaded = preloaded_memrefs(entry)
    for root in top_level_nests(entry):
        band = analyze_band(root)
        if band is None:
            continue
        split, ready = choose_split(band, engines, preloaded, ready)
        if split is None:
            work.append((root, band, turn % engines))
            turn += 1
            continue
        for part, k in split_nest(root, band, split):
            part_band = analyze_band(part)
            assert part_band is not None      # constant bounds, affine accesses
            work.append((part, part_band, k))
    checkpoint("engine split", module)
    for done, (root, band, engine) in enumerate(work):
        if progress is not None:
            progress("nests tiled", done, len(work))
        where = f"{root.location}, engine {engine}"
        sizes, passes = _tile_nest(root, FAST_SPACE + engine, device, options)
        plan.append((band.extents, sizes))
        checkpoint(f"nest {done + 1}/{len(work)}", module,
                   f"{where}, tile sizes {sizes}, passes {passes.replace(',', ', ')}")
    PassManager.parse("builtin.module(canonicalize,cse)").run(module.operation)
    return plan


def _tile_nest(root: ir.Operation, space: int, device, options) -> tuple[list[int], str]:
    """Tile the nest `root`, stage its tiles in fast memory space `space`
    and pipeline them, with tile sizes whose measured L1 need fits the
    device (D-COMPILE-L1: tiled again from a copy with a smaller budget
    while it does not); returns the sizes and the passes run."""
    from nem.compile import dma_strides, l1_plan

    with Isolated(root) as iso:
        iso.snapshot()
        assert iso.spare is not None
        spare = next(o.operation for o in iso.spare.regions[0].blocks[0].operations
                     if o.operation.name == "affine.for")
        band = analyze_band(spare)   # of the copy, which the passes never touch
        assert band is not None, "a nest analyze_band took"

        def tile(sizes: list[int]) -> l1_plan.Need:
            iso.restore()
            iso.run(_nest_passes(band, sizes, space))
            # upstream's copy DMAs miss strides across unit dimensions
            dma_strides.repair(iso.fn)          # (D-COMPILE-DMA-STRIDES)
            if options.pipeline:
                iso.run(PIPELINE)
            return l1_plan.measure(iso.ops(), options.pipeline)

        try:
            sizes = l1_plan.fit(l1_budget(device, options.pipeline),
                                device.topology.l1_size_bytes,
                                lambda b: band_sizes(band, options, b), tile)
        except l1_plan.DoesNotFit as e:
            raise l1_plan.too_big(spare, e, device) from None
        run = [_nest_passes(band, sizes, space), "(dma_strides.repair)"]
        return sizes, ",".join(run + [PIPELINE] * options.pipeline)


PIPELINE = "affine-pipeline-data-transfer"


def _nest_passes(band: Band, sizes: list[int], space: int) -> str:
    """The upstream passes tiling one nest by `sizes` and staging its tiles
    in memory space `space`."""
    passes = []
    if any(_const_bound(loop, "lowerBoundMap") for loop in band.loops):
        # an engine's part of a split nest (nem.compile.engines): loops from 0,
        # the offset folded into the indices
        passes.append("affine-loop-normalize,canonicalize")
    if sizes != band.extents:
        passes.append("affine-loop-tile{tile-sizes=" + ",".join(map(str, sizes)) + "}")
    # copies at the depth where one tile fits: inside the tile loops
    # (one KiB of slack: upstream's count of a footprint that fills its
    # KiBs exactly can exceed ours, which would push the copies deeper)
    capacity_kib = footprint(band, sizes)[0] // 1024 + 1
    passes.append(f"affine-data-copy-generate{{generate-dma fast-mem-space={space} "
                  f"fast-mem-capacity={capacity_kib}}}")
    return ",".join(passes)


def owner_op(v: ir.Value) -> ir.Operation | None:
    """The op defining `v` (None for a block argument)."""
    owner = v.owner
    if isinstance(owner, ir.OpView):
        return owner.operation
    return owner if isinstance(owner, ir.Operation) else None


def const_index(v: ir.Value) -> int | None:
    """The value of an `index` constant, else None (loop bounds and steps,
    `flops.py`)."""
    owner = owner_op(v)
    if owner is not None and owner.name == "arith.constant" and \
            isinstance(v.type, ir.IndexType):
        return ir.IntegerAttr(owner.attributes["value"]).value
    return None
