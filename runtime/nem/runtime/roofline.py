"""The roofline report of a timed run (decision D-RT-ROOFLINE): per program
and per group of tasks, the cycles the run took, the lower bound the timed
cost model (D-RT-COST) puts on them, their ratio, the unit kind that binds
and each unit kind's utilization.

The bound of a set of tasks is the largest, over unit kinds, of the work of
that kind divided by what the device's units of that kind do per cycle:
`sum(amount / rate) / units`, amounts and rates taken from
`task_cost.task_work`, the function the timed mode takes its durations from
(one home for the throughputs: DMA bytes/cycle, NMU MACs/cycle by input
type, CSTL and VPU elements/cycle).  Fixed per-task latencies are not in
the bound: they are what a better schedule hides.

The groups and their tallies are `nem.runtime.roofline_tally`'s (what the
scheduler feeds, one task at a time: a node, a loop or a top-level
segment, each with its busy cycles, its work by unit kind, the ONNX nodes
fused into it).  The program's cycles are its total, the critical path of
the timed schedule; each group's `critical` is its share of that path
(`nem.runtime.critical_path`), `critical_by_kind` that share by what its
stretches' starts waited for, and the report's `critical_path` the path's
segments in time order.

The bound is the device's; `usable_units` are the units the program's
tasks can run on (a program compiled with `--engines 1` reaches one
engine's), and each row's `usable_bound` divides by those.

Given the least work of the program's ONNX nodes (their tensors once and
their MACs, `nem.frontends.onnx.traffic`, joined by the CLI or a script:
this module reads no model), each node row also gets an `ideal_bound`
(`ideal_bounds`): the compiled bound counts a transfer made twice twice,
the ideal does not.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from nem.dialect.semantics.cost import Profile, UnitChars, macs_per_cycle
from nem.runtime import critical_path
from nem.runtime.critical_path import Segment
from nem.runtime.roofline_shared import Beside, shared_work
from nem.runtime.roofline_tally import Group, Rate, Tally

LATENCY = "latency"
"""The binding kind when no unit kind is busy half a group's cycles."""

BUSY_ENOUGH = 0.5
"""A unit kind binds a group when its utilization is at least this (D-RT-ROOFLINE)."""


WITHIN = 2.0
"""The ratio the report counts each op type's node groups within (issue
35's goal: every convolution within 2x of its bound)."""


@dataclass
class UnitUse:
    """One unit kind in one group."""

    units: int
    amount: int  # bytes (transfers, stores), MACs (NMU) or elements (D-RT-COST)
    work: float  # cycles of one unit at full throughput
    busy: int  # cycles of its tasks, latencies included
    bound: float  # work / units
    utilization: float  # busy / (units x the group's cycles)
    rates: list[tuple[Rate, int]] = field(default_factory=list)  # amounts by rate, most work first


