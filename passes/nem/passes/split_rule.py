"""Which transfers `nem-split-transfers` splits and into how many slices
(decision D-NEM-SPLIT-TRANSFERS): the thresholds and the functions that apply
them (`least_span`, `slice_count`, `even_parts`), in a module of their own so that the pass and the tile stage's
estimate (`nem.compile.tile_time`, which prices its candidates' copies split
as the pass will split them) share one home for the rule, and the tile
stage's splits (`nem.compile.dma_split`, `nmu_split`) the same even parts."""

from __future__ import annotations

import numpy as np

Num = int | np.ndarray
"""A byte or trip count, or an array of them (one per tile-size candidate)."""

MIN_BYTES = 16384
"""Transfers spanning fewer bytes than this stay whole (D-COMPILE-DMA-SPLIT's
threshold for copies in tile loops)."""
MIN_MOVED = 256 << 10
"""Transfers that span fewer bytes than this over all their runs (their span
times their loops' trip counts) stay whole: each slice is one more task for
`nem-verify`'s analyses on the final program (the compile's time), and the
cycles a split saves grow with the bytes it moves.  256 KiB since session 23
(8 MiB before), when D-COMPILE-TILE-TIME's estimate learned the split."""
MIN_ONCE = 262144
"""A transfer splits from this span on, whatever it moves over its runs (not
`min-moved`): a weight slice staged per tile takes as long on every run as
one staged once.  Smaller ones in loops are many in a DenseNet."""
MIN_SINGLE = MIN_BYTES
"""A transfer that runs once (in no loop) splits from this span on: a small
layer's weights or input staged before its tile loop (30-150 KB on one DMA)
sit on the path to its first tile.  In the pass, from `min-few` where that
is smaller and `few-runs` is more than 1 (session 50): a copy made once is
one of few runs, and Inception v1's 12 KB weight slices and 13 KB row stores
of its 28x28 1x1 branches, staged once, ran whole on one DMA of four
(n16: 1,170 cycles, 4.28x its bound; 650 split).  Those take the tokens
the copies split from here leave (`split_transfers.Choice._once_only`)."""
FEW_RUNS = 8
"""A transfer in a loop run at most this many times (its loops' trip counts
multiplied) splits from `min-few`, whatever it moves over its runs: a small
layer's row tiles copied whole on one DMA while the engine's others idled
(ShuffleNet's 14x14 depthwise tiles, two per engine part: 52 KB, 1,636 of a
tile's 2,168 cycles, session 30; its grouped 1x1 tiles, 7 per part at 28x28,
15,232 bytes each way, the next pair's loads after this pair's stores with 2
DMAs of 4 busy, session 32).  Few runs bound the slices added (at most
`few-runs` x 3 per copy).  The pass's rule only: D-COMPILE-TILE-TIME's
estimate prices them as `least_span`'s default does (priced split, it moved
ResNet-50's n54, n64 and n74 to tiles re-reading their weights, +2,564
cycles each; D-NEM-SPLIT-TRANSFERS, session 30)."""
MIN_PIECE = 4096
"""No slice smaller than this (bytes): a transfer's fixed latency stays small
beside its bytes."""
MIN_FEW = 2 * MIN_PIECE
"""A transfer in a loop of at most `few-runs` runs splits from this span on
(under `min-bytes`): the least that makes two slices of `min-piece`
(ShuffleNet's 15,232-byte row tiles make three; session 32)."""
RETIRE_BELOW = 1 << 48
"""A transfer moving fewer bytes than this whose token a loop consumes from
outside is waited for before the loop (`retire_held`) instead of held live
across it: every one by default (256 TiB).  A padded buffer's border fill,
done long before the loop's first tile needs it (session 23: 16 KiB), and
a layer's weights staged before its tile loop, which the first tile waits
for anyway: held, their slices' tokens were the loop's, and DenseNet-121's
64-245 KB weights stayed whole on one DMA (session 25: `min-once`).  From
session 56 the weights spanning `min-once` too: held (`reserved`), each
engine part's 409,600-byte weights of DenseNet-121's 14x14 1x1 layers got 3,
3, 2 and 2 slices of the 32 tokens and the parts on two DMAs waited 6,400
cycles for them; waited for, 4 each (D-NEM-SPLIT-TRANSFERS)."""


def least_span(
    runs: Num,
    min_bytes: int = MIN_BYTES,
    min_moved: int = MIN_MOVED,
    min_once: int = MIN_ONCE,
    min_single: int = MIN_SINGLE,
    few: int = 1,
    min_few: int | None = None,
) -> np.ndarray:
    """The span (bytes) from which a transfer between L1 and DDR/L2 that runs
    `runs` times (its loops' trip counts multiplied) splits: `min-few`
    (None: `min-single`) in loops run at most `few` times in all (the pass:
    `few-runs`), and in no loop too where `few` is more than 1 and `min-few`
    is the smaller (a copy made once is one of few runs), else `min-single`
    there; in a loop `min-moved` over its runs, or `min-once` on each (it
    moves that on every run, whatever the trip counts); never under
    `min-bytes` but where runs are few.  Elementwise on arrays:
    D-COMPILE-TILE-TIME's estimate prices its candidates' copies by this
    rule (`nem.compile.tile_time`), `few` left at 1: only the pass splits
    from `min-few` what runs at most `few` times."""
    looped = np.maximum(min_bytes, np.minimum(min_once, -(-min_moved // np.maximum(runs, 1))))
    once = max(min_bytes, min_single)
    short = once if min_few is None else min_few
    single = once if few <= 1 else min(once, short)
    return np.where(
        np.less_equal(runs, 1), single, np.where(np.less_equal(runs, few), short, looped)
    )


def slice_count(
    span: Num, rows: Num, dmas: int, least: Num, min_piece: int = MIN_PIECE
) -> np.ndarray:
    """How many slices a transfer spanning `span` bytes, `rows` long along
    its outermost dimension larger than 1, becomes over `dmas` units: one
    per unit, no more than its rows, none under `min-piece`; 1 (whole) under
    `least` or where fewer than two would be made.  Elementwise on arrays,
    as `least_span`."""
    k = np.minimum(np.minimum(dmas, rows), span // max(1, min_piece))
    return np.where(np.greater_equal(span, least) & (k >= 2), k, 1)


def even_parts(n: int, k: int) -> list[tuple[int, int]]:
    """`n` items in `k` consecutive parts as (start, count), the first
    `n mod k` one larger (a transfer's slices, a convolution's row bands)."""
    q, r = divmod(n, k)
    parts, at = [], 0
    for i in range(k):
        m = q + (1 if i < r else 0)
        parts.append((at, m))
        at += m
    return parts
