"""The accesses the hazard analysis compares, and how a race is reported: the
HAZ-01 / HAZ-03 diagnostic of two conflicting task instances the
happens-before model does not order (`nem-check-hazards`,
`nem-synthesize-deps` when it cannot repair one).  Separate from the
analysis (`hazard_finder`, `hazard_enum`), which finds the instances."""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.ir import SSAValue

from nem.analysis.element_access import ElementPattern
from nem.analysis.happens_before import Instance, Order, region_parts, task_label
from nem.dialect.diagnostics import Diagnostic, SourceLoc
from nem.dialect.ops import BufferOp, LoopOp, RegionOp, TaskOp


@dataclass(eq=False)
class Access:
    """Bytes [lo, hi) of a region operand of one task instance."""

    inst: Instance
    region: SSAValue
    lo: int
    hi: int
    write: bool


@dataclass(eq=False)
class StaticAccess:
    """One region operand of one task, with bounds [lo, hi) of the bytes it
    can touch over its loops' box (infinite when unknown)."""

    op: TaskOp
    region: SSAValue
    write: bool
    rank: int
    """Position among the task's accesses (reads first, as a task does them)."""
    buffer: SSAValue
    offset: SSAValue
    extent: SSAValue
    lo: float
    hi: float
    top: int
    """Index of the top-level statement holding the task."""
    windows: tuple[int, ...]
    """`static_windows` of the buffer's enclosing loops (D-SEM-INSTANCES)."""
    pattern: ElementPattern | None = None
    """The elements it touches within its bounds (D-HAZ-ELEMENTS); None: every byte."""


def overlapping_pairs(
    accs: list[StaticAccess],
) -> list[tuple[StaticAccess, StaticAccess]]:
    """Pairs of accesses whose byte bounds overlap, at least one a write:
    a sweep by lower bound with the active accesses expiring by upper
    bound (a read meets only the active writes)."""
    out: list[tuple[StaticAccess, StaticAccess]] = []
    active: dict[int, StaticAccess] = {}
    writers: dict[int, StaticAccess] = {}
    expiry: list[tuple[float, int]] = []
    for k, acc in sorted(enumerate(accs), key=lambda p: (p[1].lo, p[0])):
        while expiry and expiry[0][0] <= acc.lo:
            _, gone = heapq.heappop(expiry)
            active.pop(gone, None)
            writers.pop(gone, None)
        for other in (active if acc.write else writers).values():
            out.append((other, acc))
        out.append((acc, acc))  # its own other instances
        active[k] = acc
        if acc.write:
            writers[k] = acc
        heapq.heappush(expiry, (acc.hi, k))
    return [p for p in out if p[0].write or p[1].write]


class LatestCover:
    """Per byte of one buffer, the last top-level statement holding a write
    that covers it (`live_pairs`; -1: none yet): a step function, kept as
    the sorted starts of its pieces and their values.  Statements come in
    program order, so a later paint overrides."""

    def __init__(self) -> None:
        self.starts: list[float] = [-float("inf")]
        """Piece i is the bytes [starts[i], starts[i + 1]) (the last: to infinity)."""
        self.values: list[int] = [-1]

    def paint(self, lo: int, hi: int, top: int) -> None:
        """Statement `top` writes every byte of [lo, hi)."""
        starts, values = self.starts, self.values
        i = bisect.bisect_right(starts, lo) - 1  # the piece holding lo
        j = bisect.bisect_right(starts, hi) - 1  # the piece holding hi
        first = i + 1 if starts[i] < lo else i
        starts[first : j + 1] = [lo, hi]
        values[first : j + 1] = [top, values[j]]

    def covered_after(self, lo: float, hi: float, top: int) -> bool:
        """Whether every byte of [lo, hi) was covered by a statement after `top`."""
        starts, values = self.starts, self.values
        i = bisect.bisect_right(starts, lo) - 1
        while i < len(starts) and starts[i] < hi:
            if values[i] <= top:
                return False
            i += 1
        return True


