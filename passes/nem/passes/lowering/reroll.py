"""`nem-reroll-pipelines` (D-LOW-PIPE): software-pipelined loops rolled back
into one `affine.for` that lets two iterations run at once.

`-affine-pipeline-data-transfer` leaves a loop that starts its DMAs and waits
for them as three pieces: the DMA starts of the first iteration before the
loop (the prologue), a loop whose body starts the DMAs of the next iteration
(stage 0, into the other half of `2 x ...` buffers) and then does the rest of
the current one, and that rest once more after the loop (the epilogue);
`pipelining.detect_pipeline` recognizes them.  NEM says the same with one
loop under `@max_in_flight(2)`, so the pattern rolls the pieces back into
one `affine.for` over the original iterations, one more than upstream's loop:

    affine.for %i = LB - STEP to UB step STEP {     // LB, UB: upstream's loop
      <stage 0, for iteration %i>
      %next = affine.apply (d0 + STEP)(%i)
      <the rest, with %next for upstream's loop variable>
    } {nem.max_in_flight = 2 : i64}

and erases the prologue and the epilogue (the index arithmetic around the
epilogue stays, now unused).  When the epilogue is not the rest at the last
iteration op for op (`pipelining.epilogue_is_body`: a clean-up after
upstream, e.g. -canonicalize folding its min bounds to constants), the loop
stops one iteration short and the last iteration stays as upstream wrote it,
in an `scf.execute_region {nem.last_iteration}` right after the loop: stage 0
(cloned, at that iteration) then the epilogue; the conversion lowers it as
the loop's peeled last iteration (D-LOW-PEEL).  `convert-affine-to-nem`
lowers a loop carrying `nem.max_in_flight` to a NEM loop under that window,
its buffers allocated in the body in two slots; whether two iterations may
really overlap is `nem-synthesize-deps{narrow-windows=true}`'s call.

The pattern decides on the IR alone: values defined outside the loop are
unknowns (`Unknowns`).  A loop whose bounds are not single expressions a
constant apart (upstream pipelines only loops of constant trip count) is left
as upstream wrote it, and the conversion's DMA tag table then rejects its
waits; so is one whose epilogue's results are used after it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, scf
from xdsl.dialects.builtin import AffineMapAttr, IndexType, IntegerAttr, ModuleOp, UnitAttr, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from nem.analysis.ir_walk import walk_ops
from nem.dialect.per_class import subclass_table
from nem.frontends.upstream_dialects.dma import AffineDmaStartOp
from nem.passes.lowering.affine_algebra import Aff, Var, eval_map, resolve_index
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.pipelining import PipelinedLoop, detect_pipeline, epilogue_is_body
from nem.passes.lowering.prepare import entry_function, rewrite_once

MAX_IN_FLIGHT = "nem.max_in_flight"
"""The attribute of an `affine.for` whose iterations may overlap, two at a time."""
LAST_ITERATION = "nem.last_iteration"
"""The attribute of the `scf.execute_region` right after a re-rolled loop that
holds the loop's last iteration (when the epilogue is not the body)."""


def is_rerolled(loop: affine.ForOp) -> bool:
    """Whether `loop` carries `nem.max_in_flight`, as `nem-reroll-pipelines`
    leaves it; a located error when its value is not `2 : i64` (the
    conversion gives the buffers of such a loop's body two slots)."""
    window = loop.attributes.get(MAX_IN_FLIGHT)
    if window is None:
        return False
    if window != IntegerAttr(2, i64):
        raise reject(
            loop,
            f"{MAX_IN_FLIGHT} = {window}: the conversion gives the buffers of a loop "
            "under a window two slots, so the window must be 2",
            f"write {MAX_IN_FLIGHT} = 2 : i64, or leave the window to nem-reroll-pipelines",
        )
    return True


class Unknowns(Mapping[SSAValue, Aff]):
    """The index values defined outside a loop, each an unknown of its own
    (index constants and `affine.apply`s are not: `resolve_index` evaluates
    them).  The unknowns range over all of `[0, 2**62)`, so no `mod` or
    `floordiv` of them folds."""

    def __init__(self) -> None:
        self.atoms: dict[SSAValue, Aff] = {}

    def __contains__(self, v: object) -> bool:
        if not isinstance(v, SSAValue):
            return False
        owner = v.owner
        return not isinstance(owner, affine.ApplyOp) and not (
            isinstance(owner, arith.ConstantOp) and isinstance(v.type, IndexType)
        )

    def __getitem__(self, v: SSAValue) -> Aff:
        if v not in self:
            raise KeyError(v)
        if v not in self.atoms:
            self.atoms[v] = Aff.atom(Var(None, v.name_hint or "outer", 1 << 62))
        return self.atoms[v]

    def __iter__(self) -> Iterator[SSAValue]:
        return iter(self.atoms)

    def __len__(self) -> int:
        return len(self.atoms)


