"""`live_pairs`, the candidate pairs of one buffer's accesses (issue 30),
against its definition: random accesses of a few statements, some writes
covering their bounds, some tasks completing a few statements later, some
accesses of named members (the arena ordering of `nem-share-buffers`).

* Without members: within a statement, the overlapping pairs with a write
  (and a write with its own other instances); across statements, an earlier
  access `x` with a later `y` when their bounds overlap, one is a write, x's
  task has not completed before y's statement, and covering writes of the
  statements strictly between have not written every byte of x's bounds.
* With members: the same list, in the same order, less the pairs of one
  member, which are never built (DenseNet-121: 37k of 69.5k, D-LOW-SHARE).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from nem.analysis.hazard_report import StaticAccess, live_pairs

INF = float("inf")

accesses = st.lists(
    st.tuples(
        st.integers(0, 5),  # statement
        st.integers(0, 12),  # lo
        st.integers(1, 6),  # length
        st.booleans(),  # write
        st.booleans(),  # a write covering its bounds
        st.sampled_from([1, 2, 9]),  # statements until its task has completed (9: never)
        st.sampled_from([None, "a", "b"]),  # member
    ),
    max_size=24,
)


def _build(rows):
    accs, covers, done, member = [], {}, {}, {}
    for top, lo, n, write, covers_it, after, m in sorted(rows, key=lambda r: r[0]):
        acc = StaticAccess(None, None, write, 0, None, None, None, lo, lo + n, top, ())  # type: ignore[arg-type]
        accs.append(acc)
        covers[id(acc)] = (lo, lo + n) if write and covers_it else None
        done[id(acc)] = INF if after == 9 else top + after
        member[id(acc)] = m
    return accs, covers, done, member


def _expected(accs, covers, done) -> Counter:
    """The pairs by the definition (unordered within a statement)."""
    out: Counter = Counter()
    for i, x in enumerate(accs):
        for y in accs[i:]:
            if not (x.lo < y.hi and y.lo < x.hi) or not (x.write or y.write):
                continue
            if y.top == x.top:
                out[frozenset((id(x), id(y)))] += 1
                continue
            if done[id(x)] <= y.top:
                continue
            painted = {
                b
                for w in accs
                if x.top < w.top < y.top and covers[id(w)] is not None
                for b in range(*covers[id(w)])
            }
            if not set(range(int(x.lo), int(x.hi))) <= painted:
                out[(id(x), id(y))] += 1
    return out


@settings(max_examples=300, deadline=None, derandomize=True)
@given(accesses)
def test_live_pairs_are_the_pairs_their_definition_names(rows):
    accs, covers, done, member = _build(rows)
    pairs = live_pairs(accs, lambda x: done[id(x)], lambda w: covers[id(w)])
    got = Counter(frozenset((id(x), id(y))) if x.top == y.top else (id(x), id(y)) for x, y in pairs)
    assert got == _expected(accs, covers, done)
    # with members: no pair of one member is built, the others come in the same order
    mine = live_pairs(accs, lambda x: done[id(x)], lambda w: covers[id(w)], lambda a: member[id(a)])
    same = [
        p for p in pairs if member[id(p[0])] is not None and member[id(p[0])] == member[id(p[1])]
    ]
    assert mine == [p for p in pairs if p not in same]
