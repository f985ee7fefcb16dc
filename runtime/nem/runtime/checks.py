"""Runtime checks: dynamic race detection, deadlock witnesses, unconsumed tokens.

Race detection (decision D-RT-RACE) is happens-before based.  Happens-before
edges are exactly the token edges of the program: a task's `deps`, a `wait`
or `.sync` in the instruction stream that issues later tasks, the
`@max_in_flight` window (iteration i completes before iteration i + N
begins, LOOP-06) and the end of a loop (the statements after `endloop` know
what every iteration's stream knew at its end: its waits, not its
uncovered tasks, `semantics.LOOP_END`).  Two task instances race when their byte ranges
overlap, at least one writes, and neither happens-before the other - i.e.
some schedule could have them in flight at once.

Vector clocks are indexed by *lanes*: a task extends the lane of a
predecessor whose completion it knows when that predecessor is still the
lane's tail, otherwise it opens a new lane.  Events of one lane are totally
ordered, so `A happens-before B` iff `VC(B)[lane(A)] >= epoch(A)`; the
number of lanes tracks the program's concurrency (about N x tasks per
iteration), not its length.  Shadow memory keeps access records per memory
level, bucketed by the buffer instance the bytes belong to (D-RT-RACE-SHADOW:
a region lies inside its buffer, HAZ-04, and buffers are placed disjointly,
D-SEM-LAYOUT, so two accesses overlap only within one bucket and a check
scans that buffer's records, not the level's); records subsumed by a later
access, or already known to every live instruction stream, are dropped, so
memory stays proportional to the in-flight window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from nem.dialect.bounded_cache import BoundedCache
from nem.dialect.elements import ELEM_BITS as BITS
from nem.dialect.semantics.transfers import moved_bytes

if TYPE_CHECKING:
    from nem.runtime.memory import Memory, RegionInst
    from nem.runtime.task_state import TaskInst, VectorClock

Mask = npt.NDArray[np.bool_] | None
"""Which bytes of an access's range it touches: None for all of them."""
Access = tuple[int, int, int, bool, int, Mask]
"""What a task touches: (level id, lo, hi, write, start of its buffer
instance, which bytes of [lo, hi): None for all, else a mask, a strided
region's elements, D-HAZ-ELEMENTS)."""


def common_bytes(
    alo: int, ahi: int, amask: Mask, blo: int, bhi: int, bmask: Mask
) -> tuple[int, int] | None:
    """The first and one past the last byte two accesses both touch (their
    spans, and their masks where they have one); None when none."""
    lo, hi = max(alo, blo), min(ahi, bhi)
    if lo >= hi:
        return None
    if amask is None and bmask is None:
        return lo, hi
    if amask is None:
        both = bmask[lo - blo : hi - blo]  # type: ignore[index]
    elif bmask is None:
        both = amask[lo - alo : hi - alo]
    else:
        both = amask[lo - alo : hi - alo] & bmask[lo - blo : hi - blo]
    at = np.flatnonzero(both)
    if not len(at):
        return None
    return lo + int(at[0]), lo + int(at[-1]) + 1


def join(a: VectorClock, b: VectorClock) -> VectorClock:
    """The pointwise max of two vector clocks (a new dict when it differs from `a`)."""
    if not b or a is b:
        return a
    if not a:
        return b
    out = None
    for k, v in b.items():
        if a.get(k, 0) < v:
            if out is None:
                out = dict(a)
            out[k] = v
    return a if out is None else out


@dataclass
class TaskRef:
    """What a report says about a task instance."""

    label: str
    opcode: str
    line: int
    file: str
    iteration: str
    seq: int

    def __str__(self) -> str:
        it = f" iteration {self.iteration}" if self.iteration else ""
        return f"{self.label} ({self.opcode}, {self.file}:{self.line}{it})"


