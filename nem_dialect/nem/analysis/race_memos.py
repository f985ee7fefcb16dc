"""What the race analysis (`nem.analysis.hazard_finder`) keeps between
queries: `RaceCache`, the facts of one program that stay true while only
its deps and waits change, and `ShapeMemos`, answers that are pure
functions of a pair's shape, which a driver may share between its analyses
of one program (D-HAZ-SYMBOLIC, D-DEPS-SYNTH)."""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl
from xdsl.ir import Operation, SSAValue

from nem.analysis.hazard_report import StaticAccess
from nem.analysis.presburger import Boxes, InstanceSpace, Nest
from nem.dialect.bounded_cache import BoundedCache

PairKey = tuple[StaticAccess, StaticAccess]
Witness = tuple[tuple[int, ...], tuple[int, ...], int]
"""Ordinals of the earlier and the later instance, and a byte both touch."""


SHAPE_MEMO_LIMIT = 1 << 16
"""Entries each of the shape memos (`ShapeMemos`) keeps."""


@dataclass
class ShapeMemos:
    """Answers that are pure functions of a pair's *shape* (isl's printed
    forms and integers, D-HAZ-SYMBOLIC), bounded (first in, first out).

    One analysis makes its own; a driver that analyses one program several
    times hands the same object to each (`nem-compile`: the rounds of
    `nem-synthesize-deps`, the arena ordering of `nem-share-buffers` and
    the final `nem-verify` on the program read back, through the pass
    context's cache, `nem.passes.pass_context.shape_memos`), so each shape
    is decided once.  Every pair of every analysis is still looked up."""

    races: BoundedCache[tuple, tuple[InstanceSpace, isl.Set] | None] = field(
        default_factory=lambda: BoundedCache(SHAPE_MEMO_LIMIT)
    )
    """Race sets by the shape of the pair (`_symbolic`); the sets are on the
    shared `instance_space`s."""
    witnesses: BoundedCache[tuple, Witness | None] = field(
        default_factory=lambda: BoundedCache(SHAPE_MEMO_LIMIT)
    )
    """Witnesses by the shape of the pair and the writes in between."""
    covers: BoundedCache[tuple, bool] = field(
        default_factory=lambda: BoundedCache(SHAPE_MEMO_LIMIT)
    )
    """Whether a write of a loop nest writes every byte of its bounds, by its
    form and bounds (`_cover`)."""


@dataclass
class RaceCache:
    """What stays true while only deps and waits change (the rounds of
    `nem-synthesize-deps`): the static accesses and their candidate pairs,
    the conflict set of each pair, and each pair's verdict under the
    ordering facts it was computed with."""

    by_buffer: dict[SSAValue, list[StaticAccess]] | None = None
    pairs: list[PairKey] = field(default_factory=list)
    replayed: list[list[StaticAccess]] = field(default_factory=list)
    writers: dict[SSAValue, tuple[list[int], list[StaticAccess]]] = field(default_factory=dict)
    touches: dict[tuple, isl.Set] = field(default_factory=dict)
    forms: dict[StaticAccess, tuple] = field(default_factory=dict)
    """The accesses of each buffer that has one isl cannot represent."""
    conflicts: dict[PairKey, tuple[InstanceSpace, isl.Set] | None] = field(default_factory=dict)
    verdicts: dict[PairKey, tuple[object, Witness | None]] = field(default_factory=dict)
    nests: dict[tuple[Operation, tuple[int, ...], int, int], Nest] = field(default_factory=dict)
    boxes: Boxes | None = None
    """The loop variables' intervals (and the evaluator the nests share)."""
    windows: dict[SSAValue, tuple[int, ...]] | None = None
    """Each buffer's instance windows (D-SEM-INSTANCES); None: not yet read."""

    def narrowed(self) -> RaceCache:
        """The cache once a loop's `@max_in_flight` changed (`nem-synthesize-deps`
        narrowing a window): buffer instances follow the window
        (D-SEM-INSTANCES), so the accesses, their pairs and answers are
        dropped; the loops' boxes and each task's nest (built from loop
        bounds only, which do not change) are kept, so that a narrowing
        does not build every task's isl functions again (issue 30)."""
        return RaceCache(boxes=self.boxes, nests=self.nests)
