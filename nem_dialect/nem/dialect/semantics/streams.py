"""Streams, loops and ends (SPEC §Execution Semantics, §Loops; IA §4.5), and the
`@max_in_flight(N)` window: iteration `j` opens once every iteration `<= j -
N` has completed (LOOP-01/02/05/06, D-HAZ-PIPE; N is `LoopOp.max_in_flight`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import islpy as isl


@dataclass(frozen=True)
class BlockEnd:
    """What reaching the end of a block instance waits for.

    `stream_waits`: the statement after the block (or the block's completion)
    waits until every instruction stream the block opened has reached its end
    (every statement issued, every `wait` and `.sync` passed).
    `drains`: it also waits until every task the block issued, in nested
    blocks too, has completed."""

    what: str
    stream_waits: bool
    drains: bool
    decision: str


LOOP_END = BlockEnd("endloop", stream_waits=True, drains=False, decision="D-SEM-ENDLOOP")
"""`endloop` is not a barrier: the statements after a loop are issued once every
iteration has been issued and passed its waits; tasks of the last N iterations
that no wait covered may still run (D-SEM-ENDLOOP, = D-HAZ-ENDLOOP)."""

ITERATION_END = BlockEnd("iteration", stream_waits=True, drains=True, decision="D-HAZ-PIPE")
"""An iteration completes when its stream has ended and everything it issued
(nested loops included) has completed; only then may iteration i + N open (LOOP-06)."""

PROGRAM_END = BlockEnd("program end", stream_waits=True, drains=True, decision="D-SEM-PROGRAM-END")
"""The program completes when every task it issued has completed; results are
read (by the host, `--output`, the API) only then."""


def may_open(next_ord: int, first_incomplete_ord: int, n: int) -> bool:
    """Iteration `next_ord` (0-based) may open when every iteration before
    `first_incomplete_ord` has completed: at most N are active (LOOP-01/05)."""
    return next_ord - first_incomplete_ord < n


def window_orders(distance: int, n: int) -> bool:
    """Is every task of iteration i complete before iteration i + distance
    starts?  Yes iff distance >= N (LOOP-06, D-HAZ-PIPE)."""
    return distance >= n


def complete_at_loop_end(ord_: int, trip: int, n: int) -> bool:
    """Is iteration `ord_` (0-based) of a loop of `trip` iterations complete when
    the statement after `endloop` is issued, without any wait covering it?
    Iteration trip - 1 opened, so iterations <= trip - 1 - N completed."""
    return LOOP_END.drains or window_orders(trip - 1 - ord_, n)


def window_orders_set(distance: isl.PwAff, n: int) -> isl.Set:
    """Symbolic twin of `window_orders` (D-HAZ-SYMBOLIC): where `distance`
    (a quasi-affine function of iteration ordinals) is >= N."""
    return (distance - n).nonneg_set()


def complete_at_loop_end_set(ord_: isl.PwAff, trip: isl.PwAff, n: int) -> isl.Set:
    """Symbolic twin of `complete_at_loop_end`: where iteration `ord_` of a loop
    of `trip` iterations is complete after `endloop`."""
    if LOOP_END.drains:  # pragma: no cover - endloop is not a barrier
        return ord_.domain()
    return window_orders_set(trip - 1 - ord_, n)


def loop_window(n: int, trip: int | None) -> int:
    """Iterations of one loop instance that can be active at once: min(N, trip)."""
    return max(1, n if trip is None else min(n, trip))