@dataclass
class Row:
    """A line of the report."""

    name: str
    kind: str
    line: int
    tasks: int
    cycles: int  # the program's total; a group's busy cycles (`Busy`)
    bound: float
    roof: str | None  # the unit kind whose work makes the bound
    binds: str  # the busiest unit kind when busy enough, else "latency"
    units: dict[str, UnitUse]
    span: tuple[int, int] = (0, 0)  # its first task's start, its last task's end
    lines: list[tuple[int, int]] = field(default_factory=list)  # `Group.lines`
    fused: list[str] = field(default_factory=list)  # `Group.fused`
    usable_bound: float = 0.0  # the bound over `Report.usable_units`
    usable_roof: str | None = None
    ideal_bound: float | None = None  # the least work's bound (`ideal_bound`), when asked
    ideal_roof: str | None = None  # its kind: "DMA" (every transfer unit) or "NMU"
    least: tuple[int, int] | None = None  # the least work's (bytes, MACs) behind `ideal_bound`
    op: str | None = None  # a node group's ONNX op type
    critical: int = 0  # cycles of the program's critical path in its tasks (`critical_path`)
    critical_by_kind: dict[str, int] = field(default_factory=dict)  # by `critical_path.KINDS`
    moved: dict[str, int] = field(default_factory=dict)  # `Group.moved`, most bytes first
    shared_bound: float = 0.0  # the bound of all the work run in its cycles (`shared_bounds`)
    shared_roof: str | None = None
    beside: list[str] | None = None  # over WITHIN: the groups whose work shared its cycles

    @property
    def ratio(self) -> float | None:
        return self.cycles / self.bound if self.bound > 0 else None

    @property
    def shared_ratio(self) -> float | None:
        return self.cycles / self.shared_bound if self.shared_bound > 0 else None

    def busy_beside(self, times: float = WITHIN) -> bool:
        """Over `times` its bound, within it of all the work run in its
        cycles (`shared_bounds`): its units busy with other groups' work,
        not idle (session 56; the report's line and the bench's count)."""
        shared = self.shared_ratio
        return (self.ratio or 0) > times and shared is not None and shared <= times

    @property
    def ideal_ratio(self) -> float | None:
        return self.cycles / self.ideal_bound if self.ideal_bound else None

    @property
    def usable_ratio(self) -> float | None:
        return self.cycles / self.usable_bound if self.usable_bound > 0 else None

    def to_json(self, ideal: bool = False) -> dict[str, object]:
        """The row; with `ideal`, its `ideal_bound` and `ideal_ratio` too
        (null for a row without one)."""
        extra: dict[str, object] = {}
        if ideal:
            extra = {
                "ideal_bound": None if self.ideal_bound is None else round(self.ideal_bound, 3),
                "ideal_ratio": None if self.ideal_ratio is None else round(self.ideal_ratio, 4),
                "ideal_roof": self.ideal_roof,
                "least": None
                if self.least is None
                else {"moved": self.least[0], "macs": self.least[1]},
            }
        return extra | {
            "name": self.name,
            "kind": self.kind,
            "line": self.line,
            "lines": [list(r) for r in self.lines],
            "tasks": self.tasks,
            "cycles": self.cycles,
            "critical": self.critical,
            **({"critical_by_kind": self.critical_by_kind} if self.critical else {}),
            "span": list(self.span),
            "bound": round(self.bound, 3),
            "ratio": None if self.ratio is None else round(self.ratio, 4),
            "roof": self.roof,
            "binds": self.binds,
            "fused": self.fused,
            "moved": self.moved,
            "usable_bound": round(self.usable_bound, 3),
            "usable_ratio": None if self.usable_ratio is None else round(self.usable_ratio, 4),
            "usable_roof": self.usable_roof,
            "shared_bound": round(self.shared_bound, 3),
            "shared_ratio": None if self.shared_ratio is None else round(self.shared_ratio, 4),
            "shared_roof": self.shared_roof,
            "beside": self.beside,
            "units": {
                u: {
                    "units": x.units,
                    "amount": x.amount,
                    "work_cycles": round(x.work, 3),
                    "busy": x.busy,
                    "bound": round(x.bound, 3),
                    "utilization": round(x.utilization, 4),
                    "rates": [{"rate": r.per_cycle, "of": r.of, "amount": a} for r, a in x.rates],
                }
                for u, x in self.units.items()
            },
        }


def row(
    g: Group, units: dict[str, int], cycles: int | None = None, usable: dict[str, int] | None = None
) -> Row:
    """A group's line: `cycles` defaults to its busy cycles (`Busy`), which
    the utilizations are fractions of; `usable`: the units the program can
    use (`usable_counts`), the device's when None."""
    taken = cycles if cycles is not None else g.spans.cycles
    uses = {}
    for u in sorted(g.work):
        n = units.get(u, 1)
        uses[u] = UnitUse(
            n,
            g.amount[u],
            g.work[u],
            g.busy[u],
            g.work[u] / n,
            g.busy[u] / (n * taken) if taken else 0.0,
            sorted(g.rates[u].items(), key=lambda ra: (-ra[1] / ra[0].per_cycle, ra[0])),
        )
    roof = max(uses, key=lambda u: uses[u].bound) if uses else None
    bound = uses[roof].bound if roof is not None else 0.0
    busiest = max(uses, key=lambda u: uses[u].utilization) if uses else None
    binds = busiest if busiest is not None and uses[busiest].utilization >= BUSY_ENOUGH else LATENCY
    span = (g.first or 0, g.last)
    reach = {u: g.work[u] / ((usable or {}).get(u) or uses[u].units) for u in uses}
    usable_roof = max(reach, key=lambda u: reach[u]) if reach else None
    return Row(
        g.name,
        g.kind,
        g.line,
        g.tasks,
        taken,
        bound,
        roof,
        binds,
        uses,
        span,
        g.lines,
        list(g.fused),
        reach[usable_roof] if usable_roof is not None else 0.0,
        usable_roof,
        moved=dict(sorted(g.moved.items(), key=lambda kv: (-kv[1], kv[0]))),
        op=g.op,
    )


