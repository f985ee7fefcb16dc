"""`nem-jam-engine-loops`: sibling loops on different engines become one loop
whose iterations hold every engine's work (decision D-NEM-JAM-ENGINES).

A nest split over N engines is lowered as N loops one after the other, each
on its own engine (D-COMPILE-ENGINES), and the program is one stream: the
statement after a loop is issued once the loop has issued every iteration
(D-SEM-ENDLOOP), and a loop opens iteration j only once iteration j - N has
completed (D-RT-LOOP).  So engine 1's loop starts when engine 0's has all but
finished, and a layer split over 4 engines takes about as long as on one.
Jamming the loops (the classic unroll-and-jam's second half, or sibling
fusion) issues iteration i of every engine's loop together, so the engines
run at the same time.

The rewrite moves the body of loop A to the start of the body of the next
loop B of its block, A's variable replaced by B's, and erases A: B's
iteration i runs A(i) then B(i).  Moving A's body later than the statements
between A and B, and interleaving the iterations of A and B, keeps the
program's results exactly when nothing A touches is written by B or by a
statement between them, and A writes nothing they touch (no conflicting
access pair changes order).  That is what `Footprints` decides, by byte
hulls: per buffer, the interval that holds every byte a statement may read
(or write) over all its iterations (`iteration_space.forms`, exact for
affine offsets, no enumeration), in one iteration of the loops around it:
two statements of one block run in the same one, so an affine offset's
terms in those loops' variables are kept apart and two hulls with the same
terms are compared without them (the engine parts' tile loops inside a
jammed loop jam too).  Two such hulls that meet are then compared on the
bytes their accesses touch (`Placed`: each offset over its loops' box plus
its elements, D-HAZ-ELEMENTS, `element_access.box_bytes`; isl decides
whether the sets meet): engine
parts along an NHWC output's channels write interleaved byte intervals but
disjoint elements.  An access it cannot bound keeps its statement where
it is.  Further, A and B:

* have constant bounds with the same first value (when one runs longer, its
  later iterations stay a loop of their own, after the jammed one) and the
  same decorators (`@max_in_flight`: jamming a loop of one window into one of
  another measured slower on ResNet-50 than leaving them apart);
* use L1 of disjoint, non-empty sets of engines (the point of jamming; two
  loops of one engine are left as they are);
* hold no ordering of their own (no `wait`, no `deps`): the pass runs
  before `nem-synthesize-deps`, which then orders the jammed program's
  conflicting accesses as it would any program's (D-LOW-DEPS);
* declare no name in common, and A none that B's variable or a statement
  between them declares (NAME-02: A's body moves under B, after them);
* when one runs longer, its body declares no buffer (the tail would
  declare it again).

The tail goes after the loops that follow B and may jam with it next (the
other engine parts, when they touch nothing the tail writes and write
nothing it reads), so that engine parts of two lengths, more than one
longer part after a shorter one (2, 2, 3, 3 iterations), all jam, and the
tails of the longer parts, of one first value, jam together after them.

An engine part whose outer tile loop has one iteration where the others'
have several (its rows are one tile, the loop folded away) is a loop of
other decorators than theirs: when the jammed loop A holds a loop with B's
decorators and bounds, B goes into a loop of one iteration (A's first, A's
decorators) and jams with A's first iteration, its inner loop with A's
(the one-iteration wrapper, D-NEM-JAM-ENGINES); A's other iterations are
the tail.

Where each engine part is two loops (a tile loop and its peeled last tile:
a sum over 13 rows in tiles of 7), jamming each loop into the one before
paired a part's second loop with the next part's first, and the engines ran
one after another.  So first, a loop B moves up into the earliest earlier
loop A of its shape (`_hoist`: A's body one or more copies of B's task and
loop sequence, the engine parts of one nest being clones) that is not the
loop right before it, looking back until a statement on one of B's engines:
B's body goes to the end of A's when A and B have the same bounds and
decorators, other engines and no name in common, and B touches nothing A
and the statements between write, writes nothing they touch and uses no
value defined from A on (the same conditions, moved the other way).

After the jams, the statements right after a loop of the program's block
that run on other engines and conflict with nothing it touches move before
it (`LonePartsFirst`): an engine part of one tile after the jammed loop of
the others (a nest's shorter last part) was issued only once the loop's
iterations had ended, and ran after them.

Cost: each loop looks back once to the previous loop of its block, over the
statements between, and for `_hoist` to the last statement on one of its
engines (the other engines' parts of its nest); a statement's footprint is
computed once (a jammed loop's is the union of its parts'); the isl sets
of a hull's accesses are built only where two intervals meet, once per
access, and a hull joining more than MAX_PLACED accesses keeps its interval.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import islpy as isl
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, ModuleOp, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from nem.analysis.element_access import ElementPattern, box_bytes, element_pattern
from nem.analysis.happens_before import enclosing_loops, region_parts, task_operands
from nem.analysis.ir_walk import walk_ops
from nem.dialect.attributes import RegionType, SeqEngineAttr
from nem.dialect.bounded_cache import BoundedCache
from nem.dialect.builder_attrs import index_constant
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.iteration_space import IterationSpace, affine_interval, forms
from nem.dialect.ops import (
    BufferOp,
    LoopOp,
    ProgramOp,
    RegionOp,
    TaskOp,
    WaitOp,
    programs,
    ssa_name_hint,
)
from nem.passes.forward_fills import names_of
from nem.passes.split_transfers import Names

Outer = frozenset[tuple[BlockArgument, int]] | None
"""How a hull moves with the variables of the loops around the statement:
their coefficients in its affine offset (None: not affine, the hull then
holds for every value of those variables)."""


@dataclass(frozen=True)
class Placed:
    """The bytes one access touches over its own loops, the `Outer` terms
    left out: its offset `c + sum(a * x)` over the box of the variables `x`
    and, from each offset, its elements (`pattern`: D-HAZ-ELEMENTS) or, with
    none, its `size` bytes."""

    pattern: ElementPattern | None
    size: int
    c: int
    terms: tuple[tuple[int, int, int], ...]
    """Per variable: its coefficient and its box's bounds (both inclusive)."""

    @cached_property
    def bytes(self) -> isl.Set:
        return box_bytes(self.pattern, self.size, self.c, self.terms)


