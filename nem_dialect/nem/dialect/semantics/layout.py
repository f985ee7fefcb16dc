"""Memory layout of one level (DEV-16, D-SEM-LAYOUT): the placement the capacity
check verifies is the one the runtime uses."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

K = TypeVar("K")


@dataclass(frozen=True)
class Slot(Generic[K]):
    """One buffer instance placed in a level: `key` identifies it for the caller."""

    key: K
    offset: int
    size: int
    align: int

    @property
    def end(self) -> int:
        return self.offset + self.size


def layout(items: Sequence[tuple[K, int, int]]) -> list[Slot[K]]:
    """Place `(key, size, align)` buffer instances of one level: by decreasing
    `align` (declaration order among equals), each at the next multiple of its
    align.  Buffers are opaque (BUF-07), so the order is free; decreasing
    alignment avoids most padding.  The capacity check (DEV-16) verifies this
    layout and the runtime allocates it, so the two agree byte for byte."""
    order = sorted(range(len(items)), key=lambda k: -max(1, items[k][2]))
    out: list[Slot[K] | None] = [None] * len(items)
    top = 0
    for k in order:
        key, size, align = items[k]
        align = max(1, align)
        off = -(-top // align) * align
        out[k] = Slot(key, off, size, align)
        top = off + size
    return [s for s in out if s is not None]


class Placement(Protocol):
    """Anything placed in a level's memory (a `Slot`, a memory map's entry)."""

    @property
    def end(self) -> int: ...


def footprint(slots: Iterable[Placement]) -> int:
    """The bytes a level's placed buffers span: the end of the last one."""
    return max((s.end for s in slots), default=0)
