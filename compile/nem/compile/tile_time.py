"""Timed cycles of a tiled reduction nest, estimated (decision D-COMPILE-TILE-TIME).

`tile_cost` scores tile sizes by the bytes their copies move, summed over
the tiles.  On the convolutions that is not what decides the timed mode's
cycles (D-RT-COST): each copy costs `ceil(bytes / 32) + 4` cycles on one
DMA, the bytes it moves (`nem.dialect.semantics.transfers.moved_count`: a
box's elements, not the span they lie in), and the tile loops run their
iterations one after the other, except the innermost one, which keeps two
in flight (D-LOW-PIPE, D-RT-LOOP), so each iteration pays its whole chain
of copy, convolution, add and copy, and where a read copy sits (the loop
`hoist` leaves it at) decides how often it is paid.

For sizes `s` on the transform route (`structured.promote` stages every
operand per tile, D-LOW-VIEW; `hoist` moves each read-only copy out of the
loops it does not depend on, D-COMPILE-HOIST) the estimate of one engine
part's cycles is

    chain = max(copy(read box) at the innermost tiled loop, copy(out box))
            + ceil(MACs / 1024) + 2  +  ceil(out elements / 256) + 1
            + copy(out box)
    t     = max(ceil(trips(m) / w) * chain,   m: innermost tiled loop,
                ceil(trips(m) * dma(m) / D))  w: 2, 1 when m is a reduction
    t     = trips(j) * (late(j) + t)          each tiled loop j outside m
    t    += late(outside every tiled loop)

with `late(j)` what the longest read copy hoisted to loop j takes beyond a
tile's own copies in (it runs beside them: the first tile waits for both),
a read box's copy placed at the innermost tiled loop its box depends on,
and each copy split as `nem-split-transfers` will split it on the final
program (D-NEM-SPLIT-TRANSFERS; session 23): a box spanning `span(b)` bytes
in the array it is cut from, run `runs` times (the trips of the tiled loops
at or outside its loop), becomes k = `split_rule.slice_count(span,
rows, D, least_span(runs))` slices along its outermost dimension larger
than 1 (`rows` long) over the engine's D DMAs (the pass's own functions:
one home for the rule; but a copy run twice, which the pass splits from
`min-single` as one made once, `few-runs`, is priced by the rule for loops:
priced split, it moved ResNet-50's 1x1 tiles to picks that re-read their
weights, session 30), so

    copy(b) = ceil(ceil(rows / k) * bytes(b) / rows / 32) + 4     its largest slice
    dma(b)  = ceil(bytes(b) / 32) + 4 * k                          all its slices

with `bytes(b)` the box's elements times their bytes (`moved_count`'s count
for elements of a byte or more; the tile stage rounds a sub-byte element up
to a byte); `dma(m)` sums `dma` over the copies at loop m (the output's
twice: in and out).  Two iterations in flight share the engine's DMAs: a
tile whose copies are split fills them, so the loop takes at least its DMA
work over D (a copy on one DMA leaves them to the other iteration).  The
pass's live-token budget (DEV-17) is not modelled: a copy the estimate
splits may stay whole.  The rates are D-RT-COST's defaults (the tile stage
does not see the device's unit characteristics, only its DMA count); only
the order of the candidates matters.  Engine parts run one after the other
(a part's loop is issued after the previous part's iterations), so one part
is scored.  Measured against `nem-run --mode timed` on one-Conv models
(docs/compile.md, `test/unit/test_tile_time.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nem.dialect.semantics.cost import DEFAULT_PROFILE
from nem.passes.split_rule import least_span, slice_count


def _rate(unit: str, key: str) -> int:
    """One of D-RT-COST's default rates, read from its one home (the timed
    mode's profile, `DEFAULT_PROFILE`)."""
    return int(DEFAULT_PROFILE[unit][key])


DMA_BYTES, DMA_LATENCY = _rate("DMA", "bandwidth"), _rate("DMA", "latency")
NMU_MACS, NMU_LATENCY = _rate("NMU", "macs"), _rate("NMU", "latency")
ADD_ELEMENTS, ADD_LATENCY = _rate("CSTL", "throughput"), _rate("CSTL", "latency")


@dataclass(frozen=True)
class Box:
    """One copy of a tile, per candidate row of sizes: the bytes it moves,
    the bytes it spans on its wider side (from its first element to its
    last in the array it is cut from: what `nem-split-transfers` measures),
    and its length along its outermost dimension larger than 1 (1: none),
    along which the pass slices it."""

    nbytes: np.ndarray
    span: np.ndarray | None = None
    rows: np.ndarray | None = None