PATTERNS = 4096
"""Element patterns (`element_pattern`) the pass keeps: the engine parts of
one nest are clones, of one pattern per access."""

MAX_PLACED = 16
"""Accesses a hull keeps for `meets` at most; a hull joining more compares
by its bytes' interval alone (the sets' cost stays that of a few accesses)."""


@dataclass(frozen=True)
class Hull:
    """The bytes an access may touch: `[lo, hi)` plus the `Outer` terms (the
    enclosing loops' variables, equal for two statements of one block in one
    iteration), and `[every_lo, every_hi)` over every value of them; and
    `placed`, the accesses it joins (None: one it cannot place, or more than
    MAX_PLACED), whose bytes within `[lo, hi)` are what two hulls that meet
    are compared on."""

    lo: int
    hi: int
    every_lo: int
    every_hi: int
    placed: tuple[Placed, ...] | None = None

    def join(self, other: Hull) -> Hull:
        placed = None
        if self.placed is not None and other.placed is not None:
            placed = tuple(dict.fromkeys(self.placed + other.placed))
            placed = placed if len(placed) <= MAX_PLACED else None
        return Hull(
            min(self.lo, other.lo),
            max(self.hi, other.hi),
            min(self.every_lo, other.every_lo),
            max(self.every_hi, other.every_hi),
            placed,
        )

    def meets(self, other: Hull) -> bool:
        """Whether the two may touch a byte in one iteration of the loops
        around them: their intervals meet and, where both place their
        accesses, a byte of one is a byte of the other (isl, exact: the
        channel slices of an NHWC output interleave their intervals but
        not their elements, and the engine parts of a convolution split
        along its output channels, in tile loops, ran one after another,
        Inception v2's n482 at 4.9x its bound, session 57)."""
        if not (self.lo < other.hi and other.lo < self.hi):
            return False
        if self.placed is None or other.placed is None:
            return True
        return any(
            not a.bytes.intersect(b.bytes).is_empty() for b in other.placed for a in self.placed
        )


