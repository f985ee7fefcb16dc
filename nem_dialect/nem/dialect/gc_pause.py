"""The one scope that pauses Python's cyclic garbage collector (D-RT-GC).

Loading, verifying and analysing a program allocate millions of long-lived
IR objects and make no garbage cycles worth collecting early; every
collection the allocations would trigger rescans the young IR (it made
parsing ~1.5x, verifying ~1.7x and the happens-before analysis superlinear
in the program's size).  Each of those steps runs inside `gc_paused()`:
the collector is paused for the call and resumed after it, unless the
process had disabled it already (then it stays disabled).  Scopes nest: an
inner scope finds the collector disabled and leaves it so, so the collector
stays paused from decoding to the end of the rules.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused(pause: bool = True) -> Iterator[None]:
    """Pause the cyclic collector for the scope (when `pause`); the
    collector is re-enabled after it only if it was enabled before."""
    paused = pause and gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
