"""The hazard analysis: HAZ-01 / HAZ-03 (LOOP-06) races of a program, decided
over sets of task instances, never by replaying loops (D-HAZ-SYMBOLIC).

A *static access* is one region operand of one task (`StaticAccess`).  Two
static accesses of a buffer, one of them a write, race when some instance of
the first is issued before some instance of the second, the two touch a
common byte of the same buffer instance, and the happens-before model does
not order them.  With quasi-affine offsets, extents and loop bounds that set
of instance pairs is a Presburger set over the two tasks' iteration
ordinals (plus the byte), built from the model's symbolic twins
(`happens_before.issued_before_set` / `ordered_set`, `semantics.*_set`)
and the accesses' expressions (`presburger`); isl decides its emptiness and
gives the witness the diagnostic names.  Cost grows with the pairs of
static accesses that can overlap, not with iterations:

* per buffer, a sweep over the accesses' byte bounds over the loop box
  finds the pairs that can overlap (never all pairs of a big buffer; two
  reads are no pair);
* a pair the structure orders for all instances (`ordered_always`) costs no
  isl query; the conflict part of a set (domains, buffer instance, bytes)
  does not depend on the ordering and is computed once per pair
  (`RaceCache`, which `nem-synthesize-deps` keeps across its rounds, with
  each pair's result keyed by the ordering facts it was derived from).

Reported, as the enumerating analysis before it did (its per-byte shadow
memory kept the last writer and the readers since), is each pair that is
*nearest* somewhere: a point of the race set with no write of the same
byte of the same buffer instance issued between the two accesses (one more
set difference, only on racing pairs).  The witness is the first instance
of the later access in issue order and the last of the earlier one.
Accesses whose expressions are not quasi-affine are enumerated
(`hazard_enum`), within `MAX_TASK_INSTANCES` and with a warning beyond it
(D-HAZ-WINDOW).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Mapping
from functools import partial

import islpy as isl
from xdsl.ir import Operation, SSAValue

from nem.analysis.access_forms import printed_form
from nem.analysis.element_access import element_pattern, touching
from nem.analysis.happens_before import (
    Instance,
    Order,
    PairFacts,
    StaticTask,
    Structure,
    common_loops,
    enclosing_loops,
    issue_key,
    issued_before_set,
    ordered,
    ordered_always,
    ordered_set,
    pair_facts,
    region_parts,
    task_operands,
    unordered_pieces,
)
from nem.analysis.hazard_enum import Enumeration
from nem.analysis.hazard_report import (
    Access,
    Race,
    RaceScan,
    StaticAccess,
    live_pairs,
    race_diagnostic,
)
from nem.analysis.ir_walk import walk_ops
from nem.analysis.issue_order import key_compare
from nem.analysis.presburger import (
    Boxes,
    InstanceSpace,
    Nest,
    NotQuasiAffine,
    check_quasi_affine,
    instance_space,
    point,
)
from nem.analysis.race_memos import PairKey, RaceCache, ShapeMemos, Witness
from nem.dialect.diagnostics import Diagnostic
from nem.dialect.expressions import Evaluator, ExprError, NotAnExpression
from nem.dialect.gc_pause import gc_paused
from nem.dialect.ops import BufferOp, LoopOp, ProgramOp, RegionOp
from nem.dialect.semantics.instances import same_instance_set, static_windows

MAX_TASK_INSTANCES = 1 << 20
"""Task instances the enumeration of accesses that are not quasi-affine may
take in all (D-HAZ-WINDOW)."""
INF = float("inf")


class HazardFinder:
    def __init__(
        self,
        program: ProgramOp,
        max_instances: int = MAX_TASK_INSTANCES,
        cache: RaceCache | None = None,
        buffers: Collection[SSAValue] | None = None,
        members: Mapping[Operation, object] | None = None,
        memos: ShapeMemos | None = None,
        structure: Structure | None = None,
    ):
        self.program = program
        self.cache = cache or RaceCache()
        self.s = structure if structure is not None else Structure(program, self.cache.skeleton)
        self.cache.skeleton = self.s.skeleton
        self.memos = memos or ShapeMemos()
        if self.cache.boxes is None or self.cache.windows is None:
            self.cache.boxes = self._boxes(program, self.cache.boxes)
        if self.cache.narrowed_loops:
            narrowed = self.cache.narrowed_loops
            self.cache.stale(
                {
                    st.op
                    for st in self.s.tasks.values()
                    if any(id(lp) in narrowed for lp in st.loops)
                }
            )
        self.boxes = self.cache.boxes
        self.ev = self.boxes.ev
        self.found: dict[tuple[object, ...], tuple[tuple[object, ...], Access, Access, Order]] = {}
        self.warnings: list[Diagnostic] = []
        self.work = 0
        """Pairs of static accesses examined plus isl queries made."""
        self.max_instances = max_instances
        self.buffers = buffers
        """Only the accesses of these buffers (None: all)."""
        self.members = members or {}
        """Region ops -> what they were a region of: two accesses through
        regions of one such member are known race-free (the buffers an arena
        of `nem-share-buffers` packs, each race-free before, D-LOW-SHARE)."""
        self._enum: Enumeration | None = None
        self._windows: dict[SSAValue, tuple[int, ...]] = self.cache.windows or {}

    def _boxes(self, program: ProgramOp, known: Boxes | None) -> Boxes:
        """The loops' boxes (`known`: kept from before a window narrowed,
        `RaceCache.narrowed`), and each buffer's windows into the cache: the
        rounds of `nem-synthesize-deps` change no loop and no buffer."""
        boxes = known or Boxes(Evaluator())
        windows = self.cache.windows = {}
        if known is not None and self.cache.by_buffer is not None:
            # a window narrowed: only the accessed buffers' windows matter
            # (`RaceCache.stale`), read without walking the whole program
            for buf in self.cache.by_buffer:
                if isinstance(buf.owner, BufferOp):
                    windows[buf] = static_windows(enclosing_loops(buf.owner), boxes.ev)
            return boxes
        for op in walk_ops(program):
            if isinstance(op, LoopOp):
                if known is None:
                    boxes.add(op)
            elif isinstance(op, BufferOp):
                windows[op.result] = static_windows(enclosing_loops(op), boxes.ev)
        return boxes

    # -- static accesses and candidate pairs -----------------------------------
    def _collect(self) -> dict[SSAValue, list[StaticAccess]]:
        """The static accesses of each buffer (of `buffers` when given: the
        arena ordering of `nem-share-buffers` asks for a few buffers of a
        whole program), in program order."""
        by_buffer: dict[SSAValue, list[StaticAccess]] = {}
        wanted = None if self.buffers is None else set(self.buffers)
        block = self.program.block
        index = self.s.index
        for st in self.s.tasks.values():  # in program order
            op = st.op
            # the top-level statement holding the task: per task, not per op of
            # the program (nine in ten are its regions' index constants)
            top_op: Operation = st.loops[0] if st.loops else op
            while top_op.parent_block() is not block:
                parent = top_op.parent_op()
                assert parent is not None
                top_op = parent
            top = index[top_op]
            reads, writes, _ = task_operands(op)
            rank = 0
            operands = [(v, False) for v in reads] + [(v, True) for v in writes]
            # one region read (or written) several times by a task is one access,
            # its last (a broadcast's concat reads one region E times,
            # D-LOW-BCAST-CONCAT): the copies touch the same bytes of the same
            # instances, so each would pair with every other access exactly as it
            # does; reads precede writes, so the ranks kept order them as before
            last = {key: i for i, key in enumerate(operands)}
            for i, (value, write) in enumerate(operands):
                rop = value.owner
                if not isinstance(rop, RegionOp) or last[value, write] != i:
                    rank += isinstance(rop, RegionOp)
                    continue
                buf, off, ext = region_parts(rop)
                if wanted is not None and buf not in wanted:
                    rank += 1  # not asked for (`buffers`): no bounds, no pair
                    continue
                lo, hi = self._bounds(off, ext)
                if lo >= hi:
                    rank += 1
                    continue
                by_buffer.setdefault(buf, []).append(
                    StaticAccess(
                        op,
                        value,
                        write,
                        rank,
                        buf,
                        off,
                        ext,
                        lo,
                        hi,
                        top,
                        self._windows.get(buf, ()),
                        element_pattern(rop, self.ev, self.memos.patterns),
                    )
                )
                rank += 1
        return by_buffer

    def _bounds(self, off: SSAValue, ext: SSAValue) -> tuple[float, float]:
        o, e = self.boxes.interval(off), self.boxes.interval(ext)
        if e is not None and e[1] <= 0:
            return 0, 0  # never touches a byte
        if o is None or e is None:
            return -INF, INF
        return o[0], o[1] + e[1]

    def _pairs(self, accs: list[StaticAccess]) -> list[PairKey]:
        """The candidate pairs of one buffer's accesses (`live_pairs`: an
        access pairs with the later ones until its task has completed or
        covering writes have written every byte it can touch).  Without the
        second, a program whose nests write whole buffers one after the
        other pairs every access with every earlier one (synthesize-deps
        starts from no ordering at all)."""
        member = (lambda a: self.members.get(a.region.owner)) if self.members else None
        return live_pairs(accs, self._complete_from, self._cover, member)

    def _complete_from(self, x: StaticAccess) -> float:
        """The first top-level statement before which every instance of `x`'s
        task has completed (the rules of `ordered` for an instance followed
        by a later top-level statement: a barrier covering it in the program's
        block, or, in a loop, one in its own block, which every iteration
        passes before the loop ends: D-HAZ-ORDER, D-HAZ-ENDLOOP); INF when
        none does.  Accesses of later statements are ordered after all of
        its instances, so such a pair is never a candidate: lowered programs,
        whose loop bodies end with a wait on their tasks, then pair no access
        across top-level statements (ResNet-50: 840k pairs a scan)."""
        st = self.s.tasks[x.op]
        c = st.cover.get(self.program.block)
        done = c + 1 if c is not None else INF
        if st.loops and st.block in st.cover:
            done = min(done, x.top + 1)
        return done

    def _cover(self, w: StaticAccess) -> tuple[int, int] | None:
        """[lo, hi) when the instances of write `w` write exactly every byte
        of its bounds (a program-scope buffer: one instance)."""
        if w.windows or w.lo == -INF or w.hi == INF:
            return None
        n = len(self.s.tasks[w.op].loops)
        if n == 0 and self._static(w) and w.pattern is None:
            # one instance, constant bytes: its bounds are exactly what it writes
            return int(w.lo), int(w.hi)
        lo, hi = int(w.lo), int(w.hi)
        try:
            # domain, offset, extent, elements: a strided write covers the bytes
            # its instances' elements write together, never its spans (D-HAZ-ELEMENTS)
            key = (*self._form(w)[:3], w.pattern, lo, hi)
            whole = self.memos.covers.get(key)
            if whole is None:
                touched = self._touches(w, instance_space((n,), 1), 0)
                bounds = (
                    instance_space((), 1)
                    .universe.lower_bound_val(isl.dim_type.set, 0, lo)
                    .upper_bound_val(isl.dim_type.set, 0, hi - 1)
                )
                whole = self.memos.covers[key] = touched.project_out(
                    isl.dim_type.set, 0, n
                ).is_equal(bounds)
        except (NotQuasiAffine, NotAnExpression, ExprError):
            return None
        return (lo, hi) if whole else None

    # -- the analysis ------------------------------------------------------------
    def run(self) -> list[Diagnostic]:
        """The warnings and the race diagnostics, in the order the program issues them."""
        self.scan()
        return self.warnings + [race_diagnostic(a, b, o) for _, a, b, o in self.races()]

    def scan(self) -> None:
        """Find the races (`races`): a pass repairing them needs no diagnostic."""
        cache = self.cache
        if cache.by_buffer is None:
            cache.by_buffer = self._collect()
        by_buffer, pairs_of = cache.by_buffer, cache.pairs_of
        if len(pairs_of) < len(by_buffer):  # the first scan, or windows narrowed
            for buf, accs in by_buffer.items():
                if buf in pairs_of:
                    continue
                if all(self._quasi_affine(a) for a in accs):
                    pairs_of[buf] = self._pairs(accs)  # none within a member
                else:
                    pairs_of[buf] = None
            cache.pairs = [p for b in by_buffer for p in pairs_of[b] or ()]
            cache.replayed = [by_buffer[b] for b in by_buffer if pairs_of[b] is None]
        for x, y in cache.pairs:
            self._direction(x, y)
            if y is x:
                continue
            if x.top < y.top:
                # y's statement comes after x's: no instance of y is issued before
                # one of x (`ordered_always` says so, with no common loop); counted
                self.work += 1
            else:
                self._direction(y, x)
        for accs in cache.replayed:
            self._replay(accs)

    def races(self) -> list[tuple[tuple[object, ...], Access, Access, Order]]:
        """The races found, in the order the program issues them."""
        return sorted(self.found.values(), key=lambda r: r[0])

    def _direction(self, x: StaticAccess, y: StaticAccess) -> None:
        """Instances of `x` issued before instances of `y`."""
        tx, ty = self.s.tasks[x.op], self.s.tasks[y.op]
        self.work += 1
        facts = pair_facts(self.s, tx, ty)
        if ordered_always(self.s, tx, ty, facts):
            return
        key = (x, y)
        hit = self.cache.verdicts.get(key)
        if hit is not None and hit[0] == facts:
            witness = hit[1]
        else:
            try:
                witness = self._symbolic(x, y, tx, ty, facts)
            except (NotAnExpression, ExprError):
                witness = None  # a loop the program never runs or an access it skips
            self.cache.verdicts[key] = (facts, witness)
        if witness is not None:
            self._record(x, y, tx, ty, witness)

    def _quasi_affine(self, acc: StaticAccess) -> bool:
        """Whether isl can take `acc` (else its buffer is replayed)."""
        if self._static(acc):
            return True  # constants: isl takes them
        try:
            check_quasi_affine(self.ev, self.s.tasks[acc.op].loops, (acc.offset, acc.extent))
        except NotQuasiAffine:
            return False
        except (NotAnExpression, ExprError):
            pass  # never runs, or an access the replay skips too: no pair
        return True

    def _static(self, acc: StaticAccess) -> bool:
        """Whether `acc`'s offset and extent are constants (most accesses of
        a lowered program are outside loops: they need no isl set)."""
        return self.ev.static(acc.offset) is not None and self.ev.static(acc.extent) is not None

    def _replay(self, accs: list[StaticAccess]) -> None:
        if self._enum is None:
            self._enum = Enumeration(self.s, self.ev, self.max_instances, self.warnings)
        rep = self._enum.replay(accs)
        self.work += rep.work
        rank = {(a.op, a.region, a.write): a.rank for a in accs}
        for key, (a, b, order) in rep.found.items():
            sort = (
                issue_key(self.s, b.inst),
                rank[b.inst.task.op, b.region, b.write],
                rep.byte[key],
                not a.write,
                issue_key(self.s, a.inst),
            )
            self.found[key] = (sort, a, b, order)

    def _between_shape(
        self, x: StaticAccess, y: StaticAccess, tx: StaticTask, ty: StaticTask
    ) -> tuple[object, ...]:
        """What the witness of a racing pair depends on beyond the pair: each
        write that could come between (as `_form` prints it) and how it is
        placed relative to the two.  With `_form`, equal shapes give equal
        answers up to the identity of the tasks and buffers; lowered CNNs
        repeat nests (per engine, per identical layer), so pairs of equal
        shape are decided once (SqueezeNet: 15547 pairs, 2021 shapes)."""
        lo, hi = max(x.lo, y.lo), min(x.hi, y.hi)
        first, last = min(x.top, y.top), max(x.top, y.top)
        tops, writers = self._writers(x.buffer)
        between = []
        for w in writers[bisect.bisect_left(tops, first) : bisect.bisect_right(tops, last)]:
            if w.lo >= hi or lo >= w.hi:
                continue
            tw = self.s.tasks[w.op]
            between.append(
                (
                    self._form(w),
                    (w.top > x.top) - (w.top < x.top),
                    (y.top > w.top) - (y.top < w.top),
                    self._relation(tx, tw),
                    self._relation(tw, ty),
                    tx is tw,
                    tw is ty,
                )
            )
        return tuple(between)

    def _relation(self, a: StaticTask, b: StaticTask) -> tuple[object, ...]:
        return common_loops(a, b), a.pos < b.pos

    def _form(self, acc: StaticAccess) -> tuple[object, ...]:
        """An access as isl prints it on its task's own space (and what else
        its sets depend on): equal forms give equal sets on every space."""
        hit = self.cache.forms.get(acc)
        if hit is None:
            t = self.s.tasks[acc.op]
            nest = partial(self._nest, acc, instance_space((len(t.loops),)), 0)
            hit = self.cache.forms[acc] = (
                *printed_form(self.memos.forms, self.ev, t.loops, acc.offset, acc.extent, nest),
                acc.windows,
                acc.rank,
                acc.write,
                tuple(self.s.window[id(lp)] for lp in t.loops),
                acc.pattern,
            )
        return hit

    def _nest(self, acc: StaticAccess, sp: InstanceSpace, g: int) -> Nest:
        k = (acc.op, sp.sizes, len(sp.extra), g)
        hit = self.cache.nests.get(k)
        if hit is None:
            loops = self.s.tasks[acc.op].loops
            own = (acc.op, (len(loops),), 0, 0)
            base = self.cache.nests.get(own)
            if base is None:
                base = self.cache.nests[own] = Nest(
                    self.ev, self.boxes, loops, instance_space((len(loops),)), 0
                )
            hit = base if k == own else Nest(self.ev, self.boxes, loops, sp, g, base)
            self.cache.nests[k] = hit
        return hit

    def _touches(self, acc: StaticAccess, sp: InstanceSpace, g: int) -> isl.Set:
        """The instances (group `g` of `sp`) of `acc` that run and touch the
        byte (the space's first free variable): of its span, its elements'
        bytes when it has a pattern (D-HAZ-ELEMENTS)."""
        k = (acc, sp.sizes, len(sp.extra), g)
        hit = self.cache.touches.get(k)
        if hit is None:
            n = self._nest(acc, sp, g)
            off, byte = n.expr(acc.offset), sp.extra[0]
            hit = n.domain & (byte - off).nonneg_set() & (off + n.expr(acc.extent) - byte).pos_set()
            if acc.pattern is not None:
                hit = hit & touching(acc.pattern, byte, off)
            self.cache.touches[k] = hit
        return hit

    def _conflict(self, x: StaticAccess, y: StaticAccess) -> tuple[InstanceSpace, isl.Set] | None:
        """Pairs of instances (and a byte) where `x` and `y` touch the same byte
        of the same buffer instance: independent of the ordering, cached."""
        key = (x, y)
        if key in self.cache.conflicts:
            return self.cache.conflicts[key]
        tx, ty = self.s.tasks[x.op], self.s.tasks[y.op]
        sp = instance_space((len(tx.loops), len(ty.loops)), 1)
        nx, ny = self._nest(x, sp, 0), self._nest(y, sp, 1)
        c = self._touches(x, sp, 0) & self._touches(y, sp, 1)
        if x.windows:
            c = c & same_instance_set(nx.ords, ny.ords, x.windows, sp.universe)
        self.work += 1
        out = None if c.is_empty() else (sp, c)
        self.cache.conflicts[key] = out
        return out

    def _symbolic(
        self, x: StaticAccess, y: StaticAccess, tx: StaticTask, ty: StaticTask, facts: PairFacts
    ) -> Witness | None:
        """The witness of the pair's race, if it is nearest somewhere.  Pairs
        of equal shape are decided once (`_shape`): first whether they race,
        then, for those that do, where (the writes in between included)."""
        shape = (self._form(x), self._form(y), facts, tx is ty)
        races, witnesses = self.memos.races, self.memos.witnesses
        if shape in races:
            hit = races[shape]
        else:
            hit = races[shape] = self._races(x, y, tx, ty)
        if hit is None:
            return None
        full = shape + self._between_shape(x, y, tx, ty)
        if full in witnesses:
            return witnesses[full]
        witness = witnesses[full] = self._located(x, y, tx, hit[0], hit[1])
        return witness

    def _races(
        self, x: StaticAccess, y: StaticAccess, tx: StaticTask, ty: StaticTask
    ) -> tuple[InstanceSpace, isl.Set] | None:
        """The pair's race set (its space, the set), None when empty."""
        hit = self._conflict(x, y)
        if hit is None:
            return None
        sp, conflict = hit
        nx, ny = self._nest(x, sp, 0), self._nest(y, sp, 1)
        pieces = []
        for piece in unordered_pieces(self.s, tx, nx.ords, nx.trips, ty, ny.ords, sp):
            self.work += 1
            piece = conflict & piece
            if not piece.is_empty():
                pieces.append(piece)
        if not pieces:
            return None
        races = pieces[0]
        for piece in pieces[1:]:
            races = races | piece
        return sp, races

    def _located(
        self, x: StaticAccess, y: StaticAccess, tx: StaticTask, sp: InstanceSpace, races: isl.Set
    ) -> Witness | None:
        """The witness of a racing pair, None when it is nowhere nearest."""
        # the witness (`_witness`) is at the first instance of y and byte the
        # pair races at: when the instance of x picked there is nearest, that
        # is all (cheap: every variable fixed); else at that instance of y and
        # byte, else anywhere
        na, nb = sp.sizes[0], sp.sizes[1]
        later = point(races.project_out(isl.dim_type.set, 0, na).lexmin())
        at = races
        for k, v in enumerate(later):
            at = at.fix_val(isl.dim_type.set, na + k, v)
        first = self._pick(x, tx, sp, at)
        w = self._intervened(x, y, sp, list(first) + later)
        if w is None:
            return first, tuple(later[:nb]), later[nb]
        nearest = self._nearest(x, y, sp, races, w)
        return None if nearest.is_empty() else self._witness(x, tx, sp, nearest)

    def _intervened(
        self, x: StaticAccess, y: StaticAccess, sp: InstanceSpace, point: list[int]
    ) -> StaticAccess | None:
        """A write of the byte issued between the two instances of `point`
        (x's ordinals, y's, the byte), if there is one: per candidate write,
        its instances touching the byte whose issue key lies between the two
        (constant) keys."""
        lo, hi = max(x.lo, y.lo), min(x.hi, y.hi)
        first, last = min(x.top, y.top), max(x.top, y.top)
        tx, ty = self.s.tasks[x.op], self.s.tasks[y.op]
        na, nb = sp.sizes[0], sp.sizes[1]
        after = issue_key(self.s, Instance(tx, tuple(point[:na]), (), ())) + (x.rank,)
        before = issue_key(self.s, Instance(ty, tuple(point[na : na + nb]), (), ())) + (y.rank,)
        tops, writers = self._writers(x.buffer)
        span = writers[bisect.bisect_left(tops, first) : bisect.bisect_right(tops, last)]
        # the writes placed between the two tasks first: one of them is the
        # likely answer, so a chain of n writes of one buffer in one statement
        # costs O(1) queries a pair instead of O(n) (a 200-write task: 88 s)
        low, high = sorted((tx.pos, ty.pos))
        span.sort(key=lambda w: not low < self.s.tasks[w.op].pos < high)
        for w in span:
            if w.lo >= hi or lo >= w.hi:
                continue
            tw = self.s.tasks[w.op]
            sp1 = instance_space((len(tw.loops),), 1)
            try:
                mine = self._touches(w, sp1, 0).fix_val(isl.dim_type.set, len(tw.loops), point[-1])
            except (NotQuasiAffine, NotAnExpression, ExprError):
                continue
            if x.windows:
                mine = mine & same_instance_set(
                    sp1.groups[0], [sp1.const(o) for o in point], x.windows, sp1.universe
                )
            mine = mine & key_compare(self.s, tw, w.rank, sp1, after, 1)
            if (
                not mine.is_empty()
                and not (mine & key_compare(self.s, tw, w.rank, sp1, before, -1)).is_empty()
            ):
                return w
        return None

    def _nearest(
        self,
        x: StaticAccess,
        y: StaticAccess,
        sp: InstanceSpace,
        races: isl.Set,
        likely: StaticAccess,
    ) -> isl.Set:
        """The points of `races` with no write of their byte (same buffer
        instance) issued between the two accesses (`likely` the write tried
        first: it intervenes at one point)."""
        lo, hi = max(x.lo, y.lo), min(x.hi, y.hi)
        first, last = min(x.top, y.top), max(x.top, y.top)
        tx, ty = self.s.tasks[x.op], self.s.tasks[y.op]
        tops, writers = self._writers(x.buffer)
        span = writers[bisect.bisect_left(tops, first) : bisect.bisect_right(tops, last)]
        for w in [likely] + [w for w in span if w is not likely]:
            if w.lo >= hi or lo >= w.hi:
                continue
            tw = self.s.tasks[w.op]
            try:
                if x.top < w.top < y.top:  # every instance of w is issued between
                    races = races.subtract(self._bytes(w, sp))
                else:
                    races = races.subtract(self._between(x, tx, w, tw, y, ty, races=races))
            except (NotQuasiAffine, NotAnExpression, ExprError):
                continue  # not known to intervene: keep the points
            self.work += 1
            if races.is_empty():
                return races
        return races

    def _bytes(self, w: StaticAccess, sp: InstanceSpace) -> isl.Set:
        """The bytes some instance of `w` touches, as a set of `sp` (its byte variable)."""
        k = (w, sp.sizes, len(sp.extra), -1)
        hit = self.cache.touches.get(k)
        if hit is None:
            n = len(self.s.tasks[w.op].loops)
            mine = self._touches(w, instance_space((n,), 1), 0).project_out(isl.dim_type.set, 0, n)
            hit = self.cache.touches[k] = mine.insert_dims(isl.dim_type.set, 0, sum(sp.sizes))
        return hit

    def _between(
        self,
        x: StaticAccess,
        tx: StaticTask,
        w: StaticAccess,
        tw: StaticTask,
        y: StaticAccess,
        ty: StaticTask,
        at: list[int] | None = None,
        races: isl.Set | None = None,
    ) -> isl.Set:
        """The points (x's instance, y's, the byte) with an instance of `w`
        touching the byte issued between the two (same buffer instance);
        `at` fixes y's ordinals and the byte, `races` the points that matter
        (the sets stay small before w's instance is projected out)."""
        sp3 = instance_space((len(tx.loops), len(ty.loops), len(tw.loops)), 1)
        nx, ny, nw = self._nest(x, sp3, 0), self._nest(y, sp3, 1), self._nest(w, sp3, 2)

        # fixed variables: y's and the byte, and x's too when `at` has them
        start = sp3.starts[1] if at is None or len(at) == sp3.sizes[1] + 1 else 0
        dims = list(range(start, sp3.starts[2])) + [sum(sp3.sizes)]

        def fixed(t: isl.Set) -> isl.Set:
            for d, v in zip(dims, at or ()):
                t = t.fix_val(isl.dim_type.set, d, v)
            return t

        between = fixed(self._touches(w, sp3, 2))
        if races is not None:
            between = between & races.insert_dims(isl.dim_type.set, sp3.starts[2], len(tw.loops))
        if w.top == y.top:
            between = between & fixed(self._after(tw, w, nw, ty, y, ny, sp3))
        if x.top == w.top:
            between = between & fixed(self._after(tx, x, nx, tw, w, nw, sp3))
        if x.windows:
            between = between & same_instance_set(nx.ords, nw.ords, x.windows, sp3.universe)
        return between.project_out(isl.dim_type.set, sp3.starts[2], len(tw.loops))

    def _witness(
        self, x: StaticAccess, tx: StaticTask, sp: InstanceSpace, races: isl.Set
    ) -> Witness:
        """The instances the diagnostic names, as the per-byte replay met them
        first: the first instance of the later access in issue order
        (lexicographic ordinals) and its lowest conflicting byte; there, the
        earlier access's instance `_pick` says."""
        na, nb = sp.sizes[0], sp.sizes[1]
        later = point(races.project_out(isl.dim_type.set, 0, na).lexmin())
        fixed = races
        for k, v in enumerate(later):
            fixed = fixed.fix_val(isl.dim_type.set, na + k, v)
        return self._pick(x, tx, sp, fixed), tuple(later[:nb]), later[nb]

    def _pick(
        self, x: StaticAccess, tx: StaticTask, sp: InstanceSpace, at: isl.Set
    ) -> tuple[int, ...]:
        """The instance of `x` the replay met first among the points of `at`
        (a set with y's instance and the byte fixed): the last one for a
        write (the byte's last writer); for a read, the first of those it
        still held as readers (those ordered before another one are dropped,
        `ShadowReplay`)."""
        na, nb = sp.sizes[0], sp.sizes[1]
        earlier = at.project_out(isl.dim_type.set, na, nb + 1)
        if x.write:
            return tuple(point(earlier.lexmax()))
        sp2 = instance_space((na, na))
        n0, n1 = self._nest(x, sp2, 0), self._nest(x, sp2, 1)
        pairs = (
            earlier.insert_dims(isl.dim_type.set, na, na)
            & earlier.insert_dims(isl.dim_type.set, 0, na)
            & issued_before_set(self.s, tx, n0.ords, tx, n1.ords, sp2)
            & ordered_set(self.s, tx, n0.ords, n0.trips, tx, n1.ords, sp2)
        )
        held = earlier.subtract(pairs.project_out(isl.dim_type.set, na, na))
        return tuple(point(held.lexmin()))

    def _writers(self, buffer: SSAValue) -> tuple[list[int], list[StaticAccess]]:
        """The writes of `buffer` by top-level statement (and their statements)."""
        hit = self.cache.writers.get(buffer)
        if hit is None:
            assert self.cache.by_buffer is not None
            ws = sorted((a for a in self.cache.by_buffer[buffer] if a.write), key=lambda a: a.top)
            hit = self.cache.writers[buffer] = ([a.top for a in ws], ws)
        return hit

    def _after(
        self,
        ta: StaticTask,
        a: StaticAccess,
        na: Nest,
        tb: StaticTask,
        b: StaticAccess,
        nb: Nest,
        sp: InstanceSpace,
    ) -> isl.Set:
        """Where `b`'s instance is issued after `a`'s (an access of the same
        instance after it: a later operand of the task)."""
        out = issued_before_set(self.s, ta, na.ords, tb, nb.ords, sp)
        if ta is tb and a.rank < b.rank:
            out = out | sp.equal(na.ords, nb.ords, len(ta.loops))
        return out

    # -- reporting -----------------------------------------------------------------
    def _record(
        self, x: StaticAccess, y: StaticAccess, tx: StaticTask, ty: StaticTask, witness: Witness
    ) -> None:
        ia, ib = self.instance(tx, witness[0]), self.instance(ty, witness[1])
        a, b = self.access(x, ia), self.access(y, ib)
        order = ordered(self.s, ia, ib)
        assert not order.ordered, "internal: the symbolic ordering disagrees with `ordered`"
        sort = (issue_key(self.s, ib), y.rank, witness[2], not x.write, issue_key(self.s, ia))
        key = (tx, ty, x.region, y.region, x.write, y.write)
        self.found[key] = (sort, a, b, order)

    def instance(self, t: StaticTask, ords: tuple[int, ...]) -> Instance:
        """The instance of `t` at `ords`, with its loop variables and trip counts."""
        env: dict[SSAValue, int] = {}
        ivs, trips = [], []
        for lp, o in zip(t.loops, ords):
            lo, hi = self.ev.eval(lp.lower, env), self.ev.eval(lp.upper, env)
            assert lo is not None and hi is not None
            ivs.append(lo + o)
            trips.append(hi - lo + 1)
            env[lp.block.args[0]] = lo + o
        return Instance(t, tuple(ords), tuple(trips), tuple(ivs))

    def access(self, acc: StaticAccess, inst: Instance) -> Access:
        env: dict[SSAValue, int] = {lp.block.args[0]: v for lp, v in zip(inst.task.loops, inst.ivs)}
        lo, ext = self.ev.eval(acc.offset, env), self.ev.eval(acc.extent, env)
        assert lo is not None and ext is not None
        return Access(inst, acc.region, lo, lo + ext, acc.write)


def find_races(
    program: ProgramOp,
    max_instances: int = MAX_TASK_INSTANCES,
    cache: RaceCache | None = None,
    buffers: Collection[SSAValue] | None = None,
    members: Mapping[Operation, object] | None = None,
    memos: ShapeMemos | None = None,
) -> RaceScan:
    """The races `find_hazards` reports, as records (and its warnings): for
    passes that repair them (`nem-synthesize-deps`, which passes one `cache`
    to every scan of a program whose accesses it does not change).  With
    `buffers`, only the races on those buffers (`nem-share-buffers`: the
    arenas, all that packing changed); with `members` (region op -> the
    buffer it was a region of), not the pairs of accesses of one member
    (an arena's packed buffers, each race-free before packing: only pairs
    across members are new).  `memos`: shared with the driver's other
    analyses of the program (`ShapeMemos`)."""
    with gc_paused():
        finder = HazardFinder(program, max_instances, cache, buffers, members, memos)
        finder.scan()
        return RaceScan(
            [Race(a, b, o) for _, a, b, o in finder.races()], finder.warnings, finder.work
        )


def find_hazards(
    program: ProgramOp,
    max_instances: int = MAX_TASK_INSTANCES,
    memos: ShapeMemos | None = None,
    structure: Structure | None = None,
) -> list[Diagnostic]:
    """HAZ-01 / HAZ-03 (LOOP-06) diagnostics of a verified program.
    `structure`: the program's `Structure` as of now (`nem-verify`'s token
    stage built it on the same, unchanged program), else built here."""
    with gc_paused():
        return HazardFinder(program, max_instances, memos=memos, structure=structure).run()