@dataclass
class Report:
    """The roofline report of one timed run."""

    program: str
    device: str
    units: dict[str, int]
    total: Row
    groups: list[Row]
    usable_units: dict[str, int] = field(default_factory=dict)  # `usable_counts`
    profiled: bool = False  # a timing profile overrides D-RT-COST's numbers
    ideal: bool = False  # rows have an `ideal_bound` where the model gave their nodes' work
    critical_path: list[Segment] = field(default_factory=list)  # in time order
    no_tasks: list[str] = field(default_factory=list)
    """The nodes of the model given (`--onnx`) that no task names, as
    `'name' (Op)`: no group of their own and fused into none (`report`)."""

    def to_json(self) -> dict[str, object]:
        return {
            "program": self.program,
            "device": self.device,
            "decision": "D-RT-ROOFLINE",
            "units": self.units,
            "usable_units": self.usable_units,
            "total": self.total.to_json(self.ideal),
            "groups": [g.to_json(self.ideal) for g in self.groups],
            "critical_path": [s.to_json() for s in self.critical_path],
            **({"nodes_without_tasks": self.no_tasks} if self.ideal else {}),
            "within": {
                op: {"within": n, "of": of, **({"ideal": i} if self.ideal else {})}
                for op, (n, of, i) in self.within().items()
            },
        }

    def within(self, times: float = WITHIN) -> dict[str, tuple[int, int, int]]:
        """Per ONNX op type, how many of its node groups ran within `times`
        their bound, of how many, and (given the model) how many within
        `times` their ideal bound; most groups first (issue 35's measure:
        every Conv layer within 2x of its bound, which only
        `bench/bench_roofline.py --per-node` counted, not on a user's own
        model: an outside review, session 53)."""
        out: dict[str, list[int]] = {}
        for r in self.groups:
            if r.kind == "node" and r.op is not None and r.ratio is not None:
                n = out.setdefault(r.op, [0, 0, 0])
                n[0] += r.ratio <= times
                n[1] += 1
                n[2] += r.ideal_ratio is not None and r.ideal_ratio <= times
        ranked = sorted(out.items(), key=lambda kv: (-kv[1][1], kv[0]))
        return {op: (n[0], n[1], n[2]) for op, n in ranked}

    def kinds(self) -> list[str]:
        return list(self.total.units)

    def fewer_units(self) -> dict[str, int]:
        """The units of the kinds the program works on that its tasks can
        run on, when fewer than the device's for one of them (`nem-compile
        --engines 1` on a device of 4 engines); else {}."""
        device = {u: use.units for u, use in self.total.units.items()}
        usable = {u: self.usable_units.get(u, n) for u, n in device.items()}
        return usable if any(n < device[u] for u, n in usable.items()) else {}

    def shared_lines(self) -> list[str]:
        """The groups over `WITHIN` times their bound (the node groups, or
        every group of a program with none: `shared_rows`): those within it
        of the work run in their cycles, one line each with the groups
        beside them (`shared_bounds`: a layer stretched by a concurrent one,
        session 56), then those over it of both, named on one line (their
        units idle; an outside user saw them counted and never named)."""
        over = [r for r in shared_rows(self.groups) if (r.ratio or 0) > WITHIN]
        if not over:
            return []
        kept = [r for r in over if r.busy_beside()]
        idle = [r for r in over if not r.busy_beside()]
        what = "node group(s)" if over[0].kind == "node" else "group(s)"
        fewer = " (the device's units: see u-ratio)" if self.fewer_units() else ""
        out = [
            f"over {WITHIN:g}x of their bound: {len(over)} {what}, {len(kept)} of them within "
            f"{WITHIN:g}x of all the work run in their cycles{fewer}" + (":" if kept else "")
        ]
        for r in kept[:SHARED_LISTED]:
            own, shared = shown(r.cycles, r.bound)[1], shown(r.cycles, r.shared_bound)[1]
            out.append(f"  {r.name} {own} -> {shared} beside {' and '.join(r.beside or [])}")
        if len(kept) > SHARED_LISTED:
            out.append(
                f"  and {len(kept) - SHARED_LISTED} more (--json: each group's shared_ratio, beside)"
            )
        if idle:
            named = ", ".join(
                f"{r.name} {shown(r.cycles, r.bound)[1]} / {shown(r.cycles, r.shared_bound)[1]}"
                for r in idle[:SHARED_LISTED]
            )
            more = len(idle) - SHARED_LISTED
            out.append(
                f"  over {WITHIN:g}x of both ("
                + ("the device's units" if fewer else "their units idle")
                + f"): {named}"
                + (f" and {more} more" if more > 0 else "")
            )
        return out

    def critical_lines(self) -> list[str]:
        """The text's lines on the critical path (`critical_path.lines`)."""
        return critical_path.lines(self.groups, self.total.critical_by_kind, self.critical_path)

    def to_text(self) -> str:
        kinds = self.kinds()
        own = self.fewer_units()
        out = [
            "roofline (D-RT-ROOFLINE; throughputs D-RT-COST"
            + (", as the timing profile overrides them" if self.profiled else "")
            + f"): {self.program} on "
            f"{self.device}, units {_counts(self.units)}",
            f"{'group':<34}{'tasks':>7}{'cycles':>10}{'bound':>10}{'ratio':>8}  {'roof':<6}"
            + (f"{'u-bound':>10}{'u-ratio':>8}  " if own else "")
            + (f"{'ideal':>10}{'i-ratio':>8}  {'i-roof':<7}" if self.ideal else "")
            + f"{'binds':<9}"
            + "".join(f"{u:>7}" for u in kinds),
        ]
        table = [self.total, *self.groups]
        for r, name in zip(table, labels([r.name for r in table], 33)):
            util = "".join(
                f"{math.floor(r.units[u].utilization * 100 + 1e-9):6d}%"
                if u in r.units
                else f"{'-':>7}"
                for u in kinds
            )
            bound, ratio = shown(r.cycles, r.bound)
            line = f"{name:<34}{r.tasks:>7}{r.cycles:>10}{bound:>10}{ratio:>8}  {r.roof or '-':<6}"
            if own:
                bound, ratio = shown(r.cycles, r.usable_bound)
                line += f"{bound:>10}{ratio:>8}  "
            if self.ideal:
                bound, ratio = shown(r.cycles, r.ideal_bound) if r.ideal_bound else ("-", "-")
                line += f"{bound:>10}{ratio:>8}  {r.ideal_roof or '-':<7}"
            out.append(f"{line}{r.binds:<9}{util}")
        rows = {r.name for r in self.groups}  # (a node with a row of its own: part of it fused)
        out += [
            f"{'part of ' * (f in rows)}{f} fused into {r.name}"
            for r in self.groups
            for f in r.fused
        ]
        if self.no_tasks:
            shown_nodes = self.no_tasks[:NO_TASKS_LISTED]
            more = len(self.no_tasks) - len(shown_nodes)
            out.append(
                f"no task names {len(self.no_tasks)} node(s) of the model: "
                + ", ".join(shown_nodes)
                + (f" and {more} more (--json lists them)" if more else "")
                + "; their work, if any, was done at compile time or is in other nodes' tasks (a "
                "constant computed, a scale folded into its consumer, a transposed read, a "
                "concatenation written in place)"
            )
        if self.total.critical:
            out += self.critical_lines()
        if self.total.moved:
            out.append(f"moved: {_routes(self.total.moved)}")
        out.append(f"throughputs per unit and cycle: {_rates(self.total.units)}")
        if within := self.within():
            out.append(
                f"within {WITHIN:g}x of their bound: "
                + ", ".join(f"{op} {n} of {of}" for op, (n, of, _) in within.items())
            )
            if self.ideal:
                out.append(
                    f"within {WITHIN:g}x of their ideal: "
                    + ", ".join(f"{op} {i} of {of}" for op, (_, of, i) in within.items())
                )
        out += self.shared_lines()
        if self.groups and all(r.kind != "node" for r in self.groups):
            # A model compiled to `.nem` (nem-compile's default) has no ONNX
            # nodes: its report is loops and segments, one row when it has
            # no loop (an outside review, session 25); say where nodes are.
            out += [
                "groups: loops and segments; no task names an ONNX node (a model compiled",
                "with nem-compile -o M.nemb has a group per node, D-BC-NODES)",
            ]
        out += [
            "cycles: the program's total (its critical path), a group's busy cycles (while any",
            "of its tasks runs); bound: max over unit kinds of work / (units x throughput), the",
            "device's units, to 3 significant digits; ratio: cycles / the bound shown; roof: the",
            "kind of the bound; binds: the most utilized kind if busy half the cycles, else",
            "latency; columns: each unit kind's utilization (whole percents rounded down, so",
            "a kind shown at 50% binds); moved: the program's transfer and",
            "store bytes by memory levels, SRC->DST (each group's `moved` in --json);",
            "throughputs: D-RT-COST's, as the run priced its tasks, with each one's share of",
            "its kind's work where a kind has several (each group's `rates` in --json)",
        ]
        if within:
            out.append("within: per ONNX op type, its node groups whose ratio is at most 2")
        if any(r.kind == "layout" for r in self.groups):  # (an outside review, session 63)
            out += [
                "layout of 'x': the copy of a model input or output between its ONNX layout",
                "(NCHW) and the one the program computes in (NHWC, D-COMPILE-LAYOUT); no ONNX",
                "node does it, so it has no ideal",
            ]
        if self.shared_lines():
            out += [
                "work run in their cycles: every task's work (any group's) in the group's busy",
                "cycles over the device's units, each task's spread evenly over its run",
                f"(`shared_bound` in --json); beside: the {BESIDE} groups with the most of that",
                "work on the kind of that bound (their units busy with other groups' tasks)",
            ]
            if own:
                out.append(
                    "(the device's units, as the bound: the program's tasks reach fewer, whose "
                    "u-ratio says how busy they were)"
                )
        if self.total.critical:
            out += [
                "critical path: one longest chain of the run, each task back to what its start",
                "waited for (a dependency, a wait, a loop's window or end, or its unit's previous",
                "task: a group can be on it by queueing alone); its cycles in each group's tasks,",
                f"the {critical_path.SHOWN} largest (each group's `critical` in --json); entered by: "
                "the path's",
                "cycles by what each stretch in one group started after (`critical_by_kind`,",
                "`critical_path` in --json)",
            ]
            if critical_path.queued(self.critical_path):
                out += [
                    "queued on a unit: a group's stretches that started when another group's",
                    "task freed their unit, and their cycles",
                ]
        if own:
            out.append(
                f"u-bound, u-ratio: the bound over the units the program's tasks can run on "
                f"({_counts(own)}), and cycles / it"
            )
        if self.ideal:
            out += [
                "ideal, i-ratio, i-roof: the bound of the ONNX nodes' least work (the tensors",
                "entering and leaving the group once, its MACs, each at its type's rate), cycles /",
                "it, and its kind (DMA: the bytes over every transfer unit, DMA and sDMA; NMU: the",
                "MACs); a group that reads a tensor another group left in L1 can take less",
                "(i-ratio under 1); the program's: every tensor in and out of the whole model once",
            ]
            if not any(r.ideal_bound for r in self.groups) and any(
                r.kind == "node" for r in self.groups
            ):  # no nodes at all: the note above says where they are
                out.append(
                    "ideal: no group's nodes are nodes of the model given with static shapes "
                    "(give --onnx the model this program was compiled from)"
                )
        return "\n".join(out)