def live_pairs(
    accs: list[StaticAccess],
    complete_from: Callable[[StaticAccess], float],
    cover: Callable[[StaticAccess], tuple[int, int] | None],
    member: Callable[[StaticAccess], object] | None = None,
) -> list[tuple[StaticAccess, StaticAccess]]:
    """The candidate pairs of one buffer's accesses (in program order): within
    a top-level statement, those whose byte bounds overlap
    (`overlapping_pairs`); across statements, an access against the earlier
    ones still *live*, those whose bounds overlap its own (a read meets only
    the live writes).

    An earlier access `x` (statement `x.top`) dies:

    * before the statement `complete_from(x)` (every instance of its task
      has completed there: a later access is ordered after it, never a race;
      INF: never).  Kept in a heap: rechecking every live access at every
      statement took 36 of the 40 s of `find_hazards` on a chain of 3,000
      nodes;
    * after a statement T > x.top once *every byte* of x's bounds is
      written by some write `w` of a statement in (x.top, T] that `cover`s
      it (`cover(w)` = [lo, hi): w's instances write exactly every byte of
      those bounds, of its one buffer instance).  No pair of x with an
      access y of a later statement is then nearest anywhere: at any byte b
      both touch, b is in x's bounds, so some such w writes b, and all of
      w's instances are issued after x's (an earlier top-level statement)
      and before y's (a later one); the hazard analysis reports only pairs
      nearest somewhere (no write of the byte issued between), so dropping
      the pair changes no race found, nor its witness.  Per byte, the last
      statement with such a write is kept (`LatestCover`): x is dead when
      it is after x.top on all of x's bounds.  A single covering write (the
      rule before, issue 30) missed the common case of an arena whose next
      member is written piecewise by several statements: DenseNet-121's
      arena ordering compared each earlier access with every later one
      until then.

    With `member` (an access -> what it was an access of, None: nothing),
    no pair of two accesses of one member is built (the arena ordering of
    `nem-share-buffers`: each packed buffer was race-free before, so only
    pairs across members are new, D-LOW-SHARE).  Those were more than half
    of DenseNet-121's arena pairs (37k of 69.5k), built only to be dropped
    (issue 30); the others come out as before, in the same order.  An
    access of one member still dies by covering writes of another.
    """
    out: list[tuple[StaticAccess, StaticAccess]] = []
    key = [None if member is None else member(a) for a in accs]
    live: dict[int, StaticAccess] = {}  # by position in `accs`, in program order
    writes: dict[int, StaticAccess] = {}  # the live writes, in the same order
    expiry: list[tuple[float, int]] = []  # (`complete_from`, position): a heap
    latest = LatestCover()
    for top, grouped in itertools.groupby(enumerate(accs), key=lambda a: a[1].top):
        group = list(grouped)
        while expiry and expiry[0][0] <= top:
            k = heapq.heappop(expiry)[1]
            live.pop(k, None)
            writes.pop(k, None)
        inner = overlapping_pairs([y for _, y in group])
        if member is not None:
            inner = [(x, y) for x, y in inner if not _same(member(x), member(y))]
        out += inner
        for j, y in group:
            # a read meets only the live writes: a weight every node of a
            # chain reads kept all its reads live, each read visiting all
            # the earlier ones (quadratic: 10,000 nodes, 5,000 reads, issue 30)
            m = key[j]
            out += [
                (x, y)
                for k, x in (live if y.write else writes).items()
                if x.lo < y.hi and y.lo < x.hi and (m is None or key[k] != m)
            ]
        for k, y in group:
            live[k] = y
            if y.write:
                writes[k] = y
            done = complete_from(y)
            if done != float("inf"):
                heapq.heappush(expiry, (done, k))
        painted = [c for c in (cover(w) for _, w in group if w.write) if c is not None]
        if not painted:
            continue
        for lo, hi in painted:
            latest.paint(lo, hi, top)
        # only an access some paint of this statement overlaps can have died
        # here (else it was as covered at the last statement that painted its
        # bytes, which checked it); the paints' envelope is a cheaper filter
        # than each paint (no generator per live access), covered_after decides
        plo, phi = min(c[0] for c in painted), max(c[1] for c in painted)
        dead = [
            k
            for k, x in live.items()
            if x.top < top and x.lo < phi and plo < x.hi and latest.covered_after(x.lo, x.hi, x.top)
        ]
        for k in dead:
            del live[k]
            writes.pop(k, None)
    return out


def _same(a: object, b: object) -> bool:
    """Whether two accesses' members (`live_pairs`) are one member."""
    return a is not None and a == b


