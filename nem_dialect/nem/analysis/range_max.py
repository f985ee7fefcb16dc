"""A segment tree over a block's live-token counts: add to a range of
statements, ask the largest count in a range, each in O(log n).
`nem-split-transfers` budgets a block's slices with it (`share`), one
query and one update per slice, so choosing the splits of a block of n
statements costs O(slices log n) instead of a rescan of the interval per
slice."""

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
