"""A cache with a bound on its entries (issue 36: no cache grows with the
number of programs a process handles).

`BoundedCache` is a map from keys to values that holds at most `limit`
entries: storing a new key when it is full drops the oldest entry (first in,
first out).  FIFO rather than LRU: a hit is one dict lookup, with no reordering,
because the caches here sit on hot paths (the verifier reads region shapes
per task; a kernel's lookup precedes each run).  A cache of state is owned by
an instance (an interpreter, a source registry), so two of them never see
each other's entries; only a memo of a pure function of immutable values
(the decoded values of a dense array attribute, `attributes._dense_values`)
sits at module level, like `functools.lru_cache`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar, overload

__all__ = ["SEGMENT_CACHE_SIZE", "BoundedCache"]

SEGMENT_CACHE_SIZE = 4096
"""Entries of the memos keyed by an op's operand segment sizes (a few dozen
distinct ones in a real program)."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")


class BoundedCache(Generic[K, V]):
    """At most `limit` entries; the oldest goes first when a new key is stored."""

    __slots__ = ("limit", "_entries")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a cache holds at least one entry, not {limit}")
        self.limit = limit
        self._entries: OrderedDict[K, V] = OrderedDict()

    @overload
    def get(self, key: K) -> V | None: ...

    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        return self._entries.get(key, default)

    def __getitem__(self, key: K) -> V:
        return self._entries[key]

    def __setitem__(self, key: K, value: V) -> None:
        entries = self._entries
        if key not in entries and len(entries) >= self.limit:
            # OrderedDict: dropping the oldest is O(1); `del d[next(iter(d))]` on a
            # dict walks the freed front slots, slower the larger the limit
            entries.popitem(last=False)
        entries[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[K]:
        """The keys held, oldest first."""
        return list(self._entries)
