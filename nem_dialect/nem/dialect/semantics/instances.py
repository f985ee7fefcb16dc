"""Instances of loop-body declarations (D-SEM-INSTANCES): a buffer declared in a
loop body has one instance per iteration that can be in flight."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.ops import LoopOp
from nem.dialect.semantics.streams import loop_window

if TYPE_CHECKING:
    import islpy as isl


def loop_copies(windows: Iterable[int]) -> int:
    """Instances of a buffer declared in a loop body: one per combination of
    concurrently active iterations of its enclosing loops, i.e. the product of
    their `loop_window`s."""
    n = 1
    for w in windows:
        n *= w
    return n


def static_windows(loops: Sequence[LoopOp], ev: Evaluator) -> tuple[int, ...]:
    """`loop_window` of each loop of a declaration's enclosing loops, from their
    static trip counts (N when a bound depends on an outer loop variable)."""
    out = []
    for lp in loops:
        try:
            lo, hi = ev.static(lp.lower), ev.static(lp.upper)
        except ExprError:
            lo = hi = None
        trip = hi - lo + 1 if lo is not None and hi is not None else None
        out.append(loop_window(lp.max_in_flight(), trip))
    return tuple(out)


def instance_index(ords: Sequence[int], windows: Sequence[int]) -> int:
    """The instance a loop-body declaration uses in the iteration with ordinals
    `ords` (0-based, outermost first): `ord mod window` per loop, mixed radix.
    Iterations sharing an instance are ordered by the window (i and i + N)."""
    k = 0
    for o, w in zip(ords, windows):
        k = k * w + o % w
    return k


def same_instance_set(
    ords_a: Sequence[isl.PwAff],
    ords_b: Sequence[isl.PwAff],
    windows: Sequence[int],
    universe: isl.Set,
) -> isl.Set:
    """Symbolic twin of `instance_index`: where iterations `ords_a` and
    `ords_b` (ordinals, never negative) use the same instance.  The index is
    mixed radix with digits `ord mod window`, so equal iff every digit is."""
    out = universe
    for a, b, w in zip(ords_a, ords_b, windows):
        if w > 1:
            out = out & a.mod_val(w).eq_set(b.mod_val(w))
    return out