def labels(names: Sequence[str], width: int) -> list[str]:
    """Each name in at most `width` characters (`cut`), two names never
    shown alike: where two cuts collide (exporters' `/encoder/layer.0/...`
    and `/encoder/layer.1/...` keep the same ends; an outside review,
    session 66, saw two `node ..._gap' (GlobalAveragePool)` rows), each
    shows instead the window where it first differs from the others."""
    shown = [cut(n, width) for n in names]
    alike: dict[str, set[str]] = {}
    for n, label in zip(names, shown):
        alike.setdefault(label, set()).add(n)
    for i, n in enumerate(names):
        others = alike[shown[i]] - {n}
        if others:
            at = min(next((k for k, (a, b) in enumerate(zip(n, o)) if a != b), 0) for o in others)
            shown[i] = _window(n, width, at)
    return shown


def cut(name: str, width: int) -> str:
    """A group's name in at most `width` characters: a node's without its
    `node ` prefix (its quotes say what it is), then its middle cut, its op
    type kept (`'/encoder/lay...ion/MatMul' (MatMul)`: the name's end tells
    exporters' long node names apart, the op type what they are; an outside
    review, session 54, saw `node 'layernormalization_1' (L...`)."""
    if len(name) > width and name.startswith("node '"):
        name = name.removeprefix("node ")
    if len(name) <= width:
        return name
    head, sep, op = name.rpartition(" (")
    room = width - len(sep) - len(op) - 3
    if not sep or room < 8:
        return name[: width - 3] + "..."
    return f"{head[: room - room // 2]}...{head[len(head) - room // 2 :]}{sep}{op}"


