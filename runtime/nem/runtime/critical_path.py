"""The critical path of a timed run, by group (decision D-RT-ROOFLINE,
session 42): which groups' tasks the program's total cycles went through.

In timed mode a task starts at the later of its ready time and its unit's
free time, and every such time is the end of one earlier task (a dependency,
the task before it on the unit, the token a `wait` or a loop window waited
for) or cycle 0.  The scheduler carries, beside each of those times, the
`Link` of the task that ended there (`Scheduler._run` and the stream and
loop times); the chain back from the task that ends last is a critical path
of the schedule, and its links' lengths add up to the program's cycles.

A link covers a stretch of consecutive tasks of one group (`extend` merges a
task into its predecessor's link when both are the group's and touch), so
what a run keeps alive is the chains of its live tasks, a link per change of
group along them, not a record per task; walking the last chain is linear
in its links (`by_group`).
"""

from __future__ import annotations


class Link:
    """A stretch `[start, end)` of a chain spent in tasks of group `group`,
    after the chain `prev` (None at cycle 0)."""

    __slots__ = ("group", "start", "end", "prev")

    def __init__(self, group: int, start: int, end: int, prev: Link | None) -> None:
        self.group = group
        self.start = start
        self.end = end
        self.prev = prev


def extend(prev: Link | None, group: int, start: int, end: int) -> Link:
    """The chain of a task of `group` run `[start, end)` after the chain
    `prev` that ended at `start`."""
    if prev is not None and prev.group == group and prev.end == start:
        return Link(group, prev.start, end, prev.prev)
    return Link(group, start, end, prev)


def by_group(last: Link | None) -> dict[int, int]:
    """The cycles of the chain ending at `last`, per group."""
    out: dict[int, int] = {}
    link = last
    while link is not None:
        out[link.group] = out.get(link.group, 0) + link.end - link.start
        link = link.prev
    return out
