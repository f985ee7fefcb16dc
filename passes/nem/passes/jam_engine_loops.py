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
affine offsets, no enumeration).  A hull it cannot bound counts as the
whole buffer.  Further, A and B:

* have constant bounds with the same first value (when one runs longer, its
  later iterations stay a loop of their own, after the jammed one) and the
  same decorators (`@max_in_flight`: jamming a loop of one window into one of
  another measured slower on ResNet-50 than leaving them apart);
* use L1 of disjoint, non-empty sets of engines (the point of jamming; two
  loops of one engine are left as they are);
* hold no ordering of their own (no `wait`, no `deps`): the pass runs
  before `nem-synthesize-deps`, which then orders the jammed program's
  conflicting accesses as it would any program's (D-LOW-DEPS);
* declare no name in common (NAME-02 is per scope).

Cost: each loop looks back once to the previous loop of its block, over the
statements between; a statement's footprint is computed once (a jammed
loop's is the union of its parts').
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from nem.analysis.happens_before import enclosing_loops, region_parts, task_operands
from nem.analysis.ir_walk import walk_ops
from nem.dialect.attributes import RegionType, SeqEngineAttr
from nem.dialect.builder_attrs import index_constant
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.iteration_space import IterationSpace, forms
from nem.dialect.ops import (
    LoopOp,
    ProgramOp,
    RegionOp,
    TaskOp,
    WaitOp,
    programs,
    ssa_name_hint,
)
from nem.passes.split_transfers import Names

Hull = tuple[int, int]
"""Bytes [lo, hi) of one buffer."""


@dataclass
class Footprint:
    """What one statement may touch over all its iterations."""

    reads: dict[SSAValue, Hull] = field(default_factory=dict)
    writes: dict[SSAValue, Hull] = field(default_factory=dict)
    engines: frozenset[int] = frozenset()
    movable: bool = True
    """Every access bounded, no ordering of its own (wait, deps), every L1
    level indexed: a statement the pass may move."""
    names: frozenset[str] = frozenset()
    """The names its statements declare (tokens, lets, regions, loop variables)."""

    def touch(self, buf: SSAValue, hull: Hull, write: bool) -> None:
        table = self.writes if write else self.reads
        old = table.get(buf)
        table[buf] = hull if old is None else (min(old[0], hull[0]), max(old[1], hull[1]))

    def conflicts(self, other: Footprint) -> bool:
        """Whether a write of one may touch a byte the other reads or writes."""
        if not (self.movable and other.movable):
            return True
        return _meets(self.writes, other.reads, other.writes) or _meets(
            other.writes, self.reads, self.writes
        )

    def union(self, other: Footprint) -> Footprint:
        out = Footprint(
            dict(self.reads),
            dict(self.writes),
            self.engines | other.engines,
            self.movable and other.movable,
            self.names | other.names,
        )
        for table, write in ((other.reads, False), (other.writes, True)):
            for buf, hull in table.items():
                out.touch(buf, hull, write)
        return out


def _meets(writes: dict[SSAValue, Hull], *others: dict[SSAValue, Hull]) -> bool:
    for buf, (lo, hi) in writes.items():
        for table in others:
            h = table.get(buf)
            if h is not None and lo < h[1] and h[0] < hi:
                return True
    return False


_NAME_PROPS = ("name", "iv_name", "token")
"""The properties that declare a name (as `forward_fills.declared_names` reads them)."""


