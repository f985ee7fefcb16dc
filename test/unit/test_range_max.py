"""`MaxTree` (the segment tree `nem-split-transfers` budgets tokens with)
against a list updated and scanned directly, on random range additions and
queries; `MinTable` (where `retire_done` finds a store done) against a
backward scan."""

import random
from collections.abc import Iterator

import pytest

from nem.analysis.range_max import MaxTree, MinTable

SIZES = [1, 2, 5, 8, 13, 64]


def _ranges(rng: random.Random, n: int) -> Iterator[tuple[int, int]]:
    """300 random ranges `lo..hi` (inclusive) over `n` statements."""
    for _ in range(300):
        lo = rng.randrange(n)
        yield lo, rng.randrange(lo, n)


@pytest.mark.parametrize("n", SIZES)
def test_range_max_matches_a_scan(n):
    rng = random.Random(n)
    values = [rng.randint(0, 32) for _ in range(n)]
    tree = MaxTree(values)
    for lo, hi in _ranges(rng, n):
        if rng.random() < 0.5:
            v = rng.randint(-3, 5)
            tree.add(lo, hi, v)
            for i in range(lo, hi + 1):
                values[i] += v
        assert tree.max(lo, hi) == max(values[lo : hi + 1])
    assert tree.max(0, n - 1) == max(values)


@pytest.mark.parametrize("n", SIZES)
def test_min_table_finds_the_suffix_a_scan_finds(n):
    """`MinTable.first_at_least` against the backward scan `retire_done`
    made before it (the least k whose values k..hi all reach the bound)."""
    rng = random.Random(n)
    values = [rng.randint(0, 32) for _ in range(n)]
    table = MinTable(values)
    for lo, hi in _ranges(rng, n):
        bound = rng.randint(0, 33)
        k = hi + 1
        while k > lo and values[k - 1] >= bound:
            k -= 1
        assert table.first_at_least(lo, hi, bound) == k
