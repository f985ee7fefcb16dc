"""`MaxTree` (the segment tree `nem-split-transfers` budgets tokens with)
against a list updated and scanned directly, on random range additions and
queries."""

import random

import pytest

from nem.analysis.range_max import MaxTree


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13, 64])
def test_range_max_matches_a_scan(n):
    rng = random.Random(n)
    values = [rng.randint(0, 32) for _ in range(n)]
    tree = MaxTree(values)
    for _ in range(300):
        lo = rng.randrange(n)
        hi = rng.randrange(lo, n)
        if rng.random() < 0.5:
            v = rng.randint(-3, 5)
            tree.add(lo, hi, v)
            for i in range(lo, hi + 1):
                values[i] += v
        assert tree.max(lo, hi) == max(values[lo : hi + 1])
    assert tree.max(0, n - 1) == max(values)