class Footprints:
    """Each statement's `Footprint`, computed once."""

    def __init__(self) -> None:
        self.ev = Evaluator()
        self.known: dict[Operation, Footprint] = {}

    def of(self, op: Operation) -> Footprint:
        fp = self.known.get(op)
        if fp is None:
            fp = self.known[op] = self._compute(op)
        return fp

    def merged(self, into: LoopOp, a: Footprint, b: Footprint) -> None:
        self.known[into] = a.union(b)

    def _compute(self, op: Operation) -> Footprint:
        fp = Footprint()
        engines: set[int] = set()
        names: set[str] = set()
        # a loop's own variable is not counted: a jam replaces it
        for o in walk_ops(op)[1:] if isinstance(op, LoopOp) else walk_ops(op):
            for key in _NAME_PROPS:
                attr = o.properties.get(key)
                if isinstance(attr, StringAttr):
                    names.add(attr.data)
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
            box = IterationSpace(self.ev, enclosing_loops(o)).box()
            for values, write in ((reads, False), (writes, True)):
                for v in values:
                    if not self._access(fp, v, write, box, engines):
                        fp.movable = False
        fp.engines, fp.names = frozenset(engines), frozenset(names)
        return fp

    def _access(self, fp: Footprint, v: SSAValue, write: bool, box, engines: set[int]) -> bool:
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
            fo, fe = forms(self.ev, [off, ext], box)
        except ExprError:
            return False
        if fo is None or fe is None or fo.interval is None or fe.interval is None:
            return False
        fp.touch(buf, (fo.interval[0], fo.interval[1] + max(fe.interval[1], 0)), write)
        return True


def _bounds(ev: Evaluator, loop: LoopOp) -> tuple[int, int] | None:
    try:
        lo, hi = ev.static(loop.lower), ev.static(loop.upper)
    except ExprError:
        return None
    return None if lo is None or hi is None else (lo, hi)


class JamEngineLoops(RewritePattern):
    """Loop B <- the previous loop A of its block, when the module doc's
    conditions hold.  When one of the two runs longer (same first value, a
    later last one), its iterations past the other's last go to a copy of
    it placed after B (the tail), and the rest is jammed."""

    def __init__(self, footprints: Footprints, names: Names):
        self.fps, self.names = footprints, names

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: LoopOp, rewriter: PatternRewriter) -> None:
        between: list[Operation] = []
        prev = op.prev_op
        while prev is not None and not isinstance(prev, LoopOp):
            if isinstance(prev, TaskOp | WaitOp):
                between.append(prev)
            prev = prev.prev_op
        if prev is None:
            return
        ev = self.fps.ev
        ra, rb = _bounds(ev, prev), _bounds(ev, op)
        if ra is None or rb is None or ra[0] != rb[0] or not self._jammable(prev, op, between):
            return
        a, b = self.fps.of(prev), self.fps.of(op)
        if ra[1] != rb[1]:
            self._split_tail(prev if ra[1] > rb[1] else op, min(ra[1], rb[1]), prev, op, rewriter)
        rewriter.inline_block(prev.block, InsertPoint.at_start(op.block), [op.block.args[0]])
        rewriter.erase_op(prev)
        self.fps.merged(op, a, b)

    def _split_tail(
        self, longer: LoopOp, last: int, a: LoopOp, b: LoopOp, rewriter: PatternRewriter
    ) -> None:
        """`longer` runs to `last`; its later iterations go to a copy after `b`."""
        tail = longer.clone()
        name = self.names.fresh(longer.iv_name.data)
        tail.properties["iv_name"] = StringAttr(name)
        tail.block.args[0].name_hint = ssa_name_hint(name)
        rewriter.insert(tail, InsertPoint.after(b))
        first = index_constant(last + 1)
        rewriter.insert(first, InsertPoint.before(tail))
        tail.operands = (first.result, tail.upper)
        end = index_constant(last)
        rewriter.insert(end, InsertPoint.before(a))  # before both loops
        longer.operands = (longer.lower, end.result)

    def _jammable(self, a_loop: LoopOp, b_loop: LoopOp, between: Iterable[Operation]) -> bool:
        if a_loop.decorator_list() != b_loop.decorator_list():
            return False
        a, b = self.fps.of(a_loop), self.fps.of(b_loop)
        if not (a.engines and b.engines) or a.engines & b.engines or a.names & b.names:
            return False
        return not any(a.conflicts(self.fps.of(s)) for s in (*between, b_loop))


@dataclass(frozen=True)
class JamEngineLoopsPass(ModulePass):
    """Jam sibling loops that run on different engines into one loop (D-NEM-JAM-ENGINES).

    Run before nem-synthesize-deps: loops that hold waits or deps are left alone.
    """

    name = "nem-jam-engine-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for prog in list(programs(op)):
            assert isinstance(prog, ProgramOp)
            walker = PatternRewriteWalker(JamEngineLoops(Footprints(), Names(prog)))
            walker.rewrite_region(prog.body)