def first_and_trip(loop: affine.ForOp, outer: Unknowns) -> tuple[Aff, int] | None:
    """The first value of `loop`'s variable and its trip count, when its
    bounds are single affine expressions a constant apart; else None."""
    bounds: list[Aff] = []
    for m, operands in (
        (loop.lowerBoundMap.data, loop.lowerBoundOperands),
        (loop.upperBoundMap.data, loop.upperBoundOperands),
    ):
        values = [resolve_index(v, outer) for v in operands]
        if len(m.results) != 1 or any(v is None for v in values):
            return None
        try:
            bounds += eval_map(m, [v for v in values if v is not None])
        except ValueError:  # mod or floordiv by a non-positive constant
            return None
    step = loop.step.value.data
    diff = bounds[1] - bounds[0]
    if step <= 0 or not diff.is_const():
        return None
    return bounds[0], max(0, -(-diff.const // step))


def shifted(m: AffineMap, by: int) -> AffineMapAttr:
    """`m` with `by` added to each result."""
    return AffineMapAttr(
        AffineMap(m.num_dims, m.num_symbols, tuple(r + AffineExpr.constant(by) for r in m.results))
    )


class RerollPipelinedLoop(RewritePattern):
    """One software-pipelined loop with its prologue and epilogue -> one
    `affine.for` carrying `nem.max_in_flight = 2` (the module docstring)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.ForOp, rewriter: PatternRewriter) -> None:
        if MAX_IN_FLIGHT in op.attributes:
            return
        pl = detect_pipeline(op)
        if pl is None:
            return
        outer = Unknowns()
        found = first_and_trip(op, outer)
        if found is None:
            return
        lb, trip = found
        step = op.step.value.data
        iv = op.body.block.args[0]
        stage0 = set(pl.stage0)
        rest = [
            o for o in op.body.block.ops if o not in stage0 and not isinstance(o, affine.YieldOp)
        ]
        as_body = epilogue_is_body(rest, pl.epilogue, iv, lb + Aff.c(trip * step), outer)
        if as_body and not _used_only_inside(pl.epilogue):
            return
        if not as_body and not _peel_last_iteration(op, pl, trip, rewriter):
            return
        for o in reversed((*pl.prologue, *(pl.epilogue if as_body else ()))):
            rewriter.erase(o)
        # upstream's loop ran one iteration fewer, starting one step later
        op.properties["lowerBoundMap"] = shifted(op.lowerBoundMap.data, -step)
        if not as_body:
            op.properties["upperBoundMap"] = shifted(op.upperBoundMap.data, -step)
        op.attributes[MAX_IN_FLIGHT] = IntegerAttr(2, i64)
        rewriter.notify_op_modified(op)
        if any(u.operation not in stage0 for u in iv.uses):
            nxt = affine.ApplyOp(
                [iv], AffineMapAttr(AffineMap(1, 0, (AffineExpr.dimension(0) + step,)))
            )
            nxt.result.name_hint = "next"
            rewriter.insert(nxt, InsertPoint.after(pl.stage0[-1]))
            rewriter.replace_uses_with_if(
                iv, nxt.result, lambda u: u.operation not in stage0 and u.operation is not nxt
            )


def _used_only_inside(ops: Sequence[Operation]) -> bool:
    """Whether the results of `ops` (and of the ops nested in them) are used
    only within them, so that they can be erased."""
    return all(
        any(e.is_ancestor(u.operation) for e in ops)
        for e in ops
        for o in e.walk()
        for r in o.results
        for u in r.uses
    )


def _peel_last_iteration(
    op: affine.ForOp, pl: PipelinedLoop, trip: int, rewriter: PatternRewriter
) -> bool:
    """The last iteration after the loop, as one `scf.execute_region`
    carrying `nem.last_iteration` (the conversion lowers it as the loop's
    peeled iteration, D-LOW-PEEL): `%last = LB + (trip - 1) * STEP`, stage 0
    on it, then the ops from the loop to the end of the epilogue (which is
    that iteration's rest).  False (nothing changed) when a value those ops
    define is used after them."""
    parent = op.parent_block()
    assert parent is not None
    tail: list[Operation] = []
    o = op.next_op
    while o is not None and (not tail or tail[-1] is not pl.epilogue[-1]):
        tail.append(o)
        o = o.next_op
    if not _used_only_inside(tail):
        return False
    step = op.step.value.data
    last = affine.ApplyOp(
        list(op.lowerBoundOperands), shifted(op.lowerBoundMap.data, (trip - 1) * step)
    )
    last.result.name_hint = "last"
    iv = op.body.block.args[0]
    body = Block([last])
    for s in pl.stage0:
        clone = s.clone()
        for k, v in enumerate(clone.operands):
            if v is iv:
                clone.operands[k] = last.result
        body.add_op(clone)
    for t in tail:
        t.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
        body.add_op(t)
    body.add_op(scf.YieldOp())
    wrapper = scf.ExecuteRegionOp([], Region(body))
    wrapper.attributes[LAST_ITERATION] = UnitAttr()  # __init__ drops attr_dict: upstream-reports 17
    rewriter.insert(wrapper, InsertPoint.after(op))
    return True


def last_iteration(loop: affine.ForOp) -> scf.ExecuteRegionOp | None:
    """The peeled last iteration `nem-reroll-pipelines` put right after
    `loop`, if any."""
    nxt = loop.next_op
    if isinstance(nxt, scf.ExecuteRegionOp) and LAST_ITERATION in nxt.attributes:
        return nxt
    return None


def is_last_iteration(op: Operation) -> bool:
    """Whether `op` is the last iteration of the re-rolled loop right before
    it, which that loop's lowering lowers (D-LOW-PIPE)."""
    prev = op.prev_op
    return isinstance(prev, affine.ForOp) and last_iteration(prev) is op


@dataclass(frozen=True)
class RerollPipelinesPass(ModulePass):
    """Roll the software-pipelined loops of `-affine-pipeline-data-transfer`
    back into loops under `nem.max_in_flight = 2` (D-LOW-PIPE).

    A function without an `affine.dma_start` (what the compile routes give)
    is not given to the rewriter: its worklist costs more than the one walk
    that finds none (issue 30).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-reroll-pipelines"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = entry_function(op, self.entry)
        is_start = subclass_table(AffineDmaStartOp)
        if any(is_start[type(o)] for o in walk_ops(fn)):
            rewrite_once(fn.body, RerollPipelinedLoop())
