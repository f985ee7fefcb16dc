"""The work that ran in a group's busy cycles, its own and other groups'
(decision D-RT-ROOFLINE, session 56).

A group's cycles are its busy cycles, and groups that run at the same
time share them: Inception's pool branch beside its 3x3 branch, SqueezeNet's
two expand convolutions of one fire module, both on the same engines' DMAs.
Each is then charged the other's transfers: Inception v1's `n47` took 3.45
times its own bound while the DMAs moved twice its bytes for the MaxPool
beside it.  The *shared bound* of a group divides all the work that ran in
its busy cycles, whoever's, by the units, as the bound divides its own: a
group within 2x of its shared bound kept the units busy, one over 2x of
both left them idle.

Each task's work (`amount / rate`, the cycles of one unit, D-RT-COST) is
spread evenly over its `[start, end)`: per unit kind, the work run up to
each breakpoint (a task's start or end) is a prefix sum, the work in an
interval two bisections (`Spread.within`), so a group's share is
O(intervals x log tasks) and the report O(tasks x log tasks).  The tasks
are the tally's, kept one tuple each as the scheduler feeds them
(`Runs.add`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate


@dataclass
class Runs:
    """The tasks of a timed run by unit kind, as (start, end, work cycles,
    group index), in the order the scheduler ran them."""

    by_kind: dict[str, list[tuple[int, int, float, int]]] = field(default_factory=dict)

    def add(self, kind: str, start: int, end: int, work: float, group: int) -> None:
        self.by_kind.setdefault(kind, []).append((start, end, work, group))


class Spread:
    """One unit kind's work over time, each task's spread evenly over its
    `[start, end)` (a task of no duration adds its work at its start)."""

    def __init__(self, runs: Sequence[tuple[int, int, float, int]]) -> None:
        slope: dict[int, float] = {}  # change of the work per cycle at each breakpoint
        steps: dict[int, float] = {}  # work added at once (tasks of no duration)
        for start, end, work, _ in runs:
            if end > start:
                rate = work / (end - start)
                slope[start] = slope.get(start, 0.0) + rate
                slope[end] = slope.get(end, 0.0) - rate
            else:
                steps[start] = steps.get(start, 0.0) + work
        self.points = sorted(set(slope) | set(steps))
        self.rates = list(accumulate(slope.get(p, 0.0) for p in self.points))
        """The work per cycle from each breakpoint to the next."""
        done = [0.0]
        for i in range(1, len(self.points)):
            span = self.points[i] - self.points[i - 1]
            done.append(done[-1] + self.rates[i - 1] * span + steps.get(self.points[i - 1], 0.0))
        self.done = done
        """The work run before each breakpoint."""
        self.steps = steps

    def upto(self, t: int) -> float:
        """The work run before cycle `t` (a no-duration task at `t` not yet)."""
        i = bisect_right(self.points, t) - 1
        if i < 0:
            return 0.0
        p = self.points[i]
        if p == t:
            return self.done[i]
        return self.done[i] + self.steps.get(p, 0.0) + self.rates[i] * (t - p)

    def within(self, starts: Sequence[int], ends: Sequence[int]) -> float:
        """The work run in the half-open intervals `[starts[i], ends[i])`
        (disjoint, as a group's busy cycles are, `roofline_tally.Busy`)."""
        return sum(self.upto(e) - self.upto(s) for s, e in zip(starts, ends))


def shared_work(runs: Runs) -> dict[str, Spread]:
    """Each unit kind's `Spread` over the run."""
    return {kind: Spread(tasks) for kind, tasks in runs.by_kind.items()}


class Beside:
    """Which other groups' work of one unit kind ran in a group's busy
    cycles: each kind's tasks sorted by start once, so a group's are found
    by bisection (those starting at most the longest task before its first
    cycle)."""

    def __init__(self, runs: Runs) -> None:
        self.tasks = {kind: sorted(tasks) for kind, tasks in runs.by_kind.items()}
        self.starts = {kind: [t[0] for t in tasks] for kind, tasks in self.tasks.items()}
        self.longest = {
            kind: max((t[1] - t[0] for t in tasks), default=0) for kind, tasks in self.tasks.items()
        }

    def of(
        self, kind: str, group: int, starts: Sequence[int], ends: Sequence[int]
    ) -> dict[int, float]:
        """The work on `kind` of each other group in `group`'s busy
        intervals `[starts[i], ends[i])` (a task of no duration whole when
        it starts in one), most first."""
        tasks = self.tasks.get(kind, [])
        if not starts or not tasks:
            return {}
        first = bisect_right(self.starts[kind], starts[0] - self.longest[kind] - 1)
        last = bisect_right(self.starts[kind], ends[-1])
        out: dict[int, float] = {}
        for start, end, work, g in tasks[first:last]:
            if g == group:
                continue
            i = bisect_right(ends, start)  # the first interval ending after it starts
            if end <= start:
                share = work if i < len(starts) and starts[i] <= start else 0.0
            else:
                overlap = 0
                while i < len(starts) and starts[i] < end:
                    overlap += min(end, ends[i]) - max(start, starts[i])
                    i += 1
                share = work * overlap / (end - start)
            if share > 0:
                out[g] = out.get(g, 0.0) + share
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))