@dataclass
class Race:
    first: TaskRef
    first_write: bool
    second: TaskRef
    second_write: bool
    level: str
    lo: int
    hi: int
    buffer: str
    buf_lo: int
    buf_hi: int

    def __str__(self) -> str:
        k1 = "write" if self.first_write else "read"
        k2 = "write" if self.second_write else "read"
        return (
            f"race: {k1} by {self.first} and {k2} by {self.second} overlap on "
            f"{self.buffer} bytes [{self.buf_lo}, {self.buf_hi}) ({self.level} "
            f"[{self.lo}, {self.hi})), not ordered by tokens"
        )


class _Rec:
    __slots__ = ("lo", "hi", "write", "lane", "epoch", "ref", "tid", "mask")

    def __init__(
        self,
        lo: int,
        hi: int,
        write: bool,
        lane: int,
        epoch: int,
        ref: TaskInst,
        tid: int,
        mask: Mask,
    ) -> None:
        self.lo, self.hi, self.write = lo, hi, write
        self.lane, self.epoch, self.ref, self.tid = lane, epoch, ref, tid
        self.mask = mask


class RaceDetector:
    MAX_REPORTS = 1000

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.lane_epoch: list[int] = []
        # (level id, start of the buffer instance in the level) -> its records
        self.shadow: dict[tuple[int, int], list[_Rec]] = {}
        self.races: list[Race] = []
        self.race_count = 0
        self._seen: set[tuple[int, int]] = set()
        self._n_records = 0
        self._gc_at = 32
        self._masks: BoundedCache[tuple[object, ...], Mask] = BoundedCache(256)
        """Element masks by region geometry (`elements`)."""

    # -- clocks ------------------------------------------------------------
    def start(
        self, vc_in: VectorClock, hint_lanes: Iterable[int] = ()
    ) -> tuple[VectorClock, int, int]:
        """Assign a lane to a task whose known history is `vc_in`."""
        le = self.lane_epoch
        lane = -1
        for hint in hint_lanes:
            if vc_in.get(hint, 0) == le[hint]:
                lane = hint
                break
        if lane < 0:
            best = None
            for cand, e in vc_in.items():
                if e == le[cand] and (best is None or cand < best):
                    best = cand
            if best is not None:
                lane = best
        if lane < 0:
            lane = len(le)
            le.append(0)
        le[lane] += 1
        epoch = le[lane]
        vc = dict(vc_in)
        vc[lane] = epoch
        return vc, lane, epoch

    # -- accesses ------------------------------------------------------------
    def elements(self, r: RegionInst) -> Mask:
        """Which bytes of its range an access of the element-exact region `r`
        touches (D-HAZ-ELEMENTS): its elements' (`moved_bytes`) within its
        extent; None when they are all of them."""
        key = (r.elem, r.shape, r.strides, r.extent)
        if key in self._masks:
            return self._masks[key]
        mask = np.zeros(r.extent, dtype=bool)
        size = BITS[r.elem] // 8 if r.elem is not None else 0
        try:
            if not size or r.shape is None:
                raise ValueError("sub-byte elements")
            # whole-byte elements: set them through a strided view of the mask
            # (a ValueError when an element lies past the extent)
            np.ndarray(
                (*r.shape, size),
                dtype=bool,
                buffer=mask,
                strides=(*(s * size for s in r.elem_strides()), 1),
            )[...] = True
        except ValueError:  # the bytes moved_bytes names, within the extent
            at = moved_bytes(r.elem, r.shape, r.strides, r.extent)
            mask[at[(at >= 0) & (at < r.extent)]] = True
        out = None if mask.all() else mask
        self._masks[key] = out
        return out

    def access(
        self, task: TaskInst, accesses: list[Access], ref_of: Callable[[TaskInst], TaskRef]
    ) -> None:
        """Check and record `accesses` = [(level_id, lo, hi, write, home)] of `task`;
        `home` is the start of the accessed buffer instance in its level, which
        holds [lo, hi) (the shadow bucket, D-RT-RACE-SHADOW)."""
        vc = task.vc
        tid = task.seq
        get = vc.get
        shadow = self.shadow
        for lvl, lo, hi, write, home, mask in accesses:
            key = (lvl, home)
            recs = shadow.get(key)
            if recs is None:
                continue
            keep = None  # the records left, made at the first one dropped
            for r in recs:
                if r.hi <= lo or r.lo >= hi or r.tid == tid:
                    pass
                elif get(r.lane, 0) < r.epoch:  # not ordered before this task
                    if write or r.write:
                        both = (
                            (max(lo, r.lo), min(hi, r.hi))
                            if mask is None and r.mask is None
                            else common_bytes(r.lo, r.hi, r.mask, lo, hi, mask)
                        )
                        if both is not None:
                            self._report(r, task, write, lvl, both[0], both[1], ref_of)
                elif r.lo >= lo and r.hi <= hi and (write or not r.write) and mask is None:
                    # subsumption: a later ordered access covering the record
                    # replaces it (it touches every byte of its range: dense)
                    if keep is None:
                        keep = recs[: recs.index(r)]  # records compare by identity
                    continue
                if keep is not None:
                    keep.append(r)
            if keep is not None:
                self._n_records -= len(recs) - len(keep)
                shadow[key] = keep
        lane, epoch = task.lane, task.epoch
        for lvl, lo, hi, write, home, mask in accesses:
            rec = _Rec(lo, hi, write, lane, epoch, task, tid, mask)
            recs = shadow.get((lvl, home))
            if recs is None:
                shadow[(lvl, home)] = [rec]
            else:
                recs.append(rec)
            self._n_records += 1

    def needs_gc(self) -> bool:
        return self._n_records > self._gc_at

    def gc(self, live_vcs: Iterable[VectorClock]) -> None:
        """Drop records every live instruction stream already knows (happens-before all
        future accesses)."""
        live_vcs = list({id(v): v for v in live_vcs}.values())  # tasks share their stream's
        if live_vcs:
            lanes = set(live_vcs[0])
            for v in live_vcs[1:]:
                lanes &= set(v)
            low = {ln: min(v[ln] for v in live_vcs) for ln in lanes}
        else:
            low = None
        n = 0
        for key, recs in list(self.shadow.items()):
            keep = [] if low is None else [r for r in recs if low.get(r.lane, 0) < r.epoch]
            if keep:
                self.shadow[key] = keep
            else:
                del self.shadow[key]
            n += len(keep)
        self._n_records = n
        self._gc_at = max(32, 2 * n)

    def _report(
        self,
        rec: _Rec,
        task: TaskInst,
        write: bool,
        lvl: int,
        lo: int,
        hi: int,
        ref_of: Callable[[TaskInst], TaskRef],
    ) -> None:
        key = (rec.tid, task.seq)
        if key in self._seen:
            return
        self._seen.add(key)
        self.race_count += 1
        if len(self.races) >= self.MAX_REPORTS:
            return
        level = self.memory.by_id[lvl]
        buf, blo, bhi = level.name, lo, hi
        for b in self.memory.all_buffers():
            if b.level == level.name and b.offset <= lo < b.offset + b.size:
                buf, blo, bhi = b.label, lo - b.offset, hi - b.offset
                break
        self.races.append(
            Race(ref_of(rec.ref), rec.write, ref_of(task), write, level.name, lo, hi, buf, blo, bhi)
        )


@dataclass
class Deadlock:
    witness: list[str]

    def __str__(self) -> str:
        return "deadlock: no task is ready but work remains:\n" + "\n".join(
            "  " + w for w in self.witness
        )


class DeadlockError(Exception):
    """A run stopped at a deadlock (the scheduler raises it, the replay of a
    recorded plan and the session catch it)."""

    def __init__(self, deadlock: Deadlock):
        super().__init__(str(deadlock))
        self.deadlock = deadlock


@dataclass
class Unconsumed:
    label: str
    file: str
    line: int
    produced: int
    unconsumed: int

    def __str__(self) -> str:
        return (
            f"{self.file}:{self.line}: warning: token {self.label} is never consumed "
            f"({self.unconsumed} of {self.produced} instances: no deps, wait or .sync "
            "names it)"
        )