Hulls = dict[SSAValue, dict[Outer, Hull]]
"""Per buffer, its hulls by `Outer` terms."""


@dataclass
class Footprint:
    """What one statement may touch over all its iterations, in one
    iteration of the loops around it."""

    reads: Hulls = field(default_factory=dict)
    writes: Hulls = field(default_factory=dict)
    engines: frozenset[int] = frozenset()
    movable: bool = True
    """Every access bounded, no ordering of its own (wait, deps), every L1
    level indexed: a statement the pass may move."""
    names: frozenset[str] = frozenset()
    """The names its statements declare (tokens, lets, regions, loop variables)."""

    def touch(self, buf: SSAValue, outer: Outer, hull: Hull, write: bool) -> None:
        table = (self.writes if write else self.reads).setdefault(buf, {})
        old = table.get(outer)
        table[outer] = hull if old is None else old.join(hull)

    def conflicts(self, other: Footprint) -> bool:
        """Whether a write of one may touch a byte the other reads or writes."""
        if not (self.movable and other.movable):
            return True
        return _meets(self.writes, other.reads, other.writes) or _meets(
            other.writes, self.reads, self.writes
        )

    def union(self, other: Footprint) -> Footprint:
        out = Footprint(
            {b: dict(t) for b, t in self.reads.items()},
            {b: dict(t) for b, t in self.writes.items()},
            self.engines | other.engines,
            self.movable and other.movable,
            self.names | other.names,
        )
        for table, write in ((other.reads, False), (other.writes, True)):
            for buf, hulls in table.items():
                for outer, hull in hulls.items():
                    out.touch(buf, outer, hull, write)
        return out


def _meets(writes: Hulls, *others: Hulls) -> bool:
    """Whether a hull of `writes` meets one of `others` on the same buffer:
    by their bounds in one iteration of the enclosing loops when both move
    with them alike, else over every iteration."""
    for buf, mine in writes.items():
        for table in others:
            for k2, h2 in table.get(buf, {}).items():
                for k1, h1 in mine.items():
                    if k1 is not None and k1 == k2:
                        if h1.meets(h2):
                            return True
                    elif h1.every_lo < h2.every_hi and h2.every_lo < h1.every_hi:
                        return True
    return False