def race_diagnostic(a: Access, b: Access, order: Order) -> Diagnostic:
    """The HAZ-01 / HAZ-03 error of conflicting accesses `a` (issued first) and
    `b` that `order` (the model's verdict on the two instances) leaves unordered."""
    from nem.dialect.operand_binding import value_label

    kind = (
        "write-after-write"
        if a.write and b.write
        else ("read-after-write" if a.write else "write-after-read")
    )
    owner = rop_buffer(b.region).owner
    assert isinstance(owner, BufferOp)
    buf = owner.buffer_name.data
    ta, tb = a.inst.task.op, b.inst.task.op
    la, lb = SourceLoc.of(ta), SourceLoc.of(tb)
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)

    def what(acc: Access) -> str:
        verb = "writes" if acc.write else "reads"
        return f"{verb} {value_label(acc.region)} bytes [{acc.lo}, {acc.hi}) of '{buf}'"

    name_a = task_label(ta)
    line_a = f" (line {la.line})" if la else ""
    a_tok = ta.token_name()
    if order.loop is not None:
        iv = order.loop.iv_name.data
        n = order.loop.max_in_flight()
        rule = "HAZ-03"
        msg = (
            f"{kind} hazard across iterations of loop '{iv}': {task_label(tb)} "
            f"{what(b)} in iteration {iv}+{order.distance} while {name_a}{line_a} "
            f"{what(a)} in iteration {iv}; @max_in_flight({n}) lets iterations at "
            f"distance {order.distance} < {n} overlap and no token orders them"
        )
        if (a.lo, a.hi) == (b.lo, b.hi):
            fix = (
                f"the same bytes are reused every iteration: give each of the {n} "
                f"in-flight iterations its own slot ({'double' if n == 2 else 'multiple'} "
                f"buffering: a buffer {n} times the size, the region at offset "
                f"({iv} mod {n}) * size), move the access out of the loop (load once), or "
                f"use @max_in_flight({order.distance})"
            )
        else:
            fix = (
                f"give each of the {n} in-flight iterations its own slot (offset "
                f"({iv} mod K) * size with K >= {n}), or use @max_in_flight({order.distance})"
            )
        note = (
            f"iterations {_ivs(order.loop, a)} and {_ivs(order.loop, b)} (distance "
            f"{order.distance}) touch bytes [{lo}, {hi}) of '{buf}'"
        )
    elif order.after_loop is not None:
        iv = order.after_loop.iv_name.data
        rule = "HAZ-01"
        msg = (
            f"{kind} hazard: {task_label(tb)} {what(b)} after loop '{iv}', but "
            f"{name_a}{line_a} {what(a)} in one of the loop's last "
            f"{order.after_loop.max_in_flight()} iteration(s) and nothing waits for it"
        )
        fix = (
            f"wait({a_tok}) inside the loop"
            if a_tok
            else "name the task's token and wait for it inside the loop"
        )
        fix += " (tasks of the last @max_in_flight iterations are not complete at endloop)"
        note = f"bytes [{lo}, {hi}) of '{buf}' overlap"
    else:
        rule = "HAZ-01"
        where = _where(a.inst)
        msg = (
            f"{kind} hazard: {task_label(tb)} {what(b)}{_where(b.inst)} but is not "
            f"ordered after {name_a}{line_a}, which {what(a)}{where}"
        )
        fix = (
            (
                f"add {a_tok} to the deps of {tb.token_name() or 'the task'} "
                f"(deps=[..., {a_tok}]) or wait({a_tok}) before it"
            )
            if a_tok
            else "name the earlier task's token and add it to this task's deps"
        )
        note = f"bytes [{lo}, {hi}) of '{buf}' overlap; no deps, wait or .sync orders the two tasks"
    notes = [Diagnostic("note", f"conflicting access by {name_a}: {note}", la)]
    return Diagnostic("error", msg, lb, rule, fix, notes)


def _ivs(loop: LoopOp, acc_or_inst: Access | Instance) -> str:
    inst = acc_or_inst.inst if isinstance(acc_or_inst, Access) else acc_or_inst
    k = inst.task.loops.index(loop)
    return f"{loop.iv_name.data}={inst.ivs[k]}"


def _where(inst: Instance) -> str:
    if not inst.task.loops:
        return ""
    return (
        " (at "
        + ", ".join(f"{lp.iv_name.data}={v}" for lp, v in zip(inst.task.loops, inst.ivs))
        + ")"
    )


def rop_buffer(region: SSAValue) -> SSAValue:
    rop = region.owner
    assert isinstance(rop, RegionOp)
    return region_parts(rop)[0]


@dataclass(frozen=True)
class Race:
    """Two conflicting accesses (`earlier` issued first) that the model does
    not order, and why (`order`: a loop window, an access after a loop, or
    neither)."""

    earlier: Access
    later: Access
    order: Order

    def diagnostic(self) -> Diagnostic:
        return race_diagnostic(self.earlier, self.later, self.order)


@dataclass(frozen=True)
class RaceScan:
    """What `find_races` found, and the work it took."""

    races: list[Race]
    warnings: list[Diagnostic]
    work: int
    """Pairs of static accesses examined plus isl queries: what a caller
    repeating the scan budgets."""
