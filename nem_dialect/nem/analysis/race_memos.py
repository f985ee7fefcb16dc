"""What the race analysis (`nem.analysis.hazard_finder`) keeps between
queries: `RaceCache`, the facts of one program that stay true while only
its deps and waits change, and `ShapeMemos`, answers that are pure
functions of a pair's shape, which a driver may share between its analyses
of one program (D-HAZ-SYMBOLIC, D-DEPS-SYNTH)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import islpy as isl
from xdsl.ir import Operation, SSAValue

from nem.analysis.access_forms import Printed
from nem.analysis.element_access import ElementPattern
from nem.analysis.happens_before import Skeleton
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

    races: BoundedCache[tuple[object, ...], tuple[InstanceSpace, isl.Set] | None] = field(
        default_factory=lambda: BoundedCache(SHAPE_MEMO_LIMIT)
    )
    """Race sets by the shape of the pair (`_symbolic`); the sets are on the
    shared `instance_space`s."""
    witnesses: BoundedCache[tuple[object, ...], Witness | None] = field(
        default_factory=lambda: BoundedCache(SHAPE_MEMO_LIMIT)
    )
    """Witnesses by the shape of the pair and the writes in between."""
    forms: BoundedCache[tuple[object, ...], Printed] = field(
        default_factory=lambda: BoundedCache(SHAPE_MEMO_LIMIT)
    )
    """An access's printed isl form by its syntactic shape
    (`access_forms.shape_key`, `HazardFinder._form`)."""
    covers: BoundedCache[tuple[object, ...], bool] = field(
        default_factory=lambda: BoundedCache(SHAPE_MEMO_LIMIT)
    )
    """Whether a write of a loop nest writes every byte of its bounds, by its
    form and bounds (`_cover`)."""
    patterns: BoundedCache[tuple[object, ...], ElementPattern | None] = field(
        default_factory=lambda: BoundedCache(SHAPE_MEMO_LIMIT)
    )
    """One object per element pattern (D-HAZ-ELEMENTS), whose isl set
    (`ElementPattern.relative`) is then built once: lowered CNNs repeat
    tile shapes across layers and engines; and the pattern (or None) of
    each region's constants (`element_pattern`)."""


@dataclass
class RaceCache:
    """What stays true while only deps and waits change (the rounds of
    `nem-synthesize-deps`): the static accesses and their candidate pairs,
    the conflict set of each pair, and each pair's verdict under the
    ordering facts it was computed with."""

    by_buffer: dict[SSAValue, list[StaticAccess]] | None = None
    pairs: list[PairKey] = field(default_factory=list)
    replayed: list[list[StaticAccess]] = field(default_factory=list)
    """The accesses of each buffer that has one isl cannot represent."""
    pairs_of: dict[SSAValue, list[PairKey] | None] = field(default_factory=dict)
    """Each buffer's candidate pairs (None: replayed); `pairs` and `replayed`
    list them in `by_buffer` order."""
    writers: dict[SSAValue, tuple[list[int], list[StaticAccess]]] = field(default_factory=dict)
    touches: dict[tuple[StaticAccess, tuple[int, ...], int, int], isl.Set] = field(
        default_factory=dict
    )
    forms: dict[StaticAccess, tuple[object, ...]] = field(default_factory=dict)
    conflicts: dict[PairKey, tuple[InstanceSpace, isl.Set] | None] = field(default_factory=dict)
    verdicts: dict[PairKey, tuple[object, Witness | None]] = field(default_factory=dict)
    nests: dict[tuple[Operation, tuple[int, ...], int, int], Nest] = field(default_factory=dict)
    skeleton: Skeleton | None = None
    """The statements the happens-before model reads, for the next
    `Structure` (only deps, windows and the waits ending blocks change)."""
    boxes: Boxes | None = None
    """The loop variables' intervals (and the evaluator the nests share)."""
    windows: dict[SSAValue, tuple[int, ...]] | None = None
    """Each buffer's instance windows (D-SEM-INSTANCES); None: not yet read."""
    windows_before: dict[SSAValue, tuple[int, ...]] | None = None
    """The windows of the last scan, once a loop's window narrowed since."""
    narrowed_loops: set[int] = field(default_factory=set)
    """id() of each loop whose window narrowed since the last scan."""

    def narrowed(self, loop: Operation) -> RaceCache:
        """The cache once `loop`'s `@max_in_flight` changed (`nem-synthesize-deps`
        narrowing a window).  Buffer instances follow the windows of the
        loops holding the buffer's declaration (D-SEM-INSTANCES); the next
        scan reads every buffer's windows again and `stale` drops what
        depends on them (or on the loop's window) only, issue 30."""
        if self.windows is not None:
            self.windows_before = self.windows
        self.windows = None
        self.narrowed_loops.add(id(loop))
        return self

    def stale(self, moved: set[Operation]) -> None:
        """Drop what the windows narrowed since the last scan invalidate
        (`moved`: the tasks inside a narrowed loop).  A buffer whose windows
        changed gets new accesses (the same, with its new windows: nothing
        else of an access depends on a window), so its pairs, conflict sets,
        witness searches and verdicts are redone; a pair with a task in a
        narrowed loop is decided again (its race set depends on the windows
        of the task's loops, not all of which its facts hold), and its
        accesses' forms are printed again.  The rest is kept: the other
        buffers' accesses, their pairs (D-DEPS-REUSE) and conflict sets, the
        loops' boxes and the tasks' nests (loop bounds only)."""
        old, new, by_buffer = self.windows_before, self.windows, self.by_buffer
        self.windows_before, self.narrowed_loops = None, set()
        if old is None or new is None or by_buffer is None:
            return
        changed = {b for b in by_buffer if old.get(b) != new.get(b)}
        for b in changed:
            by_buffer[b] = [replace(a, windows=new.get(b, ())) for a in by_buffer[b]]
            self.pairs_of.pop(b, None)
            self.writers.pop(b, None)

        def gone(a: StaticAccess) -> bool:
            return a.buffer in changed or a.op in moved

        self.forms = {a: f for a, f in self.forms.items() if not gone(a)}
        self.verdicts = {k: v for k, v in self.verdicts.items() if not (gone(k[0]) or gone(k[1]))}
        if changed:
            self.conflicts = {k: v for k, v in self.conflicts.items() if k[0].buffer not in changed}
            self.touches = {k: v for k, v in self.touches.items() if k[0].buffer not in changed}