class Footprints:
    """Each statement's `Footprint`, computed once."""

    def __init__(self) -> None:
        self.ev = Evaluator()
        self.known: dict[Operation, Footprint] = {}
        self.patterns: BoundedCache[tuple[object, ...], ElementPattern | None] = BoundedCache(
            PATTERNS
        )

    def of(self, op: Operation) -> Footprint:
        fp = self.known.get(op)
        if fp is None:
            fp = self.known[op] = self._compute(op)
        return fp

    def merged(self, into: LoopOp, a: Footprint, b: Footprint, moved: LoopOp) -> None:
        """`into` now also runs `moved`'s body (its variable replaced): the
        footprints of the statements in that body name the old variable."""
        for op in walk_ops(moved):
            self.known.pop(op, None)
        self.known[into] = a.union(b)

    def _compute(self, op: Operation) -> Footprint:
        # an evaluator of its own: the memos of one made before a jam hold the
        # jammed loop's old variable where its new one is now used
        ev = Evaluator()
        fp = Footprint()
        engines: set[int] = set()
        names: set[str] = set()
        around = {lp.block.args[0] for lp in enclosing_loops(op)}
        # a loop's own variable is not counted: a jam replaces it
        for o in walk_ops(op)[1:] if isinstance(op, LoopOp) else walk_ops(op):
            names.update(names_of(o))
            if isinstance(o, WaitOp):
                fp.movable = False
            if not isinstance(o, TaskOp):
                continue
            reads, writes, deps = task_operands(o)
            if deps:
                fp.movable = False
            engines.update(
                d.engine.data for d in o.decorator_list() if isinstance(d, SeqEngineAttr)
            )
            box = IterationSpace(ev, enclosing_loops(o)).box()
            for values, write in ((reads, False), (writes, True)):
                for v in values:
                    if not self._access(ev, fp, v, write, box, around, engines):
                        fp.movable = False
        fp.engines, fp.names = frozenset(engines), frozenset(names)
        return fp

    def _access(
        self,
        ev: Evaluator,
        fp: Footprint,
        v: SSAValue,
        write: bool,
        box: dict[BlockArgument, tuple[int, int]] | None,
        around: set[BlockArgument],
        engines: set[int],
    ) -> bool:
        """Adds region `v`'s hull; False when it cannot be bounded."""
        rop, rtype = v.owner, v.type
        if not isinstance(rop, RegionOp) or not isinstance(rtype, RegionType) or box is None:
            return False
        level = rtype.level
        if level.kind == "L1":
            if level.engine is None:
                return False  # engine decided by the device (D-DEV-L1): not ours to guess
            engines.add(level.engine)
        buf, off, ext = region_parts(rop)
        try:
            fo, fe = forms(ev, [off, ext], box)
        except ExprError:
            return False
        if fo is None or fe is None or fo.interval is None or fe.interval is None:
            return False
        size = max(fe.interval[1], 0)
        every = (fo.interval[0], fo.interval[1] + size)
        if fo.affine is None:
            fp.touch(buf, None, Hull(*every, *every), write)
            return True
        c, coeffs = fo.affine
        outer = frozenset((x, a) for x, a in coeffs.items() if x in around)
        inner = {x: a for x, a in coeffs.items() if x not in around}
        lo, hi = affine_interval((c, inner), box)
        pattern = element_pattern(rop, ev, self.patterns)
        terms = tuple((a, *box[x]) for x, a in inner.items())
        placed = Placed(pattern, size, c, terms) if fe.affine == (size, {}) else None
        fp.touch(
            buf, outer, Hull(lo, hi + size, *every, None if placed is None else (placed,)), write
        )
        return True


def _parts_of(jammed: tuple[str, ...], part: tuple[str, ...]) -> bool:
    """Whether a loop of shape `jammed` is one or more parts of shape
    `part` jammed (its body their bodies one after another)."""
    body, one = jammed[1:], part[1:]
    k = len(body) // len(one) if one else 0
    return jammed[:1] == part[:1] and k > 0 and body == one * k


def _shape(loop: LoopOp) -> tuple[str, ...]:
    """The op names of a loop's tasks and loops, nested ones included, in
    order: equal for the engine parts of one nest (clones whose offsets,
    their index arithmetic, differ)."""
    return tuple(o.name for o in walk_ops(loop) if isinstance(o, TaskOp | LoopOp))


def _owner(v: SSAValue) -> Operation | None:
    """The statement of the program's block a value comes from: its defining
    op, or the loop whose variable it is."""
    owner = v.owner
    if isinstance(owner, Block):
        return owner.parent_op()
    return owner


def _bounds(ev: Evaluator, loop: LoopOp) -> tuple[int, int] | None:
    """The loop's constant bounds (None: not constant, or no iteration)."""
    box = IterationSpace(ev, [loop]).box()
    return None if box is None else box[loop.block.args[0]]


