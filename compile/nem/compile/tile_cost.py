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
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from mlir import ir

from nem.compile.nest_ir import Band, access_box

GAIN = 0.75
"""Take the searched sizes only when they move at most this share of the
halving sizes' bytes (a change of tiles for a small gain is not worth the
compile's and the reader's attention)."""
OVERHEAD = 2048
"""Bytes charged per copy of a tile (a transfer's setup, a task to schedule)."""
MAX_CANDIDATES = 200_000
"""Size combinations scored at most (candidates per loop are thinned to the
powers of two dividing it beyond that)."""


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
        ones = [1] * n
        for acc in band.accesses:
            base = np.array(self._ext(acc, ones), dtype=np.int64)
            coef = np.zeros((len(base), n), dtype=np.int64)
            for i, e in enumerate(band.extents):
                if e >= 2:
                    two = list(ones)
                    two[i] = 2
                    coef[:, i] = np.array(self._ext(acc, two)) - base
            if acc.memref not in self.mems:
                self.mems.append(acc.memref)
            t = ir.MemRefType(acc.memref.type)
            width = max(t.element_type.width // 8, 1) if hasattr(t.element_type, "width") \
                else 8
            self.rows.append((self.mems.index(acc.memref), width, acc.write, base, coef))

    def _ext(self, acc, sizes: Sequence[int]) -> list[int]:
        ivs = {v: (0, s - 1) for v, s in zip(self.ivs, sizes)}
        ivs.update({v: (0, e - 1) for v, e in self.band.inner.items()})
        return [hi - lo + 1 for lo, hi in access_box(acc, ivs)]

    def linear_at(self, sizes: Sequence[int]) -> bool:
        """Whether the affine model gives the measured extents at `sizes`."""
        s = np.array(sizes, dtype=np.int64) - 1
        return all(list(base + coef @ s) == self._ext(self.band.accesses[k], sizes)
                   for k, (_, _, _, base, coef) in enumerate(self.rows))

    def reductions(self) -> list[int]:
        """The loops no written box depends on."""
        written = [coef for _, _, w, _, coef in self.rows if w]
        return [i for i in range(len(self.band.loops))
                if written and all(not coef[:, i].any() for coef in written)]

    def deps(self) -> list[set[int]]:
        """Per memref, the loops its boxes move with."""
        out: list[set[int]] = [set() for _ in self.mems]
        for k, _, _, _, coef in self.rows:
            out[k] |= {i for i in range(coef.shape[1]) if coef[:, i].any()}
        return out

    def orders(self, tiled_red: bool) -> list[list[int]]:
        """The loop orders tried with hoisted copies: the given one first, then
        per read-only memref the parallel loops it moves with outermost (the
        others after them, the reductions innermost as they are), so that its
        copy leaves the loops inside them (`nem.compile.hoist`)."""
        n = len(self.band.loops)
        ident = list(range(n))
        red = [i for i in self.reductions() if self.band.extents[i] > 1]
        if tiled_red or red != ident[n - len(red):]:
            return [ident]   # reductions stay where they are, and innermost
        par = [i for i in ident if i not in red]
        written = {k for k, _, w, _, _ in self.rows if w}
        out = [ident]
        for k, dep in enumerate(self.deps()):
            if k in written:
                continue
            order = [i for i in par if i in dep] + [i for i in par if i not in dep] + red
            if order not in out:
                out.append(order)
        return out

    def score(self, S: np.ndarray, extents: np.ndarray,
              orders: list[list[int]] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(footprint + output bytes, bytes moved) of each row of sizes `S`;
        with `orders`, the bytes moved has one row per order (axis 0), each
        read-only memref copied once per iteration of the loops outside the
        innermost loop it moves with (its copy hoisted out of the others)."""
        m = len(self.mems)
        boxes: dict[int, np.ndarray] = {}
        width = [1] * m
        written = [False] * m
        for k, w, wr, base, coef in self.rows:
            ext = base[None, :] + (S - 1) @ coef.T
            boxes[k] = np.maximum(boxes[k], ext) if k in boxes else ext
            width[k], written[k] = w, written[k] or wr
        total = np.zeros(len(S), dtype=np.int64)
        out = np.zeros(len(S), dtype=np.int64)
        for k in range(m):
            b = np.prod(boxes[k], axis=1) * width[k]
            total += b
            if written[k]:
                out += b
        copies = m + sum(written)
        per = -(-extents[None, :] // S)
        tiles = np.prod(per, axis=1)
        if orders is None:
            return total + out, tiles * (total + out + OVERHEAD * copies)
        deps = self.deps()
        rows = []
        rows_at = np.arange(len(S))
        for order in orders:
            ordered = per[:, order]
            cum = np.cumprod(ordered, axis=1)
            moved = tiles * (out + OVERHEAD * sum(written))
            for k in range(m):
                b = np.prod(boxes[k], axis=1) * width[k] + OVERHEAD
                if written[k]:
                    moved = moved + tiles * b
                    continue
                # the innermost loop made (more than one tile) that the copy moves with
                dep = np.array([i in deps[k] for i in order])[None, :] & (ordered > 1)
                last = np.where(dep, np.arange(len(order))[None, :], -1).max(axis=1)
                count = np.where(last >= 0, cum[rows_at, np.maximum(last, 0)], 1)
                moved = moved + count * b
            rows.append(moved)
        return total + out, np.array(rows)


def search(band: Band, budget: int, halving: list[int],
           parts: dict[int, list[int]] | None = None) -> list[int]:
    """The sizes this module's rule picks (see the module doc), `halving`
    when none beats them by GAIN.  `parts`: loop -> the extents of the parts
    an engine split cuts it into (a size that divides each makes no peel)."""
    return plan(band, budget, halving, parts)[0]


def plan(band: Band, budget: int, halving: list[int],
         parts: dict[int, list[int]] | None = None,
         hoist: bool = False) -> tuple[list[int], list[int] | None]:
    """`search`'s sizes, and a loop order (None: the band's own).  With
    `hoist` (the transform route, whose read-only tile copies leave the
    loops they do not depend on: `nem.compile.hoist`, D-COMPILE-HOIST), the
    bytes moved count each read-only copy once per iteration of the loops
    outside it, over the loop orders `_Model.orders` offers (the parallel
    loops of a weight outermost), and the cheapest sizes and order win."""
    n = len(band.extents)
    if n == 0 or any(e < 1 for e in band.extents) or list(halving) == list(band.extents):
        return halving, None      # one tile: nothing is copied twice
    model = _Model(band)
    if not model.linear_at(halving) or not model.linear_at(band.extents):
        return halving, None
    extents = np.array(band.extents, dtype=np.int64)
    parts = parts or {}
    lengths = [parts.get(i, [e]) for i, e in enumerate(band.extents)]
    red = set(model.reductions())

    def tiled(S: np.ndarray) -> np.ndarray:
        return (S < np.array([max(x) for x in lengths])[None, :]).sum(axis=1)

    cands = []
    for i, e in enumerate(band.extents):
        top = max(lengths[i])
        c = {d for d in _divisors(top) if all(x % d == 0 for x in lengths[i])} | {halving[i], e}
        if i in red:       # a reduction loop keeps the halving rule's tiles: each output
            c = {halving[i]}  # sums over the same tiles in the same order
        cands.append(sorted(c))
    if np.prod([len(c) for c in cands], dtype=np.float64) > MAX_CANDIDATES:
        cands = [sorted({d for d in c if d & (d - 1) == 0} | {halving[i], band.extents[i]})
                 for i, c in enumerate(cands)]
        if np.prod([len(c) for c in cands], dtype=np.float64) > MAX_CANDIDATES:
            return halving, None
    S = np.array(list(itertools.product(*cands)), dtype=np.int64)
    H = np.array([halving], dtype=np.int64)
    need, moved = model.score(S, extents)
    h_need, h_moved = model.score(H, extents)
    ok = (need <= budget) & (tiled(S) <= tiled(H)[0])
    if not ok.any():
        return halving, None
    best = int(np.argmin(np.where(ok, moved, np.iinfo(np.int64).max)))
    flat = halving if h_need[0] <= budget and moved[best] > GAIN * h_moved[0] else \
        [int(x) for x in S[best]]
    if not hoist:
        return flat, None
    # hoisted copies: no more tiles than the per-tile plan (each tile loop
    # iteration costs its latency chain, which bytes do not show), fewer bytes
    F = np.array([flat], dtype=np.int64)
    orders = model.orders(any(halving[i] < band.extents[i] for i in red))
    _, moved2 = model.score(S, extents, orders)
    _, f_moved = model.score(F, extents, orders[:1])
    ok &= _tiles(S, extents) <= _tiles(F, extents)[0]
    moved2 = np.where(ok[None, :], moved2, np.iinfo(np.int64).max)
    o, pick = (int(x) for x in np.unravel_index(int(np.argmin(moved2)), moved2.shape))
    if moved2[o, pick] >= f_moved[0, 0]:
        return flat, None
    sizes = [int(x) for x in S[pick]]
    order = [i for i in orders[o] if sizes[i] < band.extents[i]]   # the loops made
    return sizes, (None if order == sorted(order) else orders[o])


def _tiles(S: np.ndarray, extents: np.ndarray) -> np.ndarray:
    return np.prod(-(-extents[None, :] // S), axis=1)
