"""The critical path of a timed run, by group (decision D-RT-ROOFLINE,
session 42): which groups' tasks the program's total cycles went through,
and how each stretch of it came to start when it did (session 43).

In timed mode a task starts at the later of its ready time and its unit's
free time, and every such time is the end of one earlier task (a dependency,
the task before it on the unit, the token a `wait` or a loop window waited
for) or cycle 0.  The scheduler carries, beside each of those times, the
`Link` of the task that ended there and the kind of that wait (`Scheduler._run`
and the stream and loop times); the chain back from the task that ends last
is a critical path of the schedule, and its links' lengths add up to the
program's cycles.

A link covers a stretch of consecutive tasks of one group (`extend` merges a
task into its predecessor's link when both are the group's and touch), so
what a run keeps alive is the chains of its live tasks, a link per change of
group along them, not a record per task; walking the last chain is linear
in its links (`by_group`, `segments`).  A link's `kind` says what its first
task's start waited for (`KINDS`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

DEP = "dep"
"""The stretch started when a dependency (a token in its task's deps) completed."""
UNIT = "unit"
"""... when the previous task on its unit ended (it was ready earlier)."""
WAIT = "wait"
"""... when the token a `wait` or a `.sync` task waited for completed."""
WINDOW = "window"
"""... when the iteration that closed a loop's window completed (its task's
iteration opened then): on the path only where that iteration's task is of
another group (a loop's tasks are mostly one group's, one stretch)."""
AFTER_LOOP = "loop-end"
"""... when a loop ended, for the statements after it: its last iteration
opened and passed its waits (NEM's loop end, `semantics.LOOP_END`: its
tasks may still run), so what put it there is the loop's windows or waits."""
START = "start"
"""... at cycle 0."""
KINDS = (DEP, UNIT, WAIT, WINDOW, AFTER_LOOP, START)
"""The kinds, in the order the report prints them."""

SHOWN = 5
"""The text names the groups the critical path spends most cycles in, this many."""


class Link:
    """A stretch `[start, end)` of a chain spent in tasks of group `group`,
    after the chain `prev` (None at cycle 0), entered as `kind` says."""

    __slots__ = ("group", "start", "end", "prev", "kind")

    def __init__(self, group: int, start: int, end: int, prev: Link | None, kind: str) -> None:
        self.group = group
        self.start = start
        self.end = end
        self.prev = prev
        self.kind = kind


def extend(prev: Link | None, group: int, start: int, end: int, kind: str = START) -> Link:
    """The chain of a task of `group` run `[start, end)` after the chain
    `prev` that ended at `start`, its start having waited as `kind` says."""
    if prev is not None and prev.group == group and prev.end == start:
        return Link(group, prev.start, end, prev.prev, prev.kind)
    return Link(group, start, end, prev, kind)


def by_group(last: Link | None) -> dict[int, dict[str, int]]:
    """The cycles of the chain ending at `last`, per group and kind."""
    out: dict[int, dict[str, int]] = {}
    link = last
    while link is not None:
        kinds = out.setdefault(link.group, {})
        kinds[link.kind] = kinds.get(link.kind, 0) + link.end - link.start
        link = link.prev
    return out


class Segment(NamedTuple):
    """A stretch of the path in one group's tasks: `group` the group's index
    in the report's groups, `entered_by` the kind of its first start."""

    group: int
    name: str
    start: int
    end: int
    entered_by: str

    def to_json(self) -> dict[str, object]:
        return self._asdict()


def segments(last: Link | None, name: Callable[[int], tuple[int, str]]) -> list[Segment]:
    """The chain ending at `last` in time order, a segment per link; `name`:
    a tally group's (report index, name)."""
    out = []
    link = last
    while link is not None:
        out.append(Segment(*name(link.group), link.start, link.end, link.kind))
        link = link.prev
    out.reverse()
    return out


def entered_by(cycles: dict[str, int]) -> str:
    """The text's line: the path's cycles by kind, the kinds with any, each
    with its share (`entered by: dep 610 (61%), wait 200 (20%), start 190
    (19%)`): the cycles add up to the path's where rounded shares may not
    (an outside reading, session 43)."""
    total = sum(cycles.values())
    return "entered by: " + ", ".join(
        f"{k} {cycles[k]} ({cycles[k] / total:.0%})" for k in KINDS if cycles.get(k)
    )


class OnPath(Protocol):
    """What the text reads of a report row (`roofline.Row`)."""

    @property
    def name(self) -> str: ...
    @property
    def critical(self) -> int: ...


def queued(path: Sequence[Segment]) -> list[tuple[str, str, int]]:
    """(group, the group before it, cycles) for each pair where the path
    enters a stretch of a group's tasks when another group's task ended on
    their unit (`UNIT`: ready earlier, it queued behind it), the cycles of
    those stretches summed per pair, most first: which layer held the unit
    a layer on the path waited for (an outside review, session 53: `entered
    by: unit` named no one, and its layer's weights had queued behind the
    layer before's copies)."""
    behind: dict[tuple[str, str], int] = {}
    for before, seg in zip(path, path[1:]):
        if seg.entered_by == UNIT and before.name != seg.name:
            key = (seg.name, before.name)
            behind[key] = behind.get(key, 0) + seg.end - seg.start
    return sorted(((a, b, n) for (a, b), n in behind.items()), key=lambda t: (-t[2], t[0], t[1]))


def lines(
    groups: Sequence[OnPath], by_kind: dict[str, int], path: Sequence[Segment] = ()
) -> list[str]:
    """The roofline text's lines on the path: the groups it spends most
    cycles in, with their share of the program's cycles (which the path's
    links add up to), what the others on it hold together (an outside
    reading, session 42: a list of the largest alone read as the whole
    path), what its stretches were entered by, which groups queued behind
    which on a unit (`queued`, from the `path`'s segments), and how many
    groups it misses."""
    most = sorted((r for r in groups if r.critical), key=lambda r: -r.critical)
    total = sum(by_kind.values())
    shares = [f"{r.name} {r.critical} ({r.critical / total:.0%})" for r in most[:SHOWN]]
    rest = sum(r.critical for r in most[SHOWN:])
    if rest:
        shares.append(f"{_groups(len(most) - SHOWN, 'more ')} {rest} ({rest / total:.0%})")
    out = [f"critical path: {total} cycles: " + ", ".join(shares), entered_by(by_kind)]
    if waits := queued(path):
        pairs = [f"{a} after {b} {n}" for a, b, n in waits[:SHOWN]]
        more = f", {len(waits) - SHOWN} more" if len(waits) > SHOWN else ""
        out.append("queued on a unit: " + ", ".join(pairs) + more)
    off = [r.name for r in groups if not r.critical]
    if off:
        named = ", ".join(off[:SHOWN]) + (", ..." if len(off) > SHOWN else "")
        out.append(f"not on the critical path: {_groups(len(off))} ({named})")
    return out


def _groups(n: int, before: str = "") -> str:
    """`1 group`, `2 more groups`."""
    return f"{n} {before}group" + ("" if n == 1 else "s")
