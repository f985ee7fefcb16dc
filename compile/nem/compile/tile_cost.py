"""Tile sizes scored by the bytes their copies move (decision D-COMPILE-TILE-COST).

The halving rule (`tiling.choose_tile_sizes`, D-COMPILE-TILES) shrinks the
outermost loops first.  On a convolution that keeps one weight tile per
output pixel: VGG-19's 3x3 convolutions on 512 channels were tiled
[1, 1, 1, 16, 3, 3, 512], a 288 KiB weight tile copied again for each of
the 784 pixels of each of the 32 channel blocks.  Every tile copies each of
its operand boxes into L1 and its output box back (D-LOW-VIEW: `promote`
stages every operand per tile), so what a choice of sizes moves is

    tiles(s) * (footprint(s) + output(s) + OVERHEAD * copies)

with `tiles(s)` the product of `ceil(extent / size)`.  This module searches
the sizes that fit the same budget as the halving rule and cost the
compile no more than it: no more loops tiled than it tiles, no partial
tile it does not peel too (each size divides its loop, or each engine
part of it, or is the halving size: a peel clones the tile's statements),
and each
reduction loop tiled as it tiles it (a reduction cut re-reads and
re-writes the output per tile and runs its loop one iteration in flight;
keeping the halving rule's reduction tiles keeps each output's sum over
the same tiles in the same order).  It takes the cheapest when that moves
at most `GAIN` of what the halving sizes move; otherwise the halving
sizes stand.

The footprint of each access is affine in the tile sizes for the accesses
linalg's loops make (`oh + kh`, strided `2*oh + kh`): the extent of each
memref dimension is `1 + sum_i a_i * (s_i - 1)`, measured once per band
(all sizes 1, then each loop at 2) and checked at the halving sizes and
the whole loop; a band where that check fails (a `mod` or `floordiv`
index) keeps the halving sizes.

On the transform route a nest with a reduction loop (a convolution, a
matmul) is then scored by its estimated timed cycles instead
(`nem.compile.tile_time`, D-COMPILE-TILE-TIME): among the same candidates,
the fewest cycles when they are at most TIME_GAIN of the bytes pick's.
There an engine part the halving sizes leave one tile may also be cut along
its split loop, in two tiles or more per part (`_split_loop_cut`): one tile
runs its copy in, convolution and copy out one after the other.  A short
part (cut in `SHORT_CUT` tiles or fewer) of a grouped or depthwise
convolution that the estimate would leave one tile is cut anyway: the
estimate sees one part from an idle start, not the layers waiting for it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from mlir import ir

from nem.compile import tile_time
from nem.compile.nest_ir import Access, Band, access_box, batch_loops, is_contraction

GAIN = 0.75
"""Take the searched sizes only when they move at most this share of the
halving sizes' bytes (a change of tiles for a small gain is not worth the
compile's and the reader's attention)."""
OVERHEAD = 2048
"""Bytes charged per copy of a tile (a transfer's setup, a task to schedule)."""
TIME_GAIN = 0.9
"""A convolution's or matmul's sizes change from the bytes rule's only for
an estimated gain of at least a tenth of its cycles (D-COMPILE-TILE-TIME)."""
SHORT_CUT = 8
"""An engine part the sizes leave one tile is cut along its split loop
whenever a cut leaves it at most this many tiles (D-COMPILE-TILE-TIME,
sessions 25-26): the estimate scores one part from an idle start, but in a
network a part of one tile makes the layers after it wait for its whole
chain of copy in, convolution and copy out (ShuffleNet's 14x14 parts of 4
rows and its 28x28 parts of 7).  Grouped and depthwise convolutions only
(`_Model.groups`): dense ones cut so made DenseNet-121 0.65% and Inception
v1 0.16% slower at 4, SqueezeNet 1.1% at 8 (its 27x27 parts of 6-7 rows).
Longer parts keep the estimate's choice (cut too, SqueezeNet's 55x55 parts
of 13-14 rows ran slower)."""
CUT_GAIN = 0.9
"""An engine part of one tile is cut along its output channels
(`channel_cut`) only for an estimated gain of at least a tenth of its
cycles, both with its convolution on one NMU and against its tiles'
convolutions and epilogues one after another (`_serial`).  At 0.9 without
the second test, DenseNet-121's 1x1 layers at 28x28 (parts of 7 rows, 128
output channels, 128-224 input channels) ran slower cut (n157 5,532 ->
6,646 busy cycles, the model 1,115,760 -> 1,118,790 cycles); at 0.8 with
the one tile priced over the NMUs alone, Inception v1 kept 1x1 parts whole
that gain cut (538,057 -> 531,898 cycles; D-COMPILE-TILE-TIME, sessions
45-46)."""
HOISTED_SHARE = 0.9
"""A one-tile part keeps its one tile where more than this share of its read
bytes is in reads the cut loop does not index (`_hoisted_share`): the cut
hides the weights' loads beside the tiles' convolutions, and SqueezeNet's
55x55 1x1s (4 KB of weights beside 49-197 KB of input), cut, made the
model 144,266 -> 144,427 cycles (D-COMPILE-TILE-TIME, session 46)."""
CUT_WEIGHTS = 64 * 1024
"""A window's part (a 3x3 or 5x5 convolution's) of one tile is cut along
its output channels (`channel_cut`) only where it reads at least this many
bytes of weights (the reads the cut loop indexes; about 500 cycles over an
engine's four DMAs on npm_pro_x1): a one-tile part's weights load beside
the layer before, a tile loop's only once the loop is reached.  Cut
whatever their size (session 59), Inception v1's 5x5 branches (24-32 -> 64
at 13x13, 38-51 KB a part) ran faster each but longer on the network's
critical path (n89 600 -> 1,894 of it, the model +0.8%) and SqueezeNet's
55x55 3x3 (37 KB) slower; at 64 KB every model of the nine but Inception
v1 (+0.04%) ran as fast or faster (D-COMPILE-TILE-TIME, session 59)."""
MAX_CANDIDATES = 200_000
"""Size combinations scored at most (candidates per loop are thinned to the
powers of two dividing it beyond that)."""


def _strides(t: ir.MemRefType) -> np.ndarray:
    """A memref's element strides: its layout's, row-major where they are
    dynamic (the span of a box is then a guess; a static layout is the rule)."""
    strides, _ = t.get_strides_and_offset()
    if any(t.is_dynamic_stride_or_offset(x) for x in strides):
        strides, acc = [], 1
        for n in reversed(t.shape):
            strides.insert(0, acc)
            acc *= max(n, 1)
    return np.array(strides, dtype=np.int64)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class _Model:
    """Per access: its memref, element bytes, whether it writes, and its box
    extents as `base + coef @ (s - 1)`."""

    def __init__(self, band: Band):
        self.band = band
        n = len(band.loops)
        self.ivs = [loop.regions[0].blocks[0].arguments[0] for loop in band.loops]
        self.rows: list[tuple[int, int, bool, np.ndarray, np.ndarray]] = []
        self.mems: list[ir.Value] = []
        self.strides: list[np.ndarray] = []  # per memref, its element strides
        ones = [1] * n
        for acc in band.accesses:
            base = np.array(self._ext(acc, ones), dtype=np.int64)
            coef = np.zeros((len(base), n), dtype=np.int64)
            for i, e in enumerate(band.extents):
                if e >= 2:
                    two = list(ones)
                    two[i] = 2
                    coef[:, i] = np.array(self._ext(acc, two)) - base
            t = ir.MemRefType(acc.memref.type)
            if acc.memref not in self.mems:
                self.mems.append(acc.memref)
                self.strides.append(_strides(t))
            width = max(t.element_type.width // 8, 1) if hasattr(t.element_type, "width") else 8
            self.rows.append((self.mems.index(acc.memref), width, acc.write, base, coef))

    def _ext(self, acc: Access, sizes: Sequence[int]) -> list[int]:
        ivs = {v: (0, s - 1) for v, s in zip(self.ivs, sizes)}
        ivs.update({v: (0, e - 1) for v, e in self.band.inner.items()})
        return [hi - lo + 1 for lo, hi in access_box(acc, ivs)]

    def linear_at(self, sizes: Sequence[int]) -> bool:
        """Whether the affine model gives the measured extents at `sizes`."""
        s = np.array(sizes, dtype=np.int64) - 1
        return all(
            list(base + coef @ s) == self._ext(self.band.accesses[k], sizes)
            for k, (_, _, _, base, coef) in enumerate(self.rows)
        )

    def groups(self) -> list[int]:
        """The loops every memref's box depends on: a grouped or depthwise
        convolution's group loop (a batch loop too); none for an op of
        fewer than three memrefs (a pooling's input and output depend on
        every loop but its window's: not a grouped convolution)."""
        n = len(self.band.loops)
        if len(self.mems) < 3:
            return []
        dep = np.zeros((len(self.mems), n), dtype=bool)
        for k, _, _, _, coef in self.rows:
            dep[k] |= (coef != 0).any(axis=0)
        return [i for i in range(n) if bool(dep[:, i].all())]

    def reductions(self) -> list[int]:
        """The loops no written box depends on."""
        written = [coef for _, _, w, _, coef in self.rows if w]
        return [
            i
            for i in range(len(self.band.loops))
            if written and all(not coef[:, i].any() for coef in written)
        ]

    def boxes(self, S: np.ndarray) -> tuple[dict[int, np.ndarray], list[int], list[bool]]:
        """Per memref: its box extents for each row of sizes `S`; and per
        memref its element bytes and whether the band writes it."""
        m = len(self.mems)
        boxes: dict[int, np.ndarray] = {}
        width = [1] * m
        written = [False] * m
        for k, w, wr, base, coef in self.rows:
            ext = base[None, :] + (S - 1) @ coef.T
            boxes[k] = np.maximum(boxes[k], ext) if k in boxes else ext
            width[k], written[k] = w, written[k] or wr
        return boxes, width, written

    def cycles(
        self,
        S: np.ndarray,
        lengths: np.ndarray,
        reductions: set[int],
        dmas: int,
        split: bool = True,
    ) -> np.ndarray | None:
        """`tile_time.estimate` of each row of sizes `S` over `dmas` DMAs per
        engine (one written memref, else None: no estimate)."""
        boxes, width, written = self.boxes(S)
        if sum(written) != 1:
            return None
        reads = []
        out = None
        for k in range(len(self.mems)):
            ext = boxes[k]
            nbytes = np.prod(ext, axis=1) * width[k]
            # its span in the array it is cut from (the L1 side is the box itself)
            span = np.maximum(((ext - 1) @ self.strides[k] + 1) * width[k], nbytes)
            rows = ext[np.arange(len(ext)), np.argmax(ext > 1, axis=1)]
            box = tile_time.Box(nbytes, span, rows)
            if not written[k]:
                deps = np.zeros(len(self.band.loops), dtype=bool)
                for j, _, _, _, coef in self.rows:
                    if j == k:
                        deps |= coef.any(axis=0)
                reads.append((box, deps))
                continue
            out = (box, np.prod(ext, axis=1))
        assert out is not None
        return tile_time.estimate(S, lengths, reads, out, reductions, dmas, split)

    def score(self, S: np.ndarray, extents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(footprint + output bytes, bytes moved) of each row of sizes `S`."""
        m = len(self.mems)
        boxes, width, written = self.boxes(S)
        total = np.zeros(len(S), dtype=np.int64)
        out = np.zeros(len(S), dtype=np.int64)
        for k in range(m):
            b = np.prod(boxes[k], axis=1) * width[k]
            total += b
            if written[k]:
                out += b
        copies = m + sum(written)
        tiles = np.prod(-(-extents[None, :] // S), axis=1)
        return total + out, tiles * (total + out + OVERHEAD * copies)


def search(
    band: Band,
    budget: int,
    halving: list[int],
    parts: dict[int, list[int]] | None = None,
    timed: bool = False,
    dmas: int = 1,
) -> list[int]:
    """The sizes this module's rule picks (see the module doc), `halving`
    when none beats them by GAIN.  `parts`: loop -> the extents of the parts
    an engine split cuts it into (a size that divides each makes no peel).
    `timed`: a band with a reduction loop (a convolution, a matmul) takes the
    sizes with the fewest estimated cycles instead (D-COMPILE-TILE-TIME; the
    estimate models the transform route's tiles, their copies split over
    the engine's `dmas` DMAs as `nem-split-transfers` will split them)."""
    n = len(band.extents)
    if n == 0 or any(e < 1 for e in band.extents) or list(halving) == list(band.extents):
        return halving  # one tile: nothing is copied twice
    model = _Model(band)
    if not model.linear_at(halving) or not model.linear_at(band.extents):
        return halving
    extents = np.array(band.extents, dtype=np.int64)
    parts = parts or {}
    lengths = [parts.get(i, [e]) for i, e in enumerate(band.extents)]
    red = set(model.reductions())
    units = batch_loops(band)

    def tiled(S: np.ndarray) -> np.ndarray:
        count: np.ndarray = (S < np.array([max(x) for x in lengths])[None, :]).sum(axis=1)
        return count

    cands = []
    for i, e in enumerate(band.extents):
        top = max(lengths[i])
        c = {d for d in _divisors(top) if all(x % d == 0 for x in lengths[i])} | {halving[i], e}
        if i in red:  # a reduction loop keeps the halving rule's tiles: each output
            c = {halving[i]}  # sums over the same tiles in the same order
        if i in units:  # one contraction per tile (D-COMPILE-BATCH-TILE)
            c = {1}
        cands.append(sorted(c))
    if np.prod([len(c) for c in cands], dtype=np.float64) > MAX_CANDIDATES:
        cands = [
            sorted({d for d in c if d & (d - 1) == 0} | {halving[i], band.extents[i]})
            for i, c in enumerate(cands)
        ]
        if np.prod([len(c) for c in cands], dtype=np.float64) > MAX_CANDIDATES:
            return halving
    S = np.array(list(itertools.product(*cands)), dtype=np.int64)
    need, moved = model.score(S, extents)
    H = np.array([halving], dtype=np.int64)
    ok = (need <= budget) & (tiled(S) <= tiled(H)[0])
    cut = np.zeros(len(S), dtype=bool)
    if timed:
        cut = (need <= budget) & _split_loop_cut(S, H, lengths, parts)
        ok |= cut
        for i, part in parts.items():  # the cuts of a short part (SHORT_CUT)
            cut &= -(-max(part) // S[:, i]) <= SHORT_CUT
        if not model.groups():  # grouped and depthwise convolutions only
            cut[:] = False
    h_need, h_moved = model.score(H, extents)
    if not ok.any():
        return halving
    moved = np.where(ok, moved, np.iinfo(np.int64).max)
    best = int(np.argmin(moved))
    pick = halving if h_need[0] <= budget and moved[best] > GAIN * h_moved[0] else S[best]
    if timed and any(band.extents[i] > 1 for i in red):
        pick = _by_cycles(model, S, ok, moved, pick, lengths, red, dmas, cut)
        pick = _lone_part_cut(model, S, need <= budget, moved, pick, lengths, parts, red, dmas)
    return [int(x) for x in pick]


def channel_cut(
    band: Band,
    sizes: Sequence[int],
    parts: dict[int, list[int]] | None,
    budget: int,
    dmas: int,
    nmus: int = 1,
    epilogue: int = 0,
    split_tiles: bool = True,
    pinned: bool = False,
) -> list[int]:
    """`sizes`, or where they leave every engine part of a convolution or
    matmul one tile, the sizes that cut one loop its output's innermost
    dimension depends on (the output channels) in two tiles or more in
    every part, dividing each, with the fewest estimated cycles
    (`tile_time`; ties: the smaller tile) when they take at most CUT_GAIN
    of the one tile's, and whose tiles' convolutions and `epilogue` (the
    elementwise ops each tile runs on its output after the convolution: a
    fused bias and epilogues, D-COMPILE-FUSE-L1), one after another
    (`_serial`), take at most CUT_GAIN of the one tile's cycles with its
    convolution spread over the engine's NMUs, where at most HOISTED_SHARE
    of the one tile's read bytes are in its input (the reads the cut loop
    does not index), and, for a window (a sum over more than one loop: a
    3x3 or 5x5 convolution), where its weights are at least CUT_WEIGHTS
    bytes (D-COMPILE-TILE-TIME, sessions 45-46 and 59).  `split_tiles`:
    the tile loops' convolutions are spread over the NMUs as the one
    tile's (`CompileOptions.split_nmus`, D-COMPILE-SPLIT-OPT).  `pinned`: the
    op is a part of a partial-sum split (D-COMPILE-TRANSFORM-PARTIALS),
    planned whole on its engine: a window's keeps its one tile (its
    siblings, planned apart, may cut in other tiles, loops that do not
    jam: an outside user's two 3x3 256 -> 126/130 at 7x7 side by side,
    cut in tiles of 21 and 9 channels, ran 10,076 -> 18,914 cycles); a
    1x1's is cut as any (one 1024 -> 250 at 7x7: 6,470 -> 4,902, session
    59).

    A part of one tile loads its input and all of its weights, then runs
    its convolution, then stores it: nothing overlaps (Inception v1's 1x1
    layers at 13x13, rows 4, 4, 4 and 1, each engine loading 49-64 KB of
    weights, about the layer's bound alone; SqueezeNet's fire 3x3 expand,
    48 -> 192 at 13x13, each engine's 83 KB of weights loaded in 1,304
    cycles before its convolution started).  Cut along the output
    channels, each tile loads its share of the weights (the input, which
    the loop does not index, is copied once outside it, D-COMPILE-HOIST)
    and two tiles are in flight: the second's weights load while the first
    computes, the first stores while the second computes (that 3x3 cut in
    4 tiles of 12 channels: 3,604 -> 2,657 cycles).  But the tiles'
    convolutions and epilogues share the engine's units: where the compute
    is the part's bulk (DenseNet-121's 28x28 1x1s, 196 pixels a part, with
    a bias, Mul, Add and Relu per tile) the cut gains nothing.  Those are
    cut again since their tiles are priced over two NMUs (session 59), but
    the one tile they are compared with does not fit L1 once measured: the
    tiles L1 makes of it run instead where `retiled_wins` prefers them
    (`l1_plan.one_tile_retiled`, session 60).  The cut loop is no
    reduction loop: each output's sum is the same, bit for bit."""
    pick = [int(x) for x in sizes]
    if not band.extents or any(e < 1 for e in band.extents) or not is_contraction(band):
        return pick
    model = _Model(band)
    red = set(model.reductions())
    summed = sum(1 for i in red if band.extents[i] > 1)
    if not summed:
        return pick
    if not model.linear_at(pick) or not model.linear_at(band.extents):
        return pick
    lengths = [(parts or {}).get(i, [e]) for i, e in enumerate(band.extents)]
    L = np.array([max(x) for x in lengths], dtype=np.int64)
    if any(s < x for s, x in zip(pick, L)):
        return pick  # a part is tiled already
    units = batch_loops(band)
    written = [coef for _, _, w, _, coef in model.rows if w]
    rows = []
    for i in range(len(L)):
        if i in red or i in units or not any(c[-1, i] for c in written):
            continue
        for d in _divisors(min(lengths[i])):
            if 2 * d <= min(lengths[i]) and all(x % d == 0 for x in lengths[i]):
                rows.append([*pick[:i], d, *pick[i + 1 :]])
    if not rows:
        return pick
    R = np.array([*rows, pick], dtype=np.int64)
    need, _ = model.score(R, L)
    est = model.cycles(np.minimum(R, L[None, :]), L, red, dmas)
    if est is None:
        return pick
    spread = est[-1] - _nmu_spread(model, np.minimum(R[-1], L), nmus)
    serial = _serial(model, np.minimum(R[:-1], L[None, :]), L, epilogue, nmus if split_tiles else 1)
    fits = (need[:-1] <= budget) & (serial <= CUT_GAIN * spread)
    if not fits.any():
        return pick
    best = int(np.argmin(np.where(fits, est[:-1], np.iinfo(np.int64).max)))
    if _hoisted_share(model, R[-1], rows[best]) > HOISTED_SHARE:
        return pick
    if summed > 1 and (pinned or _reads(model, R[-1], rows[best])[1] < CUT_WEIGHTS):
        return pick  # a window's, pinned or its weights loaded beside the layer before
    return rows[best] if est[best] <= CUT_GAIN * est[-1] else pick


def retiled_wins(
    band: Band,
    cut: Sequence[int],
    parts: dict[int, list[int]] | None,
    dmas: int,
    retiled: Sequence[int],
) -> bool:
    """Whether `retiled`, the tiles L1 makes of an engine part's one tile
    that `channel_cut` cut into `cut` (the one tile did not fit L1 once
    measured, D-COMPILE-L1), are to run instead of the cut: no more tiles
    a part than the cut, and fewer estimated cycles (`part_cycles`;
    D-COMPILE-TILE-TIME, session 60).  DenseNet-121's 28x28 1x1s (parts of
    7 rows, 128 output channels) are cut in 4 tiles of 32 channels, their
    input (125-175 KB) hoisted ahead of the tile loop; L1 re-tiles their
    one tile in 4 tiles of 7 columns, their weights (80-114 KB) hoisted
    instead: n157 ran 6,350 cut, 5,336 re-tiled.  More tiles lose where the
    estimate says they gain (Inception v2's 28x28 1x1s re-tiled in 14
    tiles of 2 columns against 8 of the cut, estimated 0.82 of its cycles:
    n81 1,906 -> 3,344, the model +0.8%), and so does a re-tiling that
    reloads the weights per row (Inception v1's 13x13 1x1s: estimated 2.8x
    the cut, n53 4,760 -> 13,950)."""
    L = np.array([max((parts or {}).get(i, [e])) for i, e in enumerate(band.extents)])
    tiles = [int(np.prod(-(-L // np.minimum(s, L)))) for s in (retiled, cut)]
    if tiles[0] > tiles[1]:
        return False
    mine, theirs = (part_cycles(band, s, parts, dmas) for s in (retiled, cut))
    return mine is not None and theirs is not None and mine < theirs


def _hoisted_share(model: _Model, one: np.ndarray, cut: list[int]) -> float:
    """The share of the one tile's read bytes in the reads the cut loop (the
    loop `cut` changes) does not index: copied once ahead of the tile loop
    (D-COMPILE-HOIST), they load whole before its first tile as before the
    one tile, and only the rest (the weights) can load beside a tile's
    convolution."""
    hoisted, cut_reads = _reads(model, one, cut)
    return hoisted / max(hoisted + cut_reads, 1)


def _reads(model: _Model, one: np.ndarray, cut: list[int]) -> tuple[int, int]:
    """The one tile's read bytes in reads the cut loop (the loop `cut`
    changes) does not index (its input), and in those it indexes (its
    weights)."""
    i = next(j for j, (a, b) in enumerate(zip(one, cut)) if a != b)
    boxes, width, written = model.boxes(one[None, :])
    deps = {k: False for k in boxes}
    for k, _, _, _, coef in model.rows:
        deps[k] = deps[k] or bool(coef[:, i].any())
    read = {k: int(np.prod(b[0])) * width[k] for k, b in boxes.items() if not written[k]}
    hoisted = sum(n for k, n in read.items() if not deps[k])
    return hoisted, sum(read.values()) - hoisted


def _serial(
    model: _Model, S: np.ndarray, lengths: np.ndarray, epilogue: int, nmus: int
) -> np.ndarray:
    """Cycles of each row of sizes `S`'s tiles of a part of `lengths` run one
    after another: each tile's convolution, over `nmus` NMUs where
    `nmu_split` spreads it (`_band_macs`: the tile loops' convolutions are
    split since session 48, D-COMPILE-NMU-SPLIT; 1 with `--no-split-nmus`),
    and its `epilogue` elementwise ops over its output (`tile_time`'s
    rates).  Two tiles in flight overlap their copies, not these:
    DenseNet-121's 28x28 1x1 cut into 4 tiles took 6,646 busy cycles where
    the one tile took 5,532 (session 46, each tile on one NMU)."""
    tiles = np.prod(-(-lengths[None, :] // S), axis=1)
    boxes, _, written = model.boxes(S)
    out = np.prod(next(b for k, b in boxes.items() if written[k]), axis=1)
    step = -(-out // tile_time.ADD_ELEMENTS) + tile_time.ADD_LATENCY
    conv = -(-_band_macs(model, S, nmus) // tile_time.NMU_MACS) + tile_time.NMU_LATENCY
    serial: np.ndarray = tiles * (conv + epilogue * step)
    return serial


def _nmu_spread(model: _Model, one: np.ndarray, nmus: int) -> int:
    """The cycles `tile_time` charges a one-tile convolution beyond its
    longest band where `nmu_split` spreads it over `nmus` NMUs; 0 where it
    stays whole."""
    macs = int(np.prod(one))
    band = int(_band_macs(model, one[None, :], nmus)[0])
    return -(-macs // tile_time.NMU_MACS) - (-(-band // tile_time.NMU_MACS))


def _band_macs(model: _Model, S: np.ndarray, nmus: int) -> np.ndarray:
    """The multiply-accumulates of the longest band of each row of sizes
    `S`'s convolution where `nmu_split` spreads it over `nmus` NMUs (bands
    of output rows: its output's dimension 1, a batch of one; at least
    `nmu_split.MIN_MACS`), all of them where it stays whole."""
    from nem.compile.nmu_split import MIN_MACS

    macs = np.prod(S, axis=1)
    boxes, _, written = model.boxes(S)
    out = next(b for k, b in boxes.items() if written[k])
    oh = out[:, 1] if out.shape[1] > 1 else np.ones(len(S), dtype=np.int64)
    k = np.minimum(nmus, oh)
    spread = (macs >= MIN_MACS) & (k >= 2)
    band: np.ndarray = np.where(spread, macs * (-(-oh // k)) // oh, macs)
    return band


def part_cycles(
    band: Band, sizes: Sequence[int], parts: dict[int, list[int]] | None, dmas: int
) -> int | None:
    """`tile_time`'s estimate of the longest engine part (`parts`: loop ->
    the parts' extents; None: the nest whole) tiled by `sizes` (None: no
    estimate, a band it does not model)."""
    model = _Model(band)
    if not model.linear_at(list(sizes)) or not model.linear_at(band.extents):
        return None
    lengths = [(parts or {}).get(i, [e]) for i, e in enumerate(band.extents)]
    L = np.array([max(x) for x in lengths], dtype=np.int64)
    rows = np.minimum(np.array([list(sizes)], dtype=np.int64), L[None, :])
    est = model.cycles(rows, L, set(model.reductions()), dmas)
    return None if est is None else int(est[0])


def _split_loop_cut(
    S: np.ndarray, H: np.ndarray, lengths: list[list[int]], parts: dict[int, list[int]]
) -> np.ndarray:
    """The rows of `S` that tile, beyond the loops `H` (the halving sizes)
    tiles, only an engine-split loop that `H` leaves whole in each part, and
    that loop in at least two tiles in every part (D-COMPILE-TILE-TIME): a
    part of one tile runs its copy in, its convolution and its copy out one
    after the other on one DMA and one NMU of its engine; two tiles in
    flight overlap them.  Every part has two or more, so no part is a lone
    tile beside the others' loops (D-NEM-JAM-ENGINES pairs loops)."""
    top = np.array([max(x) for x in lengths], dtype=np.int64)
    tiled = S < top[None, :]
    base = int((H < top[None, :]).sum())
    cut = np.zeros(len(S), dtype=bool)
    for i, extents in parts.items():
        if H[0, i] < top[i]:
            continue  # the halving sizes tile it already
        others = tiled.sum(axis=1) - tiled[:, i]
        cut |= tiled[:, i] & (2 * S[:, i] <= min(extents)) & (others <= base)
    return cut


def _lone_part_cut(
    model: _Model,
    S: np.ndarray,
    fit: np.ndarray,
    moved: np.ndarray,
    pick: Sequence[int],
    lengths: list[list[int]],
    parts: dict[int, list[int]],
    red: set[int],
    dmas: int,
) -> Sequence[int]:
    """`pick`, or where it leaves an engine part one tile (no loop tiled but
    the split loop, which the part's length leaves whole) and a longer part
    a tile loop along the split loop (DenseNet-121's 14x14 1x1 convolutions
    of 640-768 channels in 2-row tiles over parts of 4, 4, 4 and 2 rows), the
    sizes of `S` that fit (`fit`) and differ from `pick` only on that loop,
    dividing every part in two tiles or more, with the fewest estimated
    cycles (ties: the fewest bytes moved; D-COMPILE-TILE-TIME, session 32).
    The lone tile is straight-line code the jam cannot pair with the other
    parts' loops (D-NEM-JAM-ENGINES): it is issued after their jammed loop
    and runs after it, its part's whole chain (weights, copy in, convolution,
    copy out) added to the layer's time, which the estimate, one part from
    an idle start, does not see.  The split loop is no reduction loop, so
    each output's sum is the same: outputs are bit-identical."""
    P = np.array([list(pick)], dtype=np.int64)
    rows = np.zeros(len(S), dtype=bool)
    for i, ext in parts.items():
        whole = all(pick[j] >= max(x) for j, x in enumerate(lengths) if j != i)
        if i in red or not whole or not (min(ext) <= pick[i] < max(ext)):
            continue  # the short part has a tile loop the jam pairs, or is tiled already
        others = np.delete(S, i, axis=1) == np.delete(P, i, axis=1)
        divides = np.all([x % S[:, i] == 0 for x in ext], axis=0)
        rows |= fit & others.all(axis=1) & divides & (2 * S[:, i] <= min(ext))
    if not rows.any():
        return pick
    L = np.array([max(x) for x in lengths], dtype=np.int64)
    est = model.cycles(np.minimum(S[rows], L[None, :]), L, red, dmas)
    if est is None:
        return pick
    best = int(np.lexsort((moved[rows], est))[0])
    return [int(x) for x in S[rows][best]]


def _by_cycles(
    model: _Model,
    S: np.ndarray,
    ok: np.ndarray,
    moved: np.ndarray,
    pick: Sequence[int],
    lengths: list[list[int]],
    red: set[int],
    dmas: int,
    cut: np.ndarray,
) -> Sequence[int]:
    """The sizes among `S[ok]` with the fewest estimated cycles
    (`tile_time`; ties: the fewest bytes moved) when they take at most
    TIME_GAIN of `pick`'s, else `pick`; where that leaves a part one tile,
    the best of the cuts `S[cut]` of a short part instead (SHORT_CUT)."""
    L = np.array([max(x) for x in lengths], dtype=np.int64)
    rows = np.vstack([S[ok], np.array([pick], dtype=np.int64)])
    est = model.cycles(np.minimum(rows, L[None, :]), L, red, dmas)
    if est is None:
        return pick
    best = int(np.lexsort((moved[ok], est[:-1]))[0])
    at = best if est[best] <= TIME_GAIN * est[-1] else len(rows) - 1
    cuts = cut[ok]
    if not cuts.any() or (rows[at] < L).any():
        return [int(x) for x in rows[at]]  # no cut offered, or the part is tiled already
    k = np.flatnonzero(cuts)[int(np.lexsort((moved[ok][cuts], est[:-1][cuts]))[0])]
    return [int(x) for x in rows[k]]


def streamed(
    band: Band, sizes: Sequence[int], parts: dict[int, list[int]] | None = None
) -> dict[ir.Value, int]:
    """The bytes each memref the band reads moves into L1 in one engine part
    (`parts`: loop -> the extents of the parts; its longest is scored) tiled
    by `sizes`: its tile box times the runs of its copy where `hoist` leaves
    it (`tile_time.placed`).  What an engine split costs in reads is this,
    not the box a part spans: a part's weights are read once when their
    copy is hoisted out of its tile loops, once per tile when it is not
    (D-COMPILE-ENGINES, session 28)."""
    model = _Model(band)
    if not model.linear_at(sizes):
        return {}
    lengths = np.array([max((parts or {}).get(i, [e])) for i, e in enumerate(band.extents)])
    S = np.minimum(np.array([list(sizes)], dtype=np.int64), lengths[None, :])
    boxes, width, written = model.boxes(S)
    deps = {k: np.zeros(len(band.loops), dtype=bool) for k in boxes}
    for k, _, _, _, coef in model.rows:
        deps[k] |= coef.any(axis=0)
    read = [k for k in boxes if not written[k]]
    _, runs = tile_time.placed(S, lengths, [deps[k] for k in read])
    return {model.mems[k]: int(np.prod(boxes[k][0]) * width[k] * r[0]) for k, r in zip(read, runs)}