def _window(name: str, width: int, at: int) -> str:
    """`name` in at most `width` characters around its character `at`,
    `...` where it is cut, a node's op type kept where it leaves room."""
    short = name.removeprefix("node ") if name.startswith("node '") else name
    at, name = max(0, at - (len(name) - len(short))), short
    head, sep, op = name.rpartition(" (")
    tail = f"{sep}{op}" if sep and width - len(sep) - len(op) >= 12 else ""
    head = head if tail else name
    room = width - len(tail) - 6
    start = max(0, min(at - room // 2, len(head) - room))
    end = start + room
    return f"{'...' if start else ''}{head[start:end]}{'...' if end < len(head) else ''}{tail}"


def _routes(moved: Mapping[str, int]) -> str:
    """`DDR->L1 1,204,224 B (78%), ...`: bytes by route, each one's share."""
    total = sum(moved.values())
    return ", ".join(f"{r} {n:,} B ({100 * n / total:.0f}%)" for r, n in moved.items())


def _rates(units: Mapping[str, UnitUse]) -> str:
    """`CSTL 256 elements (98%), 32 B (2%); DMA 32 B; NMU 8192 MACs`: the
    throughputs the run's tasks were priced at, per unit kind; a kind priced
    at several (an NMU's MACs by input type; a store on a CSTL moves bytes)
    lists each with its share of the kind's work cycles."""
    out = []
    for u, use in units.items():
        cycles = {r: a / r.per_cycle for r, a in use.rates}
        total = sum(cycles.values()) or 1.0
        shares = [
            f"{r.per_cycle:g} {r.of}" + (f" ({100 * c / total:.0f}%)" if len(cycles) > 1 else "")
            for r, c in cycles.items()
        ]
        out.append(f"{u} {', '.join(shares)}")
    return "; ".join(out) if out else "-"


def _counts(units: Mapping[str, int]) -> str:
    return ", ".join(f"{u} x{n}" for u, n in units.items())


def shown_bound(bound: float) -> str:
    """A bound as the text report prints it: to at least 3 significant
    digits (`3.06`, `34.8`, `14112`), so the ratio a reader recomputes
    from it is the one shown (an integer bound of 4 beside a ratio from
    3.06 read as an error, D-RT-ROOFLINE)."""
    if bound <= 0:
        return "0"
    return f"{bound:.{min(max(0, 2 - math.floor(math.log10(bound))), 6)}f}"


def shown(cycles: int, bound: float) -> tuple[str, str]:
    """(bound, ratio) as the text prints them (here and in
    bench/bench_roofline.py): the ratio is cycles over the bound shown."""
    b = shown_bound(bound)
    return b, f"{cycles / float(b):.2f}" if float(b) > 0 else "-"


class LeastWork(Protocol):
    """The least work of a group of ONNX nodes (`nem.frontends.onnx.traffic`):
    `moved` bytes, `macs` multiply-accumulates, `by_type` those per element
    type."""

    @property
    def moved(self) -> int: ...
    @property
    def macs(self) -> int: ...
    @property
    def by_type(self) -> tuple[tuple[str | None, int], ...]: ...


Least = Callable[[list[str]], LeastWork | None]
"""The least work of the nodes named (a group's own node and those fused
into it), None when the model cannot say."""


@dataclass(frozen=True)
class Pricing:
    """What prices a least work: the device's units and D-RT-COST's
    throughputs (the run's profile)."""

    units: Mapping[str, int]
    unit_chars: UnitChars
    profile: Profile

    def cycles(self, w: LeastWork) -> tuple[float, float]:
        """(transfer cycles, NMU cycles) of `w`: its bytes over every transfer
        unit of the device at its bandwidth, its MACs of each element type
        over the NMUs at that type's rate (`semantics.cost.macs_per_cycle`),
        summed."""
        bw = sum(
            n * self.profile[u]["bandwidth"]
            for u, n in self.units.items()
            if "bandwidth" in self.profile.get(u, {})
        )
        nmus = self.units.get("NMU", 0)
        rates = [(k, nmus * macs_per_cycle(e, self.unit_chars, self.profile)) for e, k in w.by_type]
        return (w.moved / bw if bw else 0.0, sum(k / r for k, r in rates if r))


NO_TASKS_LISTED = 8
"""The nodes without tasks the text names; the rest are counted."""


def ideal_bounds(rows: list[tuple[Group, Row]], total: Row, least: Least, price: Pricing) -> None:
    """Each node row's `ideal_bound`: the larger of its least work's
    transfer and NMU cycles (`Pricing.cycles`), the least work of its own
    node and those fused into it but the nodes with a row of their own
    (whose work the compiler split between two groups); the program's: that
    of all its nodes as one group, each tensor in and out of the whole once,
    when every node row has one.  A lower bound by construction: CSTL, VPU
    work and latencies left out.  An outside user, session 62: a Sigmoid of
    a GlobalAveragePool's 32 values, fused with the pooling's divide,
    counted the pooling's whole input, and the program's ideal (the sum
    over its rows, the input of a pooling and of a Mul counted twice) was
    above the cycles the program took."""
    own = {next(iter(g.nodes)) for g, _ in rows if g.kind == "node" and g.nodes}
    nodes: dict[str, None] = {}
    missing = False
    for g, r in rows:
        if g.kind != "node" or not g.nodes:
            continue
        first = next(iter(g.nodes))
        names = [first, *(n for n in g.nodes if n not in own)]
        nodes.update(dict.fromkeys(g.nodes))
        w = least(names)
        if w is None:
            missing = True
            continue
        r.ideal_bound, r.ideal_roof, r.least = _priced(w, price)
    w = None if missing or not nodes else least(list(nodes))
    if w is not None:
        total.ideal_bound, total.ideal_roof, total.least = _priced(w, price)


def _priced(w: LeastWork, price: Pricing) -> tuple[float, str, tuple[int, int]]:
    """(bound, its kind, (bytes, MACs)) of least work `w`."""
    moved, macs = price.cycles(w)
    bound, roof = max((moved, "DMA"), (macs, "NMU"))
    return bound, roof, (w.moved, w.macs)


def report(
    tally: Tally,
    total_cycles: int,
    program: str,
    device: str,
    usable: dict[str, int] | None = None,
    profiled: bool = False,
    least: tuple[Least, Pricing] | None = None,
    nodes: Sequence[tuple[str, str]] = (),
) -> Report:
    """The report of `tally`; `usable`: the units the program's tasks can run
    on (`usable_counts`), the device's when None; `profiled`: a timing
    profile (`nem-run --profile`) changed the throughputs, which the header
    then says (an outside review, session 25, saw D-RT-COST named for
    bounds its profile had halved); `least`: the least work of the program's
    ONNX nodes and its pricing, which give rows an `ideal_bound`; `nodes`:
    the model's (name, op type), those no task names listed (`no_tasks`: an
    outside review, session 55, found a Mul folded into a Softmax named
    nowhere, against "every node with work is a group or listed")."""
    units = tally.units
    usable = {u: usable.get(u, 0) for u in units} if usable is not None else dict(units)
    on_path = critical_path.by_group(tally.last)
    pairs = []
    total = row(tally.total, units, total_cycles, usable)
    for i, g in enumerate(tally.groups):
        if g.tasks:
            r = row(g, units, usable=usable)
            r.critical_by_kind = on_path.get(i, {})
            r.critical = sum(r.critical_by_kind.values())
            for k, n in r.critical_by_kind.items():
                total.critical_by_kind[k] = total.critical_by_kind.get(k, 0) + n
            pairs.append((g, r))
    total.critical = sum(total.critical_by_kind.values())
    shared_bounds(pairs, total, tally)
    if least is not None:
        ideal_bounds(pairs, total, *least)
    return Report(
        program,
        device,
        units,
        total,
        [r for _, r in pairs],
        usable,
        profiled,
        least is not None,
        tally.segments(),
        _unnamed(tally, nodes),
    )


SHARED_LISTED = 5
"""How many groups within 2x of their shared bound the text names."""

BESIDE = 2
"""How many of the groups that shared its cycles a row names (`beside`)."""


def shared_bounds(pairs: list[tuple[Group, Row]], total: Row, tally: Tally) -> None:
    """Each row's `shared_bound`: the largest, over unit kinds, of the work
    every task (any group's) ran in the group's busy cycles over the kind's
    units (`roofline_shared`; its own bound where no other work ran), the
    program's its bound; a row `shared_rows` counts over `WITHIN` times its
    own bound names the groups whose work on the kind of that bound
    shared its cycles most (`beside`)."""
    total.shared_bound, total.shared_roof = total.bound, total.roof
    spread = shared_work(tally.runs)
    index = {id(g): i for i, g in enumerate(tally.groups)}
    counted = {id(r) for r in shared_rows([r for _, r in pairs])}
    near: Beside | None = None
    for g, r in pairs:
        starts, ends = g.spans.starts, g.spans.ends
        work = {k: sp.within(starts, ends) / tally.units.get(k, 1) for k, sp in spread.items()}
        for k, use in r.units.items():  # its own where nothing else ran (to rounding)
            if work.get(k, 0.0) <= use.bound or math.isclose(work[k], use.bound, rel_tol=1e-9):
                work[k] = use.bound
        r.shared_roof = max(work, key=lambda k: work[k]) if work else None
        r.shared_bound = work[r.shared_roof] if r.shared_roof is not None else 0.0
        if r.shared_roof is not None and id(r) in counted and (r.ratio or 0) > WITHIN:
            near = near or Beside(tally.runs)
            others = near.of(r.shared_roof, index[id(g)], starts, ends)
            r.beside = [tally.groups[i].name for i in list(others)[:BESIDE]]


def shared_rows(rows: Sequence[Row]) -> list[Row]:
    """The rows the shared line counts: the node groups, or every group of
    a program with none (a `.nem` text program's loops and segments)."""
    nodes = [r for r in rows if r.kind == "node"]
    return nodes or [r for r in rows if r.kind in ("loop", "segment")]


def _unnamed(tally: Tally, nodes: Sequence[tuple[str, str]]) -> list[str]:
    """`nodes` that no task's location names, in the model's order."""
    seen = {n for g in tally.groups for n in g.nodes}
    if not seen:  # a program with no node (.nem text): the report says so already
        return []
    return [f"'{name}' ({op})" for name, op in nodes if name not in seen]
