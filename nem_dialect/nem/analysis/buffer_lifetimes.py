"""Buffer lifetimes in program order and the packing of buffers whose
lifetimes do not overlap (decision D-LOW-SHARE; the rewrite is
`nem-share-buffers`, passes/nem/passes/share_buffers.py).

* The lifetime of a buffer is the interval of the program's top-level
  statements that use it: a statement uses a buffer when it is, or holds
  (a loop), a region op on the buffer or a task reading or writing such a
  region.  A use inside a loop therefore makes the buffer live for the whole
  loop, every iteration of it.
* Only program-scope buffers with a static size whose every use is a region
  op, and without decorators, are candidates: a buffer declared in a loop
  body has one instance per iteration in flight (D-SEM-INSTANCES), and
  anything else naming the buffer could not be moved to another one.
* Packing is first-fit over the candidates of one level, largest first
  (declaration order among equals): each goes at the lowest offset, a
  multiple of its align, where it overlaps no placed buffer whose lifetime
  overlaps its own.  Only buffers that then share bytes with another one
  are packed (repacked on their own); the others stay as they are.
* Where the level has room to spare (`spread`, given the bytes each arena
  may span), the packed buffers are placed again keeping neighbours apart:
  a buffer first avoids the bytes of every buffer used in its phases or the
  phase just before or after them (a phase: one top-level loop, or the
  straight-line statements between two loops), else those of its phases
  and the next one, and shares them only when neither fits.  Reuse orders
  the new contents' first access after the old ones' last, so a peeled
  tile run just before its loop, on bytes of the loop's slots, held back
  the loop's first iterations.
* A buffer *loaded ahead* (its first use a transfer into it from a buffer
  no transfer writes: a layer's weights) is kept, between those two
  tries, apart from the buffers of its own and the neighbouring *nest
  phases* on its level (`nest_index`: a straight-line phase cut where a layer's
  part on that engine ends), when the previous nest phase is a loop, or
  computes on the NMUs (`Lifetime.early`) for no longer than the buffer
  takes to load, by the cost model (D-RT-COST): its load then starts
  while that layer computes instead of after that layer's store out of
  the same bytes (session 41).  After a straight-line part with no NMU
  work (a pool, a copy) the DMAs are that part's chain and the early
  load would queue ahead of its loads; after a longer compute, kept
  apart was measured slower (SqueezeNet), not traced (D-LOW-SHARE).

Reuse is only sound when what orders the old contents' last access before
the new contents' first one is in the program: the pass re-runs the
ordering of `nem-synthesize-deps` after packing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue, Use

from nem.analysis.capacity import size_and_align
from nem.analysis.ir_walk import block_ops
from nem.dialect.attributes import BufferType
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import BufferOp, ComputeOp, LoopOp, MoveOp, ProgramOp, RegionOp, TaskOp
from nem.dialect.semantics.layout import footprint, layout
from nem.dialect.semantics.units import eligible_units


@dataclass(frozen=True)
class Lifetime:
    """One candidate buffer: its level, static size and align, and the
    interval [first, last] of the top-level statements that use it."""

    buffer: BufferOp
    size: int
    align: int
    first: int
    last: int
    phases: tuple[int, int] = (0, 0)
    """The phases of `first` and `last` (`phase_index`): what `spread` keeps
    apart."""
    nests: tuple[int, int] = (0, 0)
    """The nest phases of `first` and `last` on the buffer's level
    (`nest_index`), read where `early`."""
    early: bool = False
    """Loaded ahead after a loop, or after a nest phase computing no longer
    than the load: `spread` keeps it apart from the buffers of its own and
    the neighbouring nest phases where the phases cannot be."""

    @property
    def level(self) -> str:
        return self.buffer.result.type.level.data


@dataclass(frozen=True)
class Packing:
    """Buffers of one level sharing one arena: `offsets[buffer]` is where each
    starts in it."""

    level: str
    offsets: dict[BufferOp, int]
    """In declaration order: the first is where the arena is declared."""
    size: int
    align: int
    separate: int
    """Bytes the packed buffers take as separate buffers (sizes, plus the
    padding `semantics.layout` would put between them)."""

    @property
    def saved(self) -> int:
        return self.separate - self.size


def top_level_index(op: Operation, program: ProgramOp, index: dict[Operation, int]) -> int:
    """Position, in the program's block, of the statement holding `op`
    (`index`: the statements numbered once, `statement_index`)."""
    cur = op
    while cur.parent_op() is not program:
        parent = cur.parent_op()
        assert parent is not None, "op outside the program"
        cur = parent
    return index[cur]


def statement_index(program: ProgramOp) -> dict[Operation, int]:
    """Each top-level statement's position in the program's block."""
    return {op: k for k, op in enumerate(block_ops(program.block))}


def phase_index(stmts: Sequence[Operation]) -> list[int]:
    """Each top-level statement's phase: a loop is a phase of its own
    (odd numbers), the straight-line statements between two loops one phase
    (even numbers).  Unchanged by what runs between the L1 estimate and the
    packing (the ordering's waits and deps, dce of constants: no loop)."""
    out = []
    loops = 0
    for op in stmts:
        if type(op) is LoopOp:
            out.append(2 * loops + 1)
            loops += 1
        else:
            out.append(2 * loops)
    return out


Cycles = Callable[[TaskOp], int]
"""A task's estimated duration (D-RT-COST, `FinishTimes.cycles`)."""


def _buffer_level(region: RegionOp) -> str:
    """The level of the buffer `region` is a region of."""
    t = region.buffer.type
    assert isinstance(t, BufferType)
    return t.level.data


def _level(value: SSAValue) -> str | None:
    """The level of the buffer a region operand `value` is a region of."""
    owner = value.owner
    return _buffer_level(owner) if type(owner) is RegionOp else None


def _moves_out(op: Operation, level: str) -> bool:
    """`op` is a transfer out of `level` (a nest part's store)."""
    return isinstance(op, MoveOp) and _level(op.src) == level and _level(op.dst) != level


def _uses(op: Operation, level: str) -> bool:
    """`op` (a top-level statement) uses `level`: a task with a region of
    it, or a region of it some statement other than a store uses."""
    if type(op) is RegionOp:
        if _buffer_level(op) != level:
            return False
        return any(not _moves_out(u.operation, level) for u in op.results[0].uses)
    return isinstance(op, TaskOp) and any(_level(v) == level for v in op.operands)


def nest_index(stmts: Sequence[Operation], level: str) -> list[int]:
    """Each top-level statement's *nest phase* for the buffers of `level`:
    `phase_index`'s phases, each straight-line one cut where a part of a
    nest on `level` ends: a statement using `level` (`_uses`) after a
    transfer out of it starts the next nest phase.  Numbers increase along
    the program, a loop one of its own."""
    out = []
    phase = 0
    stored = after_loop = False
    for op in stmts:
        if type(op) is LoopOp:
            phase += 1
            out.append(phase)
            after_loop, stored = True, False
            continue
        if after_loop:
            phase += 1
            after_loop = False
        if _moves_out(op, level):
            stored = True
        elif stored and _uses(op, level):
            phase += 1
            stored = False
        out.append(phase)
    return out


def _nest_work(
    stmts: Sequence[Operation], nest: list[int], level: str, cycles: Cycles
) -> tuple[dict[int, int], set[int]]:
    """Per nest phase of `level`, the summed estimated cycles of its
    top-level NMU computes on `level`; and the nest phases that are loops."""
    nmu: dict[int, int] = {}
    loops: set[int] = set()
    for k, op in enumerate(stmts):
        if type(op) is LoopOp:
            loops.add(nest[k])
        elif (
            isinstance(op, ComputeOp)
            and eligible_units(op)[0] == "NMU"
            and any(_level(v) == level for v in op.operands)
        ):
            nmu[nest[k]] = nmu.get(nest[k], 0) + cycles(op)
    return nmu, loops


def lifetimes(
    program: ProgramOp,
    levels: Iterable[str],
    ev: Evaluator | None = None,
    cycles: Cycles | None = None,
) -> list[Lifetime]:
    """The candidate buffers at `levels` (level names as written: `L1[0]`,
    `L1`, `L2`) with their lifetimes, in declaration order; unused buffers
    are left out (nothing to share).  Linear in the program: the statements
    are numbered once, and the statement holding a nested op is found once
    per op holding it (a loop's tasks and regions share it).  With
    `cycles` (the device's cost model), the nest phases and `early` too
    (one more walk)."""
    ev = ev or Evaluator()
    wanted = set(levels)
    stmts = block_ops(program.block)
    index = {op: k for k, op in enumerate(stmts)}
    phase = phase_index(stmts)
    nests: dict[str, list[int]] = {}
    work: dict[str, tuple[dict[int, int], set[int]]] = {}
    written: set[SSAValue] = set()
    if cycles is not None:
        for lv in wanted:
            nests[lv] = nest_index(stmts, lv)
            work[lv] = _nest_work(stmts, nests[lv], lv, cycles)
        written = {
            op.dst.owner.buffer
            for op in program.walk()
            if isinstance(op, MoveOp) and type(op.dst.owner) is RegionOp
        }
    held: dict[Operation, int] = {}  # a nested op holding ops (a loop) -> its statement

    def at(op: Operation) -> int:
        parent = op.parent_op()
        if parent is program:
            return index[op]
        assert parent is not None, "op outside the program"
        k = held.get(parent)
        if k is None:
            k = held[parent] = at(parent)
        return k

    out = []
    for op in stmts:
        # `type(op) is`: no op class derives from BufferOp or RegionOp, and
        # isinstance on xDSL's ABC op classes runs Python code (issue 30)
        if type(op) is not BufferOp or op.result.type.level.data not in wanted:
            continue
        if op.decorator_list():
            continue
        uses = op.results[0].uses
        # every use is a region's buffer operand (its first)
        if not uses or not all(type(u.operation) is RegionOp and u.index == 0 for u in uses):
            continue
        placed = size_and_align(op, ev)
        if placed is None:
            continue
        points = []
        for u in uses:
            region = u.operation
            points.append(at(region))
            points += [at(v.operation) for v in region.results[0].uses]
        size, align = placed
        first, last = min(points), max(points)
        level = op.result.type.level.data
        nest, early = nests.get(level), False
        if nest is not None and cycles is not None:
            load = _loaded_ahead(op, uses, at, written, cycles)
            if load is not None:
                nmu, loops = work[level]
                before = nest[first] - 1
                early = before in loops or 0 < nmu.get(before, 0) <= load
        out.append(
            Lifetime(
                op,
                size,
                max(1, align),
                first,
                last,
                (phase[first], phase[last]),
                (nest[first], nest[last]) if nest is not None else (0, 0),
                early,
            )
        )
    return out


def _loaded_ahead(
    op: BufferOp,
    uses: Iterable[Use],
    at: Callable[[Operation], int],
    written: set[SSAValue],
    cycles: Cycles,
) -> int | None:
    """The estimated cycles of the longest transfer into `op` from a buffer
    no transfer writes (a constant: weights) among the tasks at its first
    statement, None when there is none."""
    tasks = [v.operation for u in uses for v in u.operation.results[0].uses]
    if not tasks:
        return None
    first = min(at(t) for t in tasks)
    load = None
    for t in tasks:
        if (
            isinstance(t, MoveOp)
            and type(t.src.owner) is RegionOp
            and type(t.dst.owner) is RegionOp
            and t.dst.owner.buffer is op.result
            and t.src.owner.buffer not in written
            and at(t) == first
        ):
            load = max(load or 0, cycles(t))
    return load


def _lowest(item: Lifetime, busy: Iterable[tuple[int, int]]) -> int:
    """The lowest offset, a multiple of `item`'s align, where it overlaps
    none of the byte intervals `busy`."""
    off = 0
    for lo, hi in sorted(set(busy)):
        if off + item.size <= lo:
            break
        if hi > off:
            off = -(-hi // item.align) * item.align
    return off


class _Live:
    """Placed buffers' byte intervals by the statements they are live at, in
    buckets of `SPAN` statements: each kept once per bucket its lifetime
    meets, not once per statement.  Kept per statement, DenseNet-121's
    packings listed 17.5 M intervals for 0.47 M distinct ones (a buffer is
    live at 176 statements on average), 4.9 s of its compile."""

    SPAN = 64

    def __init__(self) -> None:
        self.buckets: dict[int, list[tuple[int, int, int, int]]] = {}

    def add(self, first: int, last: int, lo: int, hi: int) -> None:
        """A buffer live from statement `first` to `last` at bytes [lo, hi)."""
        for b in range(first // self.SPAN, last // self.SPAN + 1):
            self.buckets.setdefault(b, []).append((first, last, lo, hi))

    def overlapping(self, first: int, last: int) -> Iterator[tuple[int, int]]:
        """The byte intervals of the buffers live at some statement from
        `first` to `last` (one more than once where it spans buckets)."""
        for b in range(first // self.SPAN, last // self.SPAN + 1):
            for f, lst, lo, hi in self.buckets.get(b, ()):
                if f <= last and first <= lst:
                    yield lo, hi


def _first_fit(items: list[Lifetime], limit: int | None = None) -> dict[BufferOp, int]:
    """First-fit offsets, largest first.  The placed buffers are kept by
    the statements they are live at (`_Live`), so each item meets only those whose
    lifetimes overlap its own (not every placed one: linear in the program
    when lifetimes are short, as the lowering's staging buffers are).
    With `limit`, an item first avoids the buffers of its phases and both
    neighbouring ones (kept per phase), else (`Lifetime.early`) of its nest
    phases and both neighbouring ones, else of its phases and the next one, each
    when it then ends by `limit` (`spread`)."""
    by_statement = _Live()
    by_phase: dict[int, list[tuple[int, int]]] = {}
    by_nest: dict[int, list[tuple[int, int]]] = {}
    offsets: dict[BufferOp, int] = {}
    for k in sorted(range(len(items)), key=lambda k: (-items[k].size, k)):
        item = items[k]
        off = None
        if limit is not None:
            first, last = item.phases
            # apart from both neighbours, else (early) the neighbouring nests, else the next one
            tries = [(by_phase, first - 1, last + 1), (by_phase, first, last + 1)]
            if item.early:
                tries.insert(1, (by_nest, item.nests[0] - 1, item.nests[1] + 1))
            for kept, lo, hi in tries:
                apart = _lowest(item, (iv for p in range(lo, hi + 1) for iv in kept.get(p, ())))
                if apart + item.size <= limit:
                    off = apart
                    break
        if off is None:
            off = _lowest(item, by_statement.overlapping(item.first, item.last))
        offsets[item.buffer] = off
        by_statement.add(item.first, item.last, off, off + item.size)
        if limit is not None:
            for p in range(item.phases[0], item.phases[1] + 1):
                by_phase.setdefault(p, []).append((off, off + item.size))
            for p in range(item.nests[0], item.nests[1] + 1):
                by_nest.setdefault(p, []).append((off, off + item.size))
    return offsets


def _sharing(items: list[Lifetime], offsets: dict[BufferOp, int]) -> list[Lifetime]:
    """The items whose bytes at `offsets` overlap another item's, in their
    order: sorted by start, an item overlaps an earlier one when the
    earlier ones' furthest end is past its start, a later one when the next
    one starts before its end."""
    spans = sorted(
        (offsets[it.buffer], offsets[it.buffer] + it.size, k) for k, it in enumerate(items)
    )
    shared: set[int] = set()
    furthest = -1
    for n, (start, end, k) in enumerate(spans):
        if furthest > start or (n + 1 < len(spans) and spans[n + 1][0] < end):
            shared.add(k)
        furthest = max(furthest, end)
    return [it for k, it in enumerate(items) if k in shared]


def _separate_footprint(items: list[Lifetime]) -> int:
    return footprint(layout([(it.buffer, it.size, it.align) for it in items]))


def pack(items: list[Lifetime]) -> Packing | None:
    """The packing of one level's candidates (module doc), or None when no
    two of them can share bytes.  `items` are of one level (`_plan` groups
    them; the level is read off the first)."""
    if not items:
        return None
    first = _first_fit(items)
    sharing = _sharing(items, first)
    if len(sharing) < 2:
        return None
    # the sharing items are first-fit again on their own; when they are all
    # of them (the lowering's staging buffers: each shares), that is the
    # same input, so the same offsets (issue 30)
    fit = first if len(sharing) == len(items) else _first_fit(sharing)
    offsets = {it.buffer: fit[it.buffer] for it in sharing}  # declaration order
    size = max(offsets[it.buffer] + it.size for it in sharing)
    separate = _separate_footprint(sharing)
    if size >= separate:
        return None
    return Packing(items[0].level, offsets, size, max(it.align for it in sharing), separate)


@dataclass(frozen=True)
class Plan:
    """A program's packings (`packings`) with what they were computed from:
    the levels and the candidates' lifetimes.  `nem-compile` packs the
    unordered program to ask whether L1 will fit (D-COMPILE-L1) and
    `nem-share-buffers` reuses the plan (`replan`) when the program still
    gives the same packing (issue 30: the packing was computed twice)."""

    levels: tuple[str, ...]
    lifetimes: tuple[Lifetime, ...]
    packings: tuple[Packing, ...]


def plan(program: ProgramOp, levels: Iterable[str], cycles: Cycles | None = None) -> Plan:
    """The packings of `levels` (one per level where sharing saves bytes);
    `cycles`: see `lifetimes`."""
    levels = tuple(levels)
    return _plan(levels, lifetimes(program, levels, cycles=cycles))


def _plan(levels: tuple[str, ...], found: list[Lifetime]) -> Plan:
    by_level: dict[str, list[Lifetime]] = {}
    for lt in found:
        by_level.setdefault(lt.level, []).append(lt)
    packed = (pack(items) for items in by_level.values())
    return Plan(levels, tuple(found), tuple(p for p in packed if p is not None))


SPREAD_TRIES = 8
"""How many limits `spread` tries per level before keeping its packing."""


def spread(found: Plan, room: Mapping[str, int]) -> Plan:
    """`found` with the buffers of each packing whose level has `room[level]`
    bytes to spare placed again (`_first_fit` with a limit): each keeps
    apart from the buffers of its own and the neighbouring phases when it
    then ends by the limit, else goes where the plain rule puts it.  Those
    plain placements may end past the room (the buffers kept apart took
    bytes they had), so the limit is lowered and tried again,
    `SPREAD_TRIES` times at most: by the overshoot times 1, 2, 4, ... after
    the first, second, third try (a buffer kept apart that pushes another
    past the room gives up its bytes only once the limit is below its end:
    lowered by the overshoot alone, VGG-19's L1[3] overshot by 96 bytes at
    every try and kept its tight packing).  The same buffers are packed
    (the others' layout does not change), or none when they all end up
    apart; a packing that never fits is kept as it was."""
    if not room:
        return found
    changed = False
    of = {lt.buffer: lt for lt in found.lifetimes}
    out = []
    for p in found.packings:
        items = [of[b] for b in p.offsets]
        most = p.size + room.get(p.level, 0)
        limit = most
        best: Packing | None = p
        for t in range(SPREAD_TRIES):
            if limit <= p.size:
                break
            fit = _first_fit(items, limit)
            size = max(fit[it.buffer] + it.size for it in items)
            if size <= most:
                offsets = {b: fit[b] for b in p.offsets}
                changed = changed or offsets != p.offsets
                # all kept apart: no arena, the buffers stay as they are
                best = Packing(p.level, offsets, size, p.align, p.separate)
                best = best if size < p.separate else None
                break
            limit -= (size - most) << t
        if best is not None:
            out.append(best)
    return Plan(found.levels, found.lifetimes, tuple(out)) if changed else found


def packings(program: ProgramOp, levels: Iterable[str]) -> list[Packing]:
    """One packing per level of `levels` where sharing saves bytes."""
    return list(plan(program, levels).packings)


def same_packing(old: Sequence[Lifetime], new: Sequence[Lifetime]) -> bool:
    """Whether `pack` gives the same packings for candidates `new` as for
    `old`: the same buffers (the same ops) in the same order with the same
    sizes and aligns, and lifetimes whose ends compare the same way, in
    the same phases (what `spread` keeps apart).

    Exact: a level's packing is a function of its candidates in declaration
    order, their sizes and aligns, and which lifetimes overlap.  `_first_fit`
    places largest first (declaration order among equals) and an item meets
    the placed items live at a statement of its lifetime, i.e. those whose
    lifetimes overlap its own ([f1, l1] and [f2, l2] overlap iff f1 <= l2
    and f2 <= l1: comparisons of ends); `_sharing` and `_separate_footprint`
    read only offsets, sizes and aligns.  So two lists whose ends, ranked
    among all the ends of their list, are equal give equal packings though
    the statement numbers differ (the ordering inserts waits, dce removes
    statements; `nem-compile` packs the program after both)."""
    if len(old) != len(new):
        return False
    for a, b in zip(old, new, strict=True):
        if a.buffer is not b.buffer or a.size != b.size or a.align != b.align:
            return False
    return _ranked(old) == _ranked(new)


def _ranked(
    items: Sequence[Lifetime],
) -> list[tuple[int, int, tuple[int, int], tuple[int, int], bool]]:
    """Each lifetime's ends as ranks among all the ends (ties equal), and
    its phases, nest phases and `early` (`spread` reads them)."""
    rank = {e: r for r, e in enumerate(sorted({e for it in items for e in (it.first, it.last)}))}
    return [(rank[it.first], rank[it.last], it.phases, it.nests, it.early) for it in items]


def replan(
    program: ProgramOp, levels: Iterable[str], old: Plan | None, cycles: Cycles | None = None
) -> Plan:
    """`plan(program, levels)`, reusing `old`'s packings when its levels are
    `levels` and the program's candidates give the same packing
    (`same_packing`); else computed again.  The lifetimes are always read
    from the program: the guard costs a walk of the buffers' uses, not a
    packing."""
    levels = tuple(levels)
    if old is None or old.levels != levels:
        return plan(program, levels, cycles)
    found = lifetimes(program, levels, cycles=cycles)
    if not same_packing(old.lifetimes, found):
        return _plan(levels, found)
    return Plan(levels, tuple(found), old.packings)