def _copy(box: Box, runs: np.ndarray, dmas: int) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, DMA work) of a copy run `runs` times: `nem-split-transfers`'
    slices (`split_rule.least_span`, `slice_count`: one home for the
    rule) over `dmas` DMAs, the largest slice's `ceil(bytes / 32) + 4` while
    the others run beside it, and the DMA cycles of all slices (each pays the
    latency).  Whole where `dmas` is 1 or the box gives no span or rows."""
    n = box.nbytes
    k = np.ones_like(n)
    if dmas > 1 and box.span is not None and box.rows is not None:
        k = slice_count(box.span, box.rows, dmas, least_span(runs))
    rows = np.ones_like(n) if box.rows is None else np.maximum(box.rows, 1)
    largest = -(-rows // k) * (n // rows)
    return -(-largest // DMA_BYTES) + DMA_LATENCY, -(-n // DMA_BYTES) + k * DMA_LATENCY


def placed(
    S: np.ndarray, lengths: np.ndarray, deps: list[np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Where `hoist` leaves each read copy of sizes `S` (per row) on loops of
    `lengths`, and how often it runs: for each read's loops `deps` (bool per
    loop), the innermost tiled loop its box depends on (-1: outside every
    tiled loop) and the trips of the tiled loops at or outside it (1 there).
    A read that depends on no tiled loop is copied once (hoisted weights);
    one below a tiled loop it does not depend on is copied again per trip
    of it (weights streamed per tile)."""
    n = S.shape[1]
    rows = np.arange(len(S))
    tiled = S < lengths[None, :]
    trips = -(-lengths[None, :] // S)
    runs_at = np.cumprod(np.where(tiled, trips, 1), axis=1)
    depth = [np.where(tiled & dep[None, :], np.arange(n)[None, :], -1).max(axis=1) for dep in deps]
    runs = [np.where(d >= 0, runs_at[rows, np.maximum(d, 0)], 1) for d in depth]
    return depth, runs


def estimate(
    S: np.ndarray,
    lengths: np.ndarray,
    reads: list[tuple[Box, np.ndarray]],
    out: tuple[Box, np.ndarray],
    reductions: set[int],
    dmas: int,
    split: bool = True,
) -> np.ndarray:
    """Estimated cycles (see the module doc) of each row of sizes `S` on
    loops of `lengths` (one engine part's) over `dmas` DMAs per engine, the
    copies split as `nem-split-transfers` splits them (`split`; False: as
    `--no-split-transfers` leaves them).  `reads`: per memref read, its box
    (one per row) and the loops it depends on (bool per loop); `out`: the
    written memref's box and its elements (one per row)."""
    n = S.shape[1]
    rows = np.arange(len(S))
    tiled = S < lengths[None, :]
    trips = -(-lengths[None, :] // S)
    runs_at = np.cumprod(np.where(tiled, trips, 1), axis=1)
    loop_idx = np.where(tiled, np.arange(n)[None, :], -1)
    inner = loop_idx.max(axis=1)  # innermost tiled loop, -1: none
    depth, runs = placed(S, lengths, [dep for _, dep in reads])
    over = dmas if split else 1
    priced = [_copy(b, r, over) for (b, _), r in zip(reads, runs)]
    cost = [c for c, _ in priced]

    def hoisted_to(j: np.ndarray) -> np.ndarray:
        """The longest read copy placed at loop `j` (per row)."""
        h = np.zeros(len(S), dtype=np.int64)
        for d, c in zip(depth, cost):
            h = np.maximum(h, np.where(d == j, c, 0))
        return h

    out_box, out_elems = out
    out_copy, out_work = _copy(out_box, np.where(inner >= 0, runs_at[:, -1], 1), over)
    macs = np.prod(S, axis=1)
    first = np.maximum(hoisted_to(inner), out_copy)  # a tile's copies in
    chain = (
        first
        + (-(-macs // NMU_MACS) + NMU_LATENCY)
        + (-(-out_elems // ADD_ELEMENTS) + ADD_LATENCY)
        + out_copy
    )
    # an iteration's DMA cycles (its copies in, the output's in and out): two
    # iterations in flight share the engine's DMAs, which a split copy fills
    work = 2 * out_work
    for d, (_, w) in zip(depth, priced):
        work = work + np.where(d == inner, w, 0)
    window = np.array([1 if i in reductions else 2 for i in range(n)] + [1])
    m_trips = np.where(inner >= 0, trips[rows, inner], 1)
    t = np.maximum(-(-m_trips // window[inner]) * chain, -(-(m_trips * work) // dmas))
    for j in range(n - 1, -1, -1):
        outer = tiled[:, j] & (j < inner)
        late = np.maximum(hoisted_to(np.full(len(S), j)) - first, 0)
        t = np.where(outer, trips[:, j] * (late + t), t)
    cycles: np.ndarray = t + np.where(
        inner >= 0, np.maximum(hoisted_to(np.full(len(S), -1)) - first, 0), 0
    )
    return cycles
