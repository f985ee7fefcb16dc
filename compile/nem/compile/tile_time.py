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
    t     = ceil(trips(m) / w) * chain        m: innermost tiled loop,
                                              w: 2, 1 when m is a reduction
    t     = trips(j) * (late(j) + t)          each tiled loop j outside m
    t    += late(outside every tiled loop)

with `late(j)` what the longest read copy hoisted to loop j takes beyond a
tile's own copies in (it runs beside them: the first tile waits for both),
`copy(b) = ceil(bytes(b) / 32) + 4` with `bytes(b)` the box's elements
times their bytes (`moved_count`'s count for elements of a byte or more;
the tile stage rounds a sub-byte element up to a byte), a read box's copy
placed at the innermost tiled loop its box depends on.  The rates are
D-RT-COST's defaults (the tile stage does not see the device's unit
characteristics); only the order of the candidates matters.  Engine parts
run one after the other (a part's loop is issued after the previous part's
iterations), so one part is scored.  Measured against `nem-run --mode
timed` on one-Conv models (docs/compile.md, `test/unit/test_tile_time.py`).
"""

from __future__ import annotations

import numpy as np

DMA_BYTES, DMA_LATENCY = 32, 4
NMU_MACS, NMU_LATENCY = 1024, 2
ADD_ELEMENTS, ADD_LATENCY = 256, 1


def _copy(nbytes: np.ndarray) -> np.ndarray:
    return -(-nbytes // DMA_BYTES) + DMA_LATENCY


def estimate(
    S: np.ndarray,
    lengths: np.ndarray,
    reads: list[tuple[np.ndarray, np.ndarray]],
    out: tuple[np.ndarray, np.ndarray],
    reductions: set[int],
) -> np.ndarray:
    """Estimated cycles (see the module doc) of each row of sizes `S` on
    loops of `lengths` (one engine part's).  `reads`: per memref read, its
    box bytes (one per row) and the loops its box depends on (bool per
    loop); `out`: the written memref's box bytes and box elements (one per
    row)."""
    n = S.shape[1]
    rows = np.arange(len(S))
    tiled = S < lengths[None, :]
    trips = -(-lengths[None, :] // S)
    loop_idx = np.where(tiled, np.arange(n)[None, :], -1)
    inner = loop_idx.max(axis=1)  # innermost tiled loop, -1: none
    depth = [
        np.where(tiled & dep[None, :], np.arange(n)[None, :], -1).max(axis=1) for _, dep in reads
    ]
    cost = [_copy(b) for b, _ in reads]

    def hoisted_to(j: np.ndarray) -> np.ndarray:
        """The longest read copy placed at loop `j` (per row)."""
        h = np.zeros(len(S), dtype=np.int64)
        for d, c in zip(depth, cost):
            h = np.maximum(h, np.where(d == j, c, 0))
        return h

    out_bytes, out_elems = out
    macs = np.prod(S, axis=1)
    first = np.maximum(hoisted_to(inner), _copy(out_bytes))  # a tile's copies in
    chain = (
        first
        + (-(-macs // NMU_MACS) + NMU_LATENCY)
        + (-(-out_elems // ADD_ELEMENTS) + ADD_LATENCY)
        + _copy(out_bytes)
    )
    window = np.array([1 if i in reductions else 2 for i in range(n)] + [1])
    m_trips = np.where(inner >= 0, trips[rows, inner], 1)
    t = -(-m_trips // window[inner]) * chain
    for j in range(n - 1, -1, -1):
        outer = tiled[:, j] & (j < inner)
        late = np.maximum(hoisted_to(np.full(len(S), j)) - first, 0)
        t = np.where(outer, trips[:, j] * (late + t), t)
    cycles: np.ndarray = t + np.where(
        inner >= 0, np.maximum(hoisted_to(np.full(len(S), -1)) - first, 0), 0
    )
    return cycles