class JamEngineLoops(RewritePattern):
    """Loop B <- the previous loop A of its block, when the module doc's
    conditions hold.  When one of the two runs longer (same first value, a
    later last one), its iterations past the other's last go to a copy of
    it placed after B (the tail), and the rest is jammed."""

    def __init__(self, footprints: Footprints, names: Names):
        self.fps, self.names = footprints, names

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LoopOp, rewriter: PatternRewriter) -> None:
        if self._hoist(op, rewriter):
            return
        between: list[Operation] = []
        taken = {op.iv_name.data}  # what A's body, moved under B, must not declare
        prev = op.prev_op
        while prev is not None and not isinstance(prev, LoopOp):
            if isinstance(prev, TaskOp | WaitOp):
                between.append(prev)
            taken.update(names_of(prev))
            prev = prev.prev_op
        if prev is None:
            return
        ev = self.fps.ev
        ra, rb = _bounds(ev, prev), _bounds(ev, op)
        if ra is None or rb is None:
            return
        if self._pairs_inside(prev, op, rb, taken, between):
            op = self._wrap(op, ra[0], prev, rewriter)
            rb = (ra[0], ra[0])
        if ra[0] != rb[0]:
            return
        # a tail re-declares the buffers its body declares (twice the memory)
        longer = prev if ra[1] > rb[1] else op if rb[1] > ra[1] else None
        if longer is not None and any(isinstance(o, BufferOp) for o in walk_ops(longer)):
            return
        if self.fps.of(prev).names & taken or not self._jammable(prev, op, between):
            return
        a, b = self.fps.of(prev), self.fps.of(op)
        self.fps.merged(op, a, b, prev)
        if longer is not None:
            self._split_tail(longer, min(ra[1], rb[1]), prev, op, rewriter)
        rewriter.inline_block(prev.block, InsertPoint.at_start(op.block), [op.block.args[0]])
        rewriter.erase(prev)

    def _hoist(self, b: LoopOp, rewriter: PatternRewriter) -> bool:
        """Jam `b` into an earlier loop A of its shape that is not the loop
        right before it, B's body moved up to the end of A's: where each
        engine part of a nest is two loops (a tile loop and its peeled last
        tile), the rule above paired each part's second loop with the next
        part's first, and the engines ran one after another, each pair
        waiting on the one before (SqueezeNet's global average pooling,
        session 55).  A is the earliest loop back to the first statement on
        one of B's engines with B's bounds, decorators and statements (a
        clone of B, as a nest's engine parts are, D-COMPILE-ENGINES), other
        engines, no name in common with B, and B conflicting with none of
        A and the statements between and using no value defined from A on."""
        ev = self.fps.ev
        rb, fb = _bounds(ev, b), self.fps.of(b)
        if rb is None or not fb.engines or not fb.movable:
            return False
        shape = _shape(b)
        between: list[Operation] = []
        names: set[str] = set()
        best: LoopOp | None = None
        prev, loops = b.prev_op, 0
        while prev is not None and not (self._engines(prev) & fb.engines):
            if isinstance(prev, LoopOp):
                loops += 1
                if (
                    loops > 1
                    and _bounds(ev, prev) == rb
                    and prev.decorator_list() == b.decorator_list()
                    and _parts_of(_shape(prev), shape)
                    and self._hoistable(prev, b, between, names)
                ):
                    best = prev
            between.append(prev)
            names.update(n for o in walk_ops(prev) for n in names_of(o))
            prev = prev.prev_op
        if best is None:
            return False
        self.fps.merged(best, self.fps.of(best), fb, b)
        rewriter.inline_block(b.block, InsertPoint.at_end(best.block), [best.block.args[0]])
        rewriter.erase(b)
        return True

    def _hoistable(self, a: LoopOp, b: LoopOp, between: list[Operation], names: set[str]) -> bool:
        """Whether `b`'s body may run at the end of each iteration of `a`,
        before the statements `between` them (which declare `names`)."""
        fa, fb = self.fps.of(a), self.fps.of(b)
        if not fa.engines or fa.engines & fb.engines:
            return False
        # B's body moves under A, whose variable then stands for B's (NAME-02)
        if fb.names & (fa.names | names | {a.iv_name.data}):
            return False
        if not fa.movable or any(fb.conflicts(self.fps.of(s)) for s in [a, *between]):
            return False
        later = {a, *between}  # (statements of the block, A's start on)
        # B's own bounds are A's (it goes, its body stays): only its body's uses count
        return not any(_owner(v) in later for o in walk_ops(b)[1:] for v in o.operands)

    def _engines(self, op: Operation) -> frozenset[int]:
        """The engines `op` uses: its footprint's when computed, else read off
        its tasks' L1 regions and engine decorators alone (`_hoist` looks back
        over statements it may not move: their hulls, which `forms` bounds,
        made the pass 60% slower on ResNet-50 for nothing, session 55)."""
        known = self.fps.known.get(op)
        if known is not None:
            return known.engines
        engines: set[int] = set()
        for o in walk_ops(op):
            if isinstance(o, TaskOp):
                engines.update(
                    d.engine.data for d in o.decorator_list() if isinstance(d, SeqEngineAttr)
                )
                for v in o.operands:
                    t = v.type
                    if (
                        isinstance(t, RegionType)
                        and t.level.kind == "L1"
                        and t.level.engine is not None
                    ):
                        engines.add(t.level.engine)
        return frozenset(engines)

    def _split_tail(
        self, longer: LoopOp, last: int, a: LoopOp, b: LoopOp, rewriter: PatternRewriter
    ) -> None:
        """`longer` runs to `last`; its later iterations go to a copy after `b`."""
        tail = longer.clone()
        name = self.names.fresh(longer.iv_name.data)
        tail.properties["iv_name"] = StringAttr(name)
        tail.block.args[0].name_hint = ssa_name_hint(name)
        rewriter.insert(tail, InsertPoint.after(self._parts_after(b, longer)))
        first = index_constant(last + 1)
        rewriter.insert(first, InsertPoint.before(tail))
        tail.operands = (first.result, tail.upper)
        end = index_constant(last)
        rewriter.insert(end, InsertPoint.before(a))  # before both loops
        longer.operands = (longer.lower, end.result)

    def _parts_after(self, b: LoopOp, longer: LoopOp) -> Operation:
        """Where `longer`'s tail goes: after `b`, or after the loops right
        after it that may jam with it next (the same first value and
        decorators: the other engine parts of the nest) and that touch
        nothing the tail writes or write what it reads.  A tail left between
        two parts would keep the later one from jamming (parts of lengths
        2, 2, 3, 3: the third part's tail stood before the fourth part)."""
        first = _bounds(self.fps.ev, b)
        fp = self.fps.of(longer)
        at: Operation = b
        nxt = b.next_op
        while (
            isinstance(nxt, LoopOp)
            and first is not None
            and (bounds := _bounds(self.fps.ev, nxt)) is not None
            and bounds[0] == first[0]
            and nxt.decorator_list() == b.decorator_list()
            and not fp.conflicts(self.fps.of(nxt))
        ):
            at, nxt = nxt, nxt.next_op
        return at

    def _pairs_inside(
        self,
        a_loop: LoopOp,
        b_loop: LoopOp,
        rb: tuple[int, int],
        taken: set[str],
        between: Iterable[Operation],
    ) -> bool:
        """Whether `b_loop` is an engine part with one outer iteration where
        `a_loop`'s parts have several: `a_loop` (decorators other than
        `b_loop`'s, more than one iteration) holds a loop with `b_loop`'s
        decorators and bounds, and `b_loop` could jam into `a_loop`'s first
        iteration (the module doc's conditions, decorators aside)."""
        ev = self.fps.ev
        ra = _bounds(ev, a_loop)
        if ra is None or ra[1] == ra[0] or a_loop.decorator_list() == b_loop.decorator_list():
            return False
        decos = b_loop.decorator_list()
        if not any(
            isinstance(o, LoopOp) and o.decorator_list() == decos and _bounds(ev, o) == rb
            for o in a_loop.block.ops
        ):
            return False
        if any(isinstance(o, BufferOp) for o in walk_ops(a_loop)):
            return False  # its tail would declare them again
        return not self.fps.of(a_loop).names & taken and self._jammable(
            a_loop, b_loop, between, same_decorators=False
        )

    def _wrap(self, loop: LoopOp, first: int, like: LoopOp, rewriter: PatternRewriter) -> LoopOp:
        """`loop` inside a loop of one iteration, `first`, with `like`'s
        decorators (the one outer iteration the other parts' loops have
        several of), so that it jams with `like`'s first iteration and its
        inner loop with `like`'s."""
        at = index_constant(first)
        body = Block(arg_types=[IndexType()])
        body.add_op(loop.clone())
        name = self.names.fresh(like.iv_name.data)
        wrap = LoopOp(name, at.result, at.result, body, list(like.decorator_list()))
        rewriter.replace_op(loop, [at, wrap], new_results=[])
        return wrap

    def _jammable(
        self,
        a_loop: LoopOp,
        b_loop: LoopOp,
        between: Iterable[Operation],
        same_decorators: bool = True,
    ) -> bool:
        if same_decorators and a_loop.decorator_list() != b_loop.decorator_list():
            return False
        a, b = self.fps.of(a_loop), self.fps.of(b_loop)
        if not (a.engines and b.engines) or a.engines & b.engines or a.names & b.names:
            return False
        return not any(a.conflicts(self.fps.of(s)) for s in (*between, b_loop))


