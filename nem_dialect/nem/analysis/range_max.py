"""A segment tree over a block's live-token counts: add to a range of
statements, ask the largest count in a range, each in O(log n).
`nem-split-transfers` budgets a block's slices with it (`share`), one
query and one update per slice, so choosing the splits of a block of n
statements costs O(slices log n) instead of a rescan of the interval per
slice.  `MinTable` answers, over a fixed list, where the suffix of a
range whose values all reach a bound begins, in O(log n): `retire_done`
asks it where a store is done for every transfer the split left whole,
without a rescan of the store's interval per transfer."""

from __future__ import annotations

from collections.abc import Sequence


class MaxTree:
    """Live-token counts of one block's statements under range additions,
    with their maximum over a range: a segment tree (each query and update
    O(log n), so choosing a block's splits stays linear-logarithmic)."""

    def __init__(self, values: Sequence[int]):
        self.size = size = 1 << max(0, len(values) - 1).bit_length()
        self.top = [0] * (2 * size)  # max of a node's range, its own additions included
        self.add_ = [0] * (2 * size)  # additions to a node's whole range
        self.top[size : size + len(values)] = values
        for i in range(size - 1, 0, -1):
            self.top[i] = max(self.top[2 * i], self.top[2 * i + 1])

    def add(self, lo: int, hi: int, v: int, i: int = 1, a: int = 0, b: int = -1) -> None:
        """Add `v` to the statements `lo..hi` (inclusive)."""
        b = self.size - 1 if b < 0 else b
        if hi < a or b < lo:
            return
        if lo <= a and b <= hi:
            self.top[i] += v
            self.add_[i] += v
            return
        m = (a + b) // 2
        self.add(lo, hi, v, 2 * i, a, m)
        self.add(lo, hi, v, 2 * i + 1, m + 1, b)
        self.top[i] = max(self.top[2 * i], self.top[2 * i + 1]) + self.add_[i]

    def max(self, lo: int, hi: int, i: int = 1, a: int = 0, b: int = -1) -> int:
        """The largest count among the statements `lo..hi` (inclusive)."""
        b = self.size - 1 if b < 0 else b
        if hi < a or b < lo:
            return -(1 << 62)
        if lo <= a and b <= hi:
            return self.top[i]
        m = (a + b) // 2
        inner = max(self.max(lo, hi, 2 * i, a, m), self.max(lo, hi, 2 * i + 1, m + 1, b))
        return inner + self.add_[i]


class MinTable:
    """A sparse table over a fixed list: `levels[j][i]` is the least of
    `values[i : i + 2**j]` (O(n log n) to build), so the longest suffix of a
    range whose values all reach a bound is found by trying each power of
    two once, longest first (`first_at_least`, O(log n))."""

    def __init__(self, values: Sequence[int]):
        self.levels = [list(values)]
        w = 1
        while 2 * w <= len(values):
            prev = self.levels[-1]
            self.levels.append([min(prev[i], prev[i + w]) for i in range(len(prev) - w)])
            w *= 2

    def first_at_least(self, lo: int, hi: int, bound: int) -> int:
        """The least `k` in `lo..hi` (inclusive) with every value of
        `k..hi` at least `bound`; `hi + 1` when the value at `hi` is below it."""
        k = hi + 1
        for j in range(len(self.levels) - 1, -1, -1):
            w = 1 << j
            if k - w >= lo and self.levels[j][k - w] >= bound:
                k -= w
        return k
