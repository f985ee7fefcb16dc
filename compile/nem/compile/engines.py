"""Spreading one loop nest over several engines (D-COMPILE-ENGINES).

A top-level affine nest is split into N parts along one loop of its band:
part k runs the loop's iterations `[lo + k*c, min(lo + (k+1)*c, hi))` with
`c = ceil(extent / N)`, as a clone of the whole nest with those constant
bounds.  Each part is then tiled and staged on its own in engine k's L1
(fast memory space 2 + k), so its tasks run on engine k (PLACE-01).  No
ordering is written here: the lowering's `nem-synthesize-deps` orders exactly
the accesses of different parts that conflict under the happens-before model
(D-LOW-DEPS), and `nem-jam-engine-loops` makes the parts' loops one loop
before it (D-NEM-JAM-ENGINES), so parts that touch disjoint bytes run at the
same time.

Which loop: the one whose parts cost least under a model of what the timed
runtime charges (a transfer costs the bytes it moves, D-RT-COST: a box of
elements, not the byte span of a strided one; whether two parts' writes
conflict is decided on byte spans, D-HAZ-ACCESS):

* a part's time is the largest span one part reads plus what it writes;
  reads of inputs and weights (nothing in the program writes them) may
  start before the earlier nests are done, but on the part's engine's
  DMAs: after the inputs and weights already charged to that engine
  (`Clock`), not at once (session 27: a fully connected layer after one
  split over every engine was charged none of its weight stream and ran
  whole on one engine, ZFNet's fc7 4x its bound), nor after the earlier
  nests' activations and MACs (session 29: the transformer's last matmul
  stayed whole);
* a part of a contraction (a convolution, a matmul) is done no sooner than
  its MACs take its engine's NMUs, in the bytes the engine's DMAs move
  meanwhile (`mac_bytes`), from when the earlier nests are done (session
  27: once the weights count, they hid the compute a row split divides,
  and ZFNet's 5x5 convolution, NMU-bound, stayed whole);
* when the written spans of neighbouring parts overlap (a reduction loop, or
  a column split of a row-major output), the parts' read-modify-writes of
  the output are ordered one after the other: N times the written span, read
  and written, and their MACs add up (such parts do not jam); partial
  sums are added after the parts' MACs;
* unless their written elements are disjoint (D-HAZ-ELEMENTS: an output
  channel split of an NHWC output), the nest is a contraction reading
  weights the split loop indexes (a convolution's, a matmul's; not a
  pooling's input) and, on the transform route, a part fits L1 as one
  tile: each part is then one tile, or on the transform route its
  channel cut (`tile_cost.channel_cut`), whose tile loops jam with the
  other parts' by their elements (D-NEM-JAM-ENGINES, session 57), and
  the parts run at the same time (`Split.whole`; `transform` takes it
  where the split the spans allow is no partial-sum split and
  `tile_time` estimates it slower, tiled or not: session 57), if
  they move fewer bytes than the best tiled split (they save weights, not
  MACs; session 29), and whatever the estimate when each part of the
  chosen split moves `WHOLE_SAVES` times their bytes or more, weights
  included: a row split of a small layer with large weights loads them
  whole on every engine, and the weight clock, which counts no
  activation traffic, calls them preloaded, while in a DMA-bound stretch
  they take the DMAs the earlier nests need (session 33: DenseNet-121's
  3x3 128 -> 32 convolutions at 7x7, 147 KB of weights per engine);
  on the transform route such parts that do not fit as one tile are
  offered tiled (their loops jam by elements), taken only where a part
  moves fewer bytes than the best split of parts not apart (session 57:
  a 3x3 512 -> 508 at 14x14 streamed all its 4.68 MB of weights into
  every engine; SqueezeNet's first convolution, 3 input channels, would
  load its whole input on every engine);
* a contraction's part reads at least what its tiles stream into L1
  with the tiling's sizes for it (`_streamed`, session 28): weights whose
  copy stays inside a tile loop are read once per trip of it.

The nest adding partial sums into C is then planned as any nest (split
over the engines when that pays: on engine 0 alone it read every partial
through one engine's DMAs, session 28).

A loop is split only when that estimate beats the unsplit nest by
`MIN_GAIN`; otherwise the nest stays whole, on the next engine round-robin.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod

from mlir import ir
from mlir.dialects import affine, arith, memref

from nem.compile.flops import SELECTING
from nem.compile.nest_ir import (
    Access,
    Band,
    access_box,
    batch_loops,
    const_bound,
    is_contraction,
    owner_op,
    replace_in,
)


def mac_bytes(dmas: int, nmus: int) -> float:
    """What one MAC of a contraction costs an engine, in the bytes its DMAs
    move meanwhile (the estimate's unit): D-RT-COST's default rates, as the
    tile estimate takes them (`tile_time`), over the engine's NMUs and
    DMAs; 0 without NMUs."""
    from nem.compile.tile_time import DMA_BYTES, NMU_MACS

    return DMA_BYTES * max(dmas, 1) / (NMU_MACS * nmus) if nmus else 0.0


MIN_GAIN = 0.8
"""Split only when the estimated time is below this fraction of the unsplit one."""

WHOLE_SAVES = 2.0
"""Parts of one tile each (`Split.whole`) replace a split of lower estimate
when that split's part moves at least this many times their bytes,
weights included (session 33)."""


@dataclass(frozen=True)
class Clock:
    """The estimate after the nests planned so far, in bytes moved (the
    unit of `_finish`): `busy[k]`, when engine k's DMAs are done with the
    reads of inputs and weights charged to it; `ready`, when the earlier
    nests are done.  A nest's loads of results of earlier nests wait for
    all of them (`ready`); its loads of inputs and weights wait only for
    those charged before them to its own engine: an engine streams weights
    ahead of the nests that use them, so a weight stream that keeps every
    engine busy delays the next one (session 27: ZFNet's fc7 after fc6),
    while nests bound by their activations, their MACs or their writes do
    not (session 29: the transformer's ff2, 2 KB of weights after a chain
    of small elementwise nests, was charged them after that chain and ran
    whole on one engine)."""

    busy: tuple[int, ...]
    ready: int = 0

    @staticmethod
    def start(engines: int) -> Clock:
        return Clock((0,) * max(engines, 1))

    def charge(self, engines: Sequence[int], streamed: int, done: int) -> Clock:
        """`engines` streamed weights until `streamed`, the nest (or its
        parts there) is done at `done`."""
        busy = tuple(streamed if k in engines else b for k, b in enumerate(self.busy))
        return Clock(busy, max(self.ready, done))


@dataclass(frozen=True)
class Split:
    loop: int
    """Depth in the band of the loop that is split."""
    parts: int
    chunk: int
    estimate: int
    unsplit: int
    partials: ir.Value | None = None
    """For a sum over the split loop (`C += ...`): the memref C; parts 1..N-1
    then accumulate into zeroed partial buffers of their own, added into C
    by one elementwise nest after the parts, instead of read-modify-writing C
    one after the other."""
    whole: bool = False
    """The parts write disjoint elements whose byte spans interleave (an
    output-channel split of a row-major output), each part fitting L1 as
    one tile: planned as one tile (`transform` may cut it along its output
    channels, `tile_cost.channel_cut`); the parts' tile loops jam by their
    elements, not their byte hulls, so the parts run at the same time
    (D-NEM-JAM-ENGINES, session 57)."""


def _strides(t: ir.MemRefType) -> tuple[list[int], int] | None:
    """(element strides, offset) of a memref with a static layout (else None)."""
    if not t.has_static_shape:
        return None
    strides, offset = t.get_strides_and_offset()
    if any(t.is_dynamic_stride_or_offset(x) for x in [*strides, offset]):
        return None
    return list(strides), offset


def _spans(
    band: Band, ranges: dict[ir.Value, tuple[int, int]]
) -> dict[ir.Value, tuple[int, int, bool, bool, int]] | None:
    """Per memref: (first byte, last byte + 1, read, written, bytes moved) of
    the accesses when each band/inner induction variable spans its interval
    in `ranges`.  The bytes moved are the box's elements (what a DMA of it
    is charged, D-RT-COST), which for a strip of a larger array (a padded
    tensor's border column, an interior) are far fewer than its span."""
    boxes: dict[ir.Value, list[tuple[int, int]]] = {}
    use: dict[ir.Value, tuple[bool, bool]] = {}
    for acc in band.accesses:
        box = access_box(acc, ranges)
        old = boxes.get(acc.memref)
        boxes[acc.memref] = (
            box if old is None else [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(old, box)]
        )
        r, w = use.get(acc.memref, (False, False))
        use[acc.memref] = (r or not acc.write, w or acc.write)
    out = {}
    for mem, box in boxes.items():
        t = ir.MemRefType(mem.type)
        layout = _strides(t)
        if layout is None:
            return None
        strides, offset = layout
        width = max(t.element_type.width // 8, 1)
        first = (offset + sum(lo * s for (lo, _), s in zip(box, strides))) * width
        last = (offset + sum(hi * s for (_, hi), s in zip(box, strides)) + 1) * width
        moved = width * prod(hi - lo + 1 for lo, hi in box)
        out[mem] = (first, last, *use[mem], moved)
    return out


def _finish(
    spans: dict[ir.Value, tuple[int, int, bool, bool, int]],
    preloaded: set[ir.Value],
    free: int,
    ready: int,
    serial_writes: int,
    by_span: bool = False,
) -> int:
    """When a nest (or its parts, each with `spans`) is done, in bytes moved:
    loads of `preloaded` buffers (nothing in the program writes them) start
    when the engine's DMAs are free (`free`, `Clock`), the others when the
    earlier nests are done (`ready`); then
    `serial_writes` times the written bytes one after the other.  `by_span`:
    the parts' writes overlap, which orders the parts whole (the jam keeps
    their loops apart, D-NEM-JAM-ENGINES), charged as their written spans."""
    late = [n for m, (_, _, r, _, n) in spans.items() if r and m not in preloaded] or [0]
    write = sum(b - a if by_span else n for a, b, _, w, n in spans.values() if w)
    return max(free + _preloads(spans, preloaded), ready + max(late)) + serial_writes * write


def _traffic(spans: dict[ir.Value, tuple[int, int, bool, bool, int]]) -> int:
    """The bytes a nest or part (`spans`) reads and writes, preloaded
    buffers' too: what its engine's DMAs move."""
    return sum(n for *_, n in spans.values())


def _preloads(
    spans: dict[ir.Value, tuple[int, int, bool, bool, int]], preloaded: set[ir.Value]
) -> int:
    """The largest read of a `preloaded` buffer (an input, weights) in
    `spans`: what the nest or part adds to its engine's weight stream."""
    return max([n for m, (_, _, r, _, n) in spans.items() if r and m in preloaded] or [0])


def _apart(
    band: Band, first: dict[ir.Value, tuple[int, int]], second: dict[ir.Value, tuple[int, int]]
) -> bool:
    """Whether two parts (their induction variables' `ranges`) write
    disjoint elements: every written box lies apart from the other part's
    in some dimension (the hazard model's element sets, D-HAZ-ELEMENTS)."""
    return all(
        any(h1 < l2 or h2 < l1 for (l1, h1), (l2, h2) in zip(b1, b2))
        for acc in band.accesses
        if acc.write
        for b1, b2 in [(access_box(acc, first), access_box(acc, second))]
    )


def part_sizes(band: Band, loop: int, chunk: int) -> list[int]:
    """The tile sizes that make a part of `chunk` iterations of `loop` one
    tile."""
    return [chunk if k == loop else e for k, e in enumerate(band.extents)]


def _contraction(band: Band, full: dict[ir.Value, tuple[int, int]], iv: ir.Value) -> bool:
    """Whether `band` (its induction variables' `full` ranges) is a
    contraction with weights along `iv`: a loop indexes no written element
    (a convolution, a matmul), it has no batch loop (tiled by 1, never one
    tile), and an operand it reads depends on `iv` but not on some other
    loop indexing the output (a convolution's weights along its output
    channels: a split along rows loads them whole in every part, a split
    along `iv` a part each).  A pooling reads only its input, which a split
    along rows cuts as well as one along channels: it keeps the split its
    spans allow (session 28: Inception v1's 3x3 max pools split along
    channels as one tile each made the model slower)."""
    if any(band.extents[i] > 1 for i in batch_loops(band)):
        return False
    if not is_contraction(band):
        return False
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in band.loops]
    written = {v for a in band.accesses if a.write for v in a.indices}
    out = {a.memref for a in band.accesses if a.write}
    rows = [v for v in ivs if v in written and v != iv and full[v][0] < full[v][1]]

    def uses(a: Access, v: ir.Value) -> bool:
        lo = full[v][0]
        return access_box(a, {**full, v: (lo, lo)}) != access_box(a, full)

    return any(
        uses(a, iv) and not all(uses(a, r) for r in rows)
        for a in band.accesses
        if not a.write and a.memref not in out
    )


def _sum_target(band: Band, ranges: dict[ir.Value, tuple[int, int]]) -> ir.Value | None:
    """C when the nest's one store is `C[i] = C[i] + x` (float) with the same
    indices as its one load of C, and a part (`ranges`) covers all of C."""
    writes = [a for a in band.accesses if a.write]
    if len(writes) != 1:
        return None
    store = writes[0]
    c = store.memref
    loads = [a for a in band.accesses if not a.write and a.memref == c]
    add = owner_op(store.op.operands[0])
    t = ir.MemRefType(c.type)
    if (
        len(loads) != 1
        or add is None
        or add.name != "arith.addf"
        or loads[0].op.results[0] not in list(add.operands)
        or loads[0].map != store.map
        or list(loads[0].indices) != list(store.indices)
        or not t.has_static_shape
        or access_box(store, ranges) != [(0, n - 1) for n in t.shape]
    ):
        return None
    return c


def choose_split(
    band: Band,
    engines: int,
    preloaded: set[ir.Value],
    clock: Clock,
    whole: int = 0,
    per_mac: float = 0.0,
    sizes: Callable[[dict[int, list[int]] | None], Sequence[int]] | None = None,
    fits: Callable[[list[int]], bool] | None = None,
) -> tuple[Split | None, Clock]:
    """The band loop to split the nest along over `engines` parts, part k on
    engine k (None: keep it whole, on engine `whole`), and the clock once
    the nest is done.  `per_mac` (`mac_bytes`): a contraction's part is
    done no sooner than its MACs take its engine's NMUs once the earlier
    nests are done.  `sizes`: the tiling's sizes for the nest or one part of
    it (loop -> the parts' extents, `tiling.band_sizes`); with them a
    contraction's part is charged the reads its tiles stream
    (`_streamed`).  With `fits` (whether one tile of these sizes fits L1),
    parts of a contraction whose written elements are disjoint though their
    byte spans interleave are not ordered one after the other when a part
    fits as one tile (`Split.whole`)."""
    ready = clock.ready
    contraction = is_contraction(band)
    macs = prod([*band.extents, *band.inner.values()]) * per_mac if contraction else 0.0
    tiled = sizes if contraction else None

    def computed(share: float) -> int:
        return ready + int(macs * share)

    ivs, lows, full = _ranges(band)
    spans_whole = _spans(band, full)
    if spans_whole is None:
        return None, clock
    spans_whole = _streamed(spans_whole, band, tiled, None)
    unsplit = max(_finish(spans_whole, preloaded, clock.busy[whole], ready, 1), computed(1.0))
    # (estimate, bytes moved, the split, when its engines' weights are in,
    # the bytes a part's DMAs move, whether its parts write apart)
    chosen: list[tuple[int, int, Split, int, int, bool]] = []
    for d, (iv, lo, ext) in enumerate(zip(ivs, lows, band.extents)):
        if ext < 2 or engines < 2:
            continue
        parts = min(engines, ext)
        chunk = -(-ext // parts)
        parts = -(-ext // chunk)
        one = {**full, iv: (lo, lo + chunk - 1)}
        second_ranges = {**full, iv: (lo + chunk, min(lo + 2 * chunk, lo + ext) - 1)}
        first, second = _spans(band, one), _spans(band, second_ranges)
        if first is None or second is None or _narrow_partials(band, one, second_ranges):
            continue
        overlap = any(
            w1 and (a1 < b2 and a2 < b1)
            for m, (a1, b1, _, w1, _) in first.items()
            for a2, b2, _, _, _ in [second[m]]
        )
        apart = (
            overlap
            and fits is not None
            and _contraction(band, full, iv)
            and _apart(band, {**full, iv: (lo, lo + chunk - 1)}, second_ranges)
        )
        one_tile = apart and fits is not None and fits(part_sizes(band, d, chunk))
        overlap = overlap and not apart
        if not one_tile:  # a part of one tile reads each operand once
            lengths = {d: sorted({chunk, ext - (parts - 1) * chunk})}
            first = _streamed(first, band, tiled, lengths)
        target = _sum_target(band, {**full, iv: (lo, lo + chunk - 1)}) if overlap else None
        # a part's own write, then (partials) the sum nest reading them all
        # at once and writing C, or (overlap) each part's read-modify-write
        serial = 3 if target is not None else 2 * parts if overlap else 1
        # parts whose writes overlap run one after the other (they do not
        # jam, D-NEM-JAM-ENGINES): their MACs add up as the whole nest's;
        # the sum of partials reads them and writes C once the MACs are done
        serialized = overlap and target is None
        written = sum(n for _, _, _, w, n in first.values() if w)
        moved = _finish(first, preloaded, max(clock.busy[:parts]), ready, serial, serialized)
        estimate = max(moved, computed(1.0 if serialized else chunk / ext) + (serial - 1) * written)
        if estimate - ready < MIN_GAIN * (unsplit - ready):
            split = Split(d, parts, chunk, estimate, unsplit, target, one_tile)
            weighed = max(clock.busy[:parts]) + _preloads(first, preloaded)
            chosen.append((estimate, moved, split, weighed, _traffic(first), apart))
    best = min(chosen, key=lambda c: c[0], default=None)
    spread = min((c for c in chosen if not c[2].whole), key=lambda c: c[0], default=None)
    if best is not None and best[2].whole and spread is not None and best[1] >= spread[1]:
        # parts of one tile save bytes (a part of the weights each), not
        # MACs: they win only where they move fewer bytes than the best
        # tiled split, not by the MAC share of a split whose last part is
        # shorter (session 29: SqueezeNet's fire2/fire3 3x3 expands, 27
        # rows as 7, 7, 7, 6 against 128 channels as 4 x 32, ran slower as
        # channel parts of one tile: 174,874 -> 181,010 cycles)
        best = spread
    near = min((c for c in chosen if not c[5]), key=lambda c: c[0], default=None)
    if best is not None and best[5] and not best[2].whole and near and best[4] >= near[4]:
        # tiled parts apart only where a part moves fewer bytes than the
        # best split of parts not apart (session 57: SqueezeNet's first
        # convolution, 3 input channels, loaded its whole input on every
        # engine; the estimate's finish time in place of the bytes lost
        # Inception v2's and ResNet-50's gains)
        best = near
    light = min((c for c in chosen if c[2].whole), key=lambda c: (c[4], c[0]), default=None)
    if best is not None and light is not None and light[4] * WHOLE_SAVES <= best[4]:
        # the estimate lets every part's weights stream in before the
        # earlier nests are done (`Clock` counts weights only), which a
        # split loading them whole on each engine cannot have where the
        # DMAs are the roof: a 3x3 128 -> 32 convolution at 7x7, 2-row
        # parts each loading its 147 KB of weights (167 KB a part) against
        # 8 of 32 output channels each (80 KB), 7,672 -> 6,980 timed cycles
        # for the dense layer (session 33)
        best = light
    if best is None:
        weighed = clock.busy[whole] + _preloads(spans_whole, preloaded)
        return None, clock.charge([whole], weighed, unsplit)
    return best[2], clock.charge(range(best[2].parts), best[3], best[0])


def _streamed(
    spans: dict[ir.Value, tuple[int, int, bool, bool, int]],
    band: Band,
    sizes: Callable[[dict[int, list[int]] | None], Sequence[int]] | None,
    parts: dict[int, list[int]] | None,
) -> dict[ir.Value, tuple[int, int, bool, bool, int]]:
    """`spans` of the nest or of one part (`parts`: loop -> the parts'
    extents), each memref read charged at least what the tiles stream
    into L1 with the tiling's sizes for it (`tile_cost.streamed`): its box
    once when the tiling hoists its copy out of the tile loops, once per
    trip of each tile loop it stays in (session 28: ZFNet's 5x5 convolution
    split by rows re-read its 2.4 MB of weights for each of 5 column tiles,
    140,290 cycles; along its reduction, each part's quarter once, 93,060).
    Unchanged without sizes."""
    if sizes is None:
        return spans
    from nem.compile.tile_cost import streamed

    moved = streamed(band, sizes(parts), parts)
    return {
        m: (a, b, r, w, max(n, moved.get(m, 0)) if r else n) for m, (a, b, r, w, n) in spans.items()
    }


def _ranges(
    band: Band,
) -> tuple[list[ir.Value], list[int], dict[ir.Value, tuple[int, int]]]:
    """The band loops' induction variables, their lower bounds, and every
    induction variable's whole range (the inner loops' too)."""
    ivs = [loop.regions[0].blocks[0].arguments[0] for loop in band.loops]
    lows = [_lower(loop) for loop in band.loops]
    full = {v: (lo, lo + e - 1) for v, lo, e in zip(ivs, lows, band.extents)}
    full.update({v: (0, e - 1) for v, e in band.inner.items()})
    return ivs, lows, full


def narrow_sums(band: Band) -> frozenset[int]:
    """The band loops along which two neighbouring iterations (every other
    induction variable at its first value) write the same element of a
    float memref narrower than f32 (`_narrow_partials`): the reduction loops
    of an f16 or bf16 sum.  The tile stage may not cut one
    (`l1_plan.refuse_narrow_cut`, D-COMPILE-TILES): each piece's sum would
    be rounded to f16 and the roundings added.  A max or min (a value
    `flops.SELECTING` computes: a MaxPool's window) is exact in f16, cut
    or not, so its loops are not counted."""
    ivs, lows, full = _ranges(band)
    first = {v: (a, a) for v, (a, _) in full.items()}
    return frozenset(
        d
        for d, (iv, lo, ext) in enumerate(zip(ivs, lows, band.extents))
        if ext > 1 and _narrow_partials(band, first, {**first, iv: (lo + 1, lo + 1)}, rounding=True)
    )


def _narrow_partials(
    band: Band,
    one: dict[ir.Value, tuple[int, int]],
    two: dict[ir.Value, tuple[int, int]],
    rounding: bool = False,
) -> bool:
    """Whether two parts (`one`, `two`: the induction variables' ranges)
    write the same elements of a float memref narrower than f32: a split
    along a sum whose partial sums would each be rounded to that type.  NEM's
    f16 `conv2d`/`matmul` sums wide and rounds once (D-NUM-LINEAR-FLOAT); the
    parts (partial buffers or read-modify-writes of C) would round each part's
    sum to f16 and add the roundings in f16, another function (fuzz seed
    2602, m8: 13 input channels cut 4, 4, 4, 1 over cancelling partial sums,
    1.06 tolerances off the exact result; D-COMPILE-ENGINES).  f32 partial
    sums differ from the whole sum by f32 ulps, within D-COMPILE-TOL.
    `rounding`: writes of a max or min (`flops.SELECTING`) do not count."""
    boxes: dict[ir.Value, list[list[tuple[int, int]]]] = {}  # per memref, per part
    for acc in band.accesses:
        elem = ir.MemRefType(acc.memref.type).element_type
        if not acc.write or not isinstance(elem, ir.FloatType) or elem.width >= 32:
            continue
        value = owner_op(acc.op.operands[0])
        if rounding and value is not None and value.name in SELECTING:
            continue
        new = [access_box(acc, one), access_box(acc, two)]
        old = boxes.get(acc.memref, new)
        boxes[acc.memref] = [
            [(min(p[0], q[0]), max(p[1], q[1])) for p, q in zip(o, n)] for o, n in zip(old, new)
        ]
    return any(
        all(lo1 <= hi2 and lo2 <= hi1 for (lo1, hi1), (lo2, hi2) in zip(a, b))
        for a, b in boxes.values()
    )


def preloaded_memrefs(fn: ir.Operation) -> set[ir.Value]:
    """The arguments of `fn` that nothing in it writes (inputs and weights:
    their loads may start at once).  A memref used by anything but
    `affine.load` (a store, a DMA, a view, a call) counts as written."""
    used: set[ir.Value] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name != "affine.load":
            used.update(v for v in op.operands if isinstance(v.type, ir.MemRefType))
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    return {a for a in fn.regions[0].blocks[0].arguments if a not in used}


def _lower(loop: ir.Operation) -> int:
    lo = const_bound(loop, "lowerBoundMap")
    assert lo is not None  # analyze_band only keeps constant bounds
    return lo


def _set_bounds(loop: ir.Operation, lo: int, hi: int) -> None:
    for key, value in (("lowerBoundMap", lo), ("upperBoundMap", hi)):
        amap = ir.AffineMap.get(0, 0, [ir.AffineConstantExpr.get(value)])
        loop.attributes[key] = ir.AffineMapAttr.get(amap)


def _loop_at(root: ir.Operation, depth: int) -> ir.Operation:
    loop = root
    for _ in range(depth):
        loop = next(
            o.operation
            for o in loop.regions[0].blocks[0].operations
            if o.operation.name == "affine.for"
        )
    return loop


def split_nest(root: ir.Operation, band: Band, split: Split) -> list[tuple[ir.Operation, int]]:
    """The nests that replace `root`, in place, each with its engine: the
    parts (clones before it, `root` itself is the last part), and with
    `split.partials` the zero fills of the partial buffers before them and,
    last, the nest adding the partials into C after them (engine 0, which
    `tiling.tile_module` plans again as any nest)."""
    lo = _lower(band.loops[split.loop])
    hi = lo + band.extents[split.loop]
    parts: list[ir.Operation] = []
    for k in range(split.parts):
        part = root if k == split.parts - 1 else root.clone(ir.InsertionPoint(root))
        part = part.operation if isinstance(part, ir.OpView) else part
        start = lo + k * split.chunk
        _set_bounds(_loop_at(part, split.loop), start, min(start + split.chunk, hi))
        parts.append(part)
    if split.partials is None:
        return [(part, k) for k, part in enumerate(parts)]
    return _privatize(parts, split.partials)


def perfect_nest(
    shape: Sequence[int], ip: ir.InsertionPoint, loc: ir.Location
) -> tuple[ir.Operation, ir.InsertionPoint, list[ir.Value]]:
    """An empty perfect `affine.for` nest over `shape`: (outermost loop,
    insertion point in the innermost body, induction variables)."""
    ivs: list[ir.Value] = []
    outer = None
    for n in shape:
        loop = affine.AffineForOp(0, n, loc=loc, ip=ip)
        with ir.InsertionPoint(loop.body):
            affine.AffineYieldOp([], loc=loc)
        ip = ir.InsertionPoint.at_block_begin(loop.body)
        ivs.append(loop.induction_variable)
        outer = outer or loop.operation
    assert outer is not None
    return outer, ip, ivs


def _privatize(parts: list[ir.Operation], c: ir.Value) -> list[tuple[ir.Operation, int]]:
    """Parts 1..N-1 of a sum into `c` accumulate into zeroed buffers of their
    own; one nest after the parts adds them into `c`."""
    loc = parts[0].location
    with loc:
        t = ir.MemRefType(c.type)
        plain = ir.MemRefType.get(t.shape, t.element_type)
        ident = ir.AffineMap.get_identity(t.rank)
        nests: list[tuple[ir.Operation, int]] = []
        partials = []
        for k, part in enumerate(parts[1:], 1):
            buf = memref.AllocOp(plain, [], [], loc=loc, ip=ir.InsertionPoint(parts[0])).result
            fill, ip, ivs = perfect_nest(t.shape, ir.InsertionPoint(parts[0]), loc)
            zero = arith.ConstantOp(t.element_type, 0.0, loc=loc, ip=ip).result
            affine.AffineStoreOp(zero, buf, ivs, ident, loc=loc, ip=ip)
            replace_in(part, [(c, buf)])
            partials.append(buf)
            nests.append((fill, k))
        nests += [(part, k) for k, part in enumerate(parts)]
        after = parts[-1].block.operations
        ops = [o.operation for o in after]
        anchor = ops[ops.index(parts[-1]) + 1]
        total, ip, ivs = perfect_nest(t.shape, ir.InsertionPoint(anchor), loc)
        acc = affine.AffineLoadOp(t.element_type, c, ivs, ident, loc=loc, ip=ip).result
        for buf in partials:
            x = affine.AffineLoadOp(t.element_type, buf, ivs, ident, loc=loc, ip=ip).result
            acc = arith.AddFOp(acc, x, loc=loc, ip=ip).result
        affine.AffineStoreOp(acc, c, ivs, ident, loc=loc, ip=ip)
        nests.append((total, 0))
    return nests


def describe(split: Split, extents: Sequence[int]) -> str:
    return (
        f"loop {split.loop} of {list(extents)} split in {split.parts} parts of "
        f"{split.chunk} (estimated {split.estimate} vs {split.unsplit} bytes on the "
        "critical path)"
    )