class LonePartsFirst(RewritePattern):
    """The statements right after a loop that run on other engines than
    its own and conflict with nothing it touches (an engine part of one
    tile after the jammed loop of the others: a nest's last part, shorter)
    move before the loop.  The program is one stream: the statement after a
    loop is issued once every iteration's stream has reached its end
    (D-RT-STREAM), which a loop body's last `wait` (its stores, D-LOW-DEPS)
    holds until they are done; so the lone part started when the other
    engines' parts had finished.  DenseNet-121's elementwise chains before
    its 1x1 convolutions (BatchNorm, Mul, Add, Relu of the concatenation)
    split 14 rows 4, 4, 4, 2: engine 3's 2 rows, one tile, ran after
    engines 0-2's loop, about 2,000 cycles, and the next convolution's
    weights on engine 3 after them (session 58).  Moved before the loop,
    the part is issued first and runs beside it.  The statements taken,
    in order, up to the first other one: tasks the pass may move
    (`Footprint.movable`) on engines (their L1 regions) the loop does not
    use, declaring no name the loop declares and conflicting with nothing
    it touches (`Footprint.conflicts`: no conflicting access pair changes
    order, the results are the same), and the regions (`let`) and index
    constants among them (definitions, which may come earlier)."""

    def __init__(self, footprints: Footprints):
        self.fps = footprints

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LoopOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.parent_op(), ProgramOp):
            return
        fl = self.fps.of(op)
        if not fl.engines or not fl.movable:
            return
        run: list[Operation] = []
        nxt = op.next_op
        while isinstance(nxt, TaskOp | RegionOp | arith.ConstantOp):
            if isinstance(nxt, TaskOp):
                fs = self.fps.of(nxt)
                if not fs.engines or fs.engines & fl.engines or fs.names & fl.names:
                    break
                if fs.conflicts(fl):
                    break
            run.append(nxt)
            nxt = nxt.next_op
        while run and not isinstance(run[-1], TaskOp):
            run.pop()  # regions no moved task uses stay
        for s in run:
            s.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
            rewriter.insert(s, InsertPoint.before(op))


@dataclass(frozen=True)
class JamEngineLoopsPass(ModulePass):
    """Jam sibling loops that run on different engines into one loop (D-NEM-JAM-ENGINES).

    Run before nem-synthesize-deps: loops that hold waits or deps are left alone.
    """

    name = "nem-jam-engine-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for prog in list(programs(op)):
            assert isinstance(prog, ProgramOp)
            fps = Footprints()
            walker = PatternRewriteWalker(JamEngineLoops(fps, Names(prog)))
            walker.rewrite_region(prog.body)
            PatternRewriteWalker(LonePartsFirst(fps), apply_recursively=False).rewrite_region(
                prog.body
            )
