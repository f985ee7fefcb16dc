"""What a timed run did, by group of tasks (decision D-RT-ROOFLINE): the
tally the scheduler feeds one task at a time in timed mode (`Tally.add`:
O(1) per task, a bisection for a task that starts before its group's last
busy interval), which `nem.runtime.roofline` turns into the report.

Groups (`task_groups`, numbered once per program): a task whose op is
located at an ONNX node (D-COMPILE-LOC, NEM IR printed with its locations)
belongs to that node; else to the outermost loop it is in; else to the run
of top-level statements up to the next `.sync` task, `wait` or loop (a
program's synchronisation points, the "top-level op" boundaries of a flat
program).

A group's cycles are its busy cycles: the length of the union of its
tasks' [start, end) intervals (`Busy`), not the window from its first
start to its last end, which a task with no dependency (a fill issued late
but ready at cycle 0) stretches over the whole program.

A task's location may name more ONNX nodes than its group's: nodes the
compiler fused into it (`fused[...]`, D-BC-NODES), the group's `fused`
nodes, so the report says where the work of a node that has no group of
its own went.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from xdsl.ir import Operation, SSAValue

from nem.dialect.attributes import RegionType
from nem.dialect.diagnostics import LAYOUT, located_nodes
from nem.dialect.ops import MoveOp, RegionOp
from nem.dialect.semantics.cost import Work
from nem.dialect.semantics.units import DEVICE_UNITS
from nem.runtime import critical_path
from nem.runtime.critical_path import Link, Segment
from nem.runtime.engine import CompiledProgram, Instr, LoopTpl, TaskTpl, WaitTpl
from nem.runtime.roofline_shared import Runs


class Busy:
    """The union of half-open intervals [start, end) given in any order, as
    sorted disjoint intervals (touching ones merged); `cycles` is its length,
    a group's busy cycles (D-RT-ROOFLINE).  The timed scheduler starts tasks
    in nearly increasing order, so an interval almost always extends or
    follows the last one (O(1)); one that starts earlier is placed by
    bisection and absorbs the intervals it meets."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> None:
        if end <= start:
            return
        starts, ends = self.starts, self.ends
        if not starts or start > ends[-1]:
            starts.append(start)
            ends.append(end)
        elif start >= starts[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            i = bisect_left(ends, start)  # the first interval ending at or after `start`
            j = bisect_right(starts, end)  # past the last one starting at or before `end`
            if i < j:
                start, end = min(start, starts[i]), max(end, ends[j - 1])
            starts[i:j] = [start]
            ends[i:j] = [end]

    @property
    def cycles(self) -> int:
        return sum(self.ends) - sum(self.starts)


@dataclass
class Group:
    """Tasks reported together: an ONNX node, a loop nest or a top-level segment."""

    name: str
    kind: str  # "node", "loop", "segment" or "program"
    line: int  # the program line of its first statement
    lines: list[tuple[int, int]] = field(default_factory=list)  # its statements (`task_groups`)
    tasks: int = 0
    first: int | None = None
    last: int = 0
    spans: Busy = field(default_factory=Busy)  # its tasks' [start, end)
    amount: dict[str, int] = field(default_factory=dict)  # by unit kind
    work: dict[str, float] = field(default_factory=dict)  # amount / rate, cycles
    busy: dict[str, int] = field(default_factory=dict)  # task durations, cycles
    fused: dict[str, None] = field(default_factory=dict)  # ONNX nodes fused into it, in order
    nodes: dict[str, None] = field(default_factory=dict)  # their names: its own, then the fused
    op: str | None = None  # a node group's ONNX op type
    moved: dict[str, int] = field(default_factory=dict)  # bytes by route (`route`)
    rates: dict[str, dict[Rate, int]] = field(default_factory=dict)  # kind -> its amounts by rate

    def add(self, utype: str, w: Work, start: int, end: int, route: str | None = None) -> None:
        self.tasks += 1
        if route is not None:
            self.moved[route] = self.moved.get(route, 0) + w.amount
        if self.first is None or start < self.first:
            self.first = start
        if end > self.last:
            self.last = end
        self.spans.add(start, end)
        self.amount[utype] = self.amount.get(utype, 0) + w.amount
        self.work[utype] = self.work.get(utype, 0.0) + w.amount / w.rate
        at = self.rates.setdefault(utype, {})
        rate = Rate(w.rate, "B" if route is not None else "MACs" if utype == "NMU" else "elements")
        at[rate] = at.get(rate, 0) + w.amount
        self.busy[utype] = self.busy.get(utype, 0) + (end - start)


def route(op: Operation) -> str | None:
    """`SRC->DST`, the memory levels a transfer or store moves bytes between
    (`DDR->L1`: an engine's L1 whatever its index), None for a compute
    task: what a group's bytes went through, beside how many (an outside
    review, session 52: a Conv moving 4.1x its least traffic, whose report
    did not say where the bytes went)."""
    if not isinstance(op, MoveOp):
        return None
    src, dst = op.src.type, op.dst.type
    assert isinstance(src, RegionType) and isinstance(dst, RegionType)  # MoveOp's operands
    return f"{src.level.kind}->{dst.level.kind}"


def _located(tpl: TaskTpl) -> list[tuple[str, str]]:
    """(name, op type) of each ONNX node a task is located at, the node it
    was compiled from first, then those fused into it (D-BC-NODES); [] for
    a task located at none."""
    return [(name, op) for name, op, _file, _line in located_nodes(str(tpl.op.location))]


def _buffer(region: SSAValue) -> SSAValue:
    """The buffer a region operand views (the region value itself when no
    `region(...)` op made it)."""
    owner = region.owner
    return owner.buffer if isinstance(owner, RegionOp) else region


def task_groups(cp: CompiledProgram) -> tuple[list[Group], dict[int, int]]:
    """The program's groups in program order, and each task's group (by
    `TaskTpl.seq_id`); one walk over the statements.  A task with no node
    that takes all its inputs from one node's group (`producer`) joins that
    group: the compiler's glue after a node (the final layout copy into a
    graph output) is that node's work.  Each group's `lines`:
    the program lines of its statements as ranges [first, last] that hold
    no other group's statement (`line_ranges`)."""
    groups: list[Group] = []
    index: dict[str, int] = {}
    of: dict[int, int] = {}
    at: list[tuple[int, int]] = []  # (line, group) of each statement

    def group(name: str, kind: str, line: int, op: str | None = None) -> int:
        if name not in index:
            index[name] = len(groups)
            groups.append(Group(name, kind, line, op=op))
        return index[name]

    made_by: dict[SSAValue, int] = {}  # a token: the node group of its task
    wrote: dict[SSAValue, int] = {}  # a buffer: the node group of its last writer so far

    def producer(tpl: TaskTpl) -> int | None:
        """The one node group a task without a node takes all its inputs
        from (its dependencies' tasks, the last writer of each buffer it
        reads), else None."""
        sources = {made_by.get(v) for v in tpl.op.dep_values()}
        sources.update(
            wrote.get(_buffer(v)) for v, mode in tpl.op.operand_regions() if mode == "read"
        )
        return sources.pop() if len(sources) == 1 and None not in sources else None

    def place(tpl: TaskTpl, fallback: Callable[[], int]) -> None:
        located = _located(tpl)
        names = [f"node '{name}' ({op})" for name, op in located]
        if located and located[0][1] == LAYOUT:  # a graph input's or output's layout
            found: int | None = group(f"layout of '{located[0][0]}'", "layout", tpl.line)
            names, located = [], []
        elif names:
            found = group(names[0], "node", tpl.line, located[0][1])
        else:
            found = producer(tpl)
        g = of[tpl.seq_id] = found if found is not None else fallback()
        groups[g].fused.update(dict.fromkeys(names[1:]))
        groups[g].nodes.update(dict.fromkeys(name for name, _ in located))
        at.append((tpl.line, g))
        if groups[g].kind == "node":
            made_by[tpl.value] = g
        for v, mode in tpl.op.operand_regions():
            if mode == "write":
                if groups[g].kind == "node":
                    wrote[_buffer(v)] = g
                else:
                    wrote.pop(_buffer(v), None)

    def nest(body: list[Instr], loop: LoopTpl) -> None:
        for ins in body:
            if isinstance(ins, TaskTpl):
                place(ins, lambda: group(f"loop at line {loop.line}", "loop", loop.line))
            elif isinstance(ins, LoopTpl):
                nest(ins.body, loop)

    segment: list[int] = []  # the open segment's group, created at its first task

    def in_segment(tpl: TaskTpl) -> int:
        if not segment:
            segment.append(group(f"segment at line {tpl.line}", "segment", tpl.line))
        return segment[0]

    for ins in cp.body:
        if isinstance(ins, LoopTpl):  # its statements issue after every iteration's end
            nest(ins.body, ins)
            segment.clear()
        elif isinstance(ins, TaskTpl):
            place(ins, partial(in_segment, ins))
            if ins.sync:
                segment.clear()
        elif isinstance(ins, WaitTpl):
            segment.clear()
    for g, ranges in line_ranges(at).items():
        groups[g].lines = ranges
    return groups, of


def line_ranges(at: list[tuple[int, int]]) -> dict[int, list[tuple[int, int]]]:
    """Per group, the runs of its statements' lines in line order, each
    [first, last]: between them lie only other groups' statements (and
    lines that are no task: loop headers, waits, declarations)."""
    out: dict[int, list[tuple[int, int]]] = {}
    prev = None
    for line, g in sorted(at):
        ranges = out.setdefault(g, [])
        if g == prev:
            ranges[-1] = (ranges[-1][0], line)
        else:
            ranges.append((line, line))
        prev = g
    return out


def unit_counts(topology: Mapping[str, Any]) -> dict[str, int]:
    """Units of each kind on the device (per-engine kinds times the engines)."""
    counts = {u: n * topology["num_engines"] for u, n in topology["per_engine"].items()}
    counts.update({u: n for u, n in topology["device_units"].items() if u in DEVICE_UNITS})
    return {u: n for u, n in counts.items() if n > 0}


def usable_counts(candidates: Iterable[Iterable[tuple[int, str, int]]]) -> dict[str, int]:
    """Units of each kind the program's tasks can run on: the distinct
    (engine, kind, index) among the candidate units of the run's task
    placements (`Scheduler.placements`, one per distinct combination of a
    task's kind, unit and memory levels: a program whose L1 regions are all
    in engine 0 reaches engine 0's DMAs only)."""
    seen = {unit for units in candidates for unit in units}
    counts: dict[str, int] = {}
    for _engine, kind, _index in seen:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


class Rate(NamedTuple):
    """A throughput a task was priced at (D-RT-COST, `Work.rate`): `per_cycle`
    of `of` ("B" a transfer or store moves, an NMU's "MACs", a compute
    task's "elements") per unit and cycle."""

    per_cycle: int
    of: str


class Tally:
    """What a timed run did, by group; fed by `Scheduler._run`."""

    def __init__(self, cp: CompiledProgram, topology: Mapping[str, Any]) -> None:
        self.groups, self.group_of = task_groups(cp)
        self.total = Group("program", "program", 0)
        self.units = unit_counts(topology)
        self.last: Link | None = None  # the chain of the task that ends last
        self.routes: dict[int, str | None] = {}  # `route` by `TaskTpl.seq_id`, as tasks run
        self.runs = Runs()  # every task's work, for each group's shared bound

    def add(
        self,
        tpl: TaskTpl,
        utype: str,
        w: Work,
        start: int,
        end: int,
        after: Link | None,
        kind: str = critical_path.START,
    ) -> Link:
        """Count a task run `[start, end)` on a unit of kind `utype`; `after`:
        the critical-path chain its start waited for, `kind` how (a
        `critical_path.KINDS`); returns its own chain."""
        seq = tpl.seq_id
        g = self.group_of[seq]
        if seq not in self.routes:
            self.routes[seq] = route(tpl.op)
        self.groups[g].add(utype, w, start, end, self.routes[seq])
        self.runs.add(utype, start, end, w.amount / w.rate, g)
        self.total.add(utype, w, start, end, self.routes[seq])
        link = critical_path.extend(after, g, start, end, kind)
        if self.last is None or end > self.last.end:
            self.last = link
        return link

    def segments(self) -> list[Segment]:
        """The critical path in time order, a segment per link, its group
        numbered among the groups that ran (the report's `groups`)."""
        index: dict[int, int] = {}
        for i, g in enumerate(self.groups):
            if g.tasks:
                index[i] = len(index)
        return critical_path.segments(self.last, lambda g: (index[g], self.groups[g].name))
