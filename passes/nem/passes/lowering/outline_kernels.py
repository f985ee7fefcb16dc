"""`nem-outline-kernels` (D-LOW-OUTLINE): the loop nests and linalg ops
that escape on every target (D-LOW-ESCAPE) become `nem_lowering.kernel` ops
before the conversion, which lowers each to its `compute op="mlir.kernel"`
task (`lower_kernel`) instead of deciding it itself.

Which ones: those `RaiseAnalysis` answers `Escape` for, at the top level of
the entry function or in a loop the conversion keeps as a NEM loop, decided
on the values the conversion decides them on (`OutlinedNests`: the loop
variables as `loops.lower_loop` binds them, index constants and
`affine.apply`; which buffer, element type and shape each memref is:
`MemrefRoots`).  The index values a kernel takes from outside are its
index operands.  One whose decision needs more is left to the conversion,
which decides it as before: one in a loop lowered other than once on those
values (peeled, re-rolled), one taking an index value the pass does not
evaluate or a value a scalar load outside it gives (the kernel loads it
itself), one whose decision reads a view's box (D-LOW-ALIAS's touches, a
fill), one with a memref of dynamic shape, and one the conversion rejects.
An escape found where a plan's tasks have no variant on the device stays
the conversion's too (`staging.illegal`).  So the output is the
conversion's, byte for byte (the differential test,
test_lowering_outline_kernels.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property
from itertools import count
from typing import NoReturn

from xdsl.context import Context
from xdsl.dialects import affine, arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.kernel_op import KernelOp, region_type
from nem.passes.lowering.access_bounds import check_access_bounds
from nem.passes.lowering.affine_algebra import Aff, Var, eval_map
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.escape import (
    LINALG_OPS,
    carried_out,
    emit_kernel,
    kernel_function,
    kernel_line,
    kernel_operands,
    location_text,
    log_accessed_boxes,
)
from nem.passes.lowering.loop_ranges import accessed_boxes
from nem.passes.lowering.loops import MapEvaluator, loop_bounds
from nem.passes.lowering.memref_roots import MemrefRoots
from nem.passes.lowering.peeled_loops import PeeledLoops
from nem.passes.lowering.prepare import entry_function
from nem.passes.lowering.raise_decision import Escape, RaiseAnalysis
from nem.passes.lowering.reroll import is_rerolled
from nem.passes.lowering.state import BlockState, Lowering
from nem.passes.lowering.structure import is_structural
from nem.passes.lowering.tile_loops import tile_loop


class _NeedsView(Exception):
    """The decision asked for a view's box: the conversion decides the nest."""


class _Unknown(Exception):
    """An index value the pass does not evaluate: the conversion decides."""


def _no_view(m: SSAValue, user: Operation) -> NoReturn:
    raise _NeedsView


_VAR = "\u2063v"
"""The prefix of the names of the pass's loop variables, which no text of
the conversion holds: a `why` that prints one would name the conversion's
NEM variable instead, so such a nest is left to it."""


@dataclass(frozen=True)
class Outlined:
    """What a nest's `nem_lowering.kernel` holds (`OutlinedNests`)."""

    what: str
    why: str
    after: tuple[Operation, ...]
    ins: list[SSAValue]
    outs: list[SSAValue]
    index_vals: list[SSAValue]
    consts: list[SSAValue]


def index_constants(ops: Sequence[Operation]) -> dict[SSAValue, Aff]:
    """The index constants among `ops`, as the conversion binds them
    (`index_ops.lower_constant`)."""
    env: dict[SSAValue, Aff] = {}
    for o in ops:
        if isinstance(o, arith.ConstantOp) and isinstance(o.result.type, IndexType):
            assert isinstance(o.value, IntegerAttr)
            env[o.result] = Aff.c(o.value.value.data)
    return env


class OutlinedNests:
    """Which loop nests of function `fn` escape on every target, each with
    its kernel (`outlined`), found in one walk that follows the conversion:
    the ops of the function's block, then the bodies of the loops it keeps
    as NEM loops (`is_structural`, `tile_loop`), each loop variable bound
    to `lb + v * step` as `loops.lower_loop` binds it (a `Var` over the
    loop's trip count), index constants and `affine.apply` as `index_ops`
    binds them.  A loop whose body the conversion lowers other than once
    per iteration on those values is not entered: one that may be peeled
    (`PeeledLoops`), a re-rolled pipeline (`nem.max_in_flight`), one that
    carries values; nor is any other region (`scf`, `affine.if`, `async`).
    A value the pass does not evaluate (other index arithmetic, a min/max)
    leaves the loops and nests that use it to the conversion."""

    def __init__(self, fn: func.FuncOp) -> None:
        self.fn = fn
        self.found: dict[Operation, Outlined] = {}
        self._order = count()
        self._block(fn.body.block, {})

    @cached_property
    def roots(self) -> MemrefRoots:
        """The function's `MemrefRoots`, walked once the first nest or tile
        loop reaches a decision (none in a function whose loops all move
        data, as the compile routes give)."""
        return MemrefRoots(self.fn)

    @cached_property
    def peeled(self) -> PeeledLoops:
        return PeeledLoops(self.fn)

    def _block(self, block: Block, env: dict[SSAValue, Aff]) -> None:
        for o in block.ops:
            if isinstance(o, arith.ConstantOp) and isinstance(o.result.type, IndexType):
                env.update(index_constants([o]))
            elif isinstance(o, affine.ApplyOp):
                with suppress(_Unknown, NemDiagnosticError):
                    env[o.result] = _evaluate(env)(o, o.map.data, tuple(o.mapOperands))[0]
            elif isinstance(o, affine.ForOp):
                self._loop(o, env)
            elif isinstance(o, LINALG_OPS):
                self._decide(o, env)

    def _loop(self, loop: affine.ForOp, env: dict[SSAValue, Aff]) -> None:
        """`loops.lower_for`'s choice: a NEM loop (entered), a nest (decided)."""
        if is_structural(loop):
            return self._enter(loop, env)
        if not all(v in env for v in _outside_indices(loop)):
            return
        try:
            kept = tile_loop(loop, env, RaiseAnalysis(env, _no_view, self.roots).buffer_of)
        except (_NeedsView, NemDiagnosticError):
            return
        if kept:
            return self._enter(loop, env)
        self._decide(loop, env)

    def _decide(self, top: Operation, env: dict[SSAValue, Aff]) -> None:
        """A loop nest or linalg op the conversion decides (`compute`)."""
        k = outlined(top, env, self.roots)
        if k is not None:
            self.found[top] = k

    def _enter(self, loop: affine.ForOp, env: dict[SSAValue, Aff]) -> None:
        """The body of a NEM loop, once, with the loop's variable."""
        if loop.results or self.peeled.may_peel(loop):
            return
        try:
            if is_rerolled(loop):
                return
            lb, step, trip = loop_bounds(loop, _evaluate(env))
        except (_Unknown, NemDiagnosticError):
            return
        if trip == 0:
            return  # the conversion lowers no body
        order = next(self._order)
        iv = loop.body.block.args[0]
        env[iv] = lb + Aff.atom(Var(iv, f"{_VAR}{order}", trip, order)).scale(step)
        self._block(loop.body.block, env)


def _evaluate(env: dict[SSAValue, Aff]) -> MapEvaluator:
    """`LoweringContext.affine` on the pass's index values (`_Unknown` for a
    value it has none of; the conversion's reject for a non-affine result)."""

    def evaluate(op: Operation, m: AffineMap, operands: tuple[SSAValue, ...]) -> list[Aff]:
        if not all(v in env for v in operands):
            raise _Unknown
        try:
            return eval_map(m, [env[v] for v in operands])
        except ValueError as e:
            raise reject(op, f"non-affine index: {e}") from None

    return evaluate


def _outside_indices(top: Operation) -> list[SSAValue]:
    """The index values the ops in `top` use from outside it."""
    inside = set(top.walk())
    return [
        v
        for o in inside
        for v in o.operands
        if isinstance(v.type, IndexType)
        and not (isinstance(v.owner, Operation) and v.owner in inside)
        and not (isinstance(v, BlockArgument) and v.block.parent_op() in inside)
    ]


def outlined(top: Operation, env: dict[SSAValue, Aff], roots: MemrefRoots) -> Outlined | None:
    """The kernel of loop nest or linalg op `top` when it escapes on every
    target, decided on `env` (the index values of the scopes around it)
    and `roots` as `compute.lower_nest` / `lower_linalg` decide it; None
    where the conversion must decide (module docstring).  A linalg op is
    decided before its kernel's operands are gathered: nearly all of them
    (the tiles' copies and fills) are raised, and gathering was most of
    the pass's cost (D-LOW-OUTLINE)."""
    analysis = RaiseAnalysis(env, _no_view, roots)
    try:
        if isinstance(top, affine.ForOp):
            after = tuple(carried_out(top)) if top.results else ()
            operands = _kernel_operands(top, after, env)
            if operands is None:
                return None
            for o in (top, *after):
                check_access_bounds(o, env)  # D-LOW-BOUNDS: the conversion's error
            decision = analysis.nest(top)
            what = f"loop nest at {location_text(top)}"
        else:
            after = ()
            if not _static_memrefs(top.operands):
                return None
            decision = analysis.linalg(top)
            if not isinstance(decision, Escape):
                return None
            operands = _kernel_operands(top, after, env)
            if operands is None:
                return None
            what = f"{top.name} at {location_text(top)}"
    except (_NeedsView, NemDiagnosticError):
        return None  # the conversion's error, a scalar a load outside gives, a box
    if not isinstance(decision, Escape) or _VAR in decision.why:
        return None
    assert decision.after == after
    return Outlined(what, decision.why, after, *operands)


def _static_memrefs(values: Sequence[SSAValue]) -> bool:
    return all(v.type.has_static_shape() for v in values if isinstance(v.type, MemRefType))


def _kernel_operands(
    top: Operation, after: tuple[Operation, ...], env: dict[SSAValue, Aff]
) -> tuple[list[SSAValue], list[SSAValue], list[SSAValue], list[SSAValue]] | None:
    """`escape.kernel_operands` of `top` and the ops `after` it, or None
    where the pass cannot decide the kernel: an index value it has not
    evaluated, a memref made inside, a memref of dynamic shape."""
    body = [*top.walk(), *(x for a in after for x in a.walk())]
    ins, outs, index_vals, consts = kernel_operands(top, body, ())
    if (
        any(v not in env for v in index_vals)
        or any(isinstance(r.type, MemRefType) for o in body for r in o.results)
        or not _static_memrefs([*ins, *outs])
    ):
        return None
    return ins, outs, index_vals, consts


class OutlineKernels(RewritePattern):
    """A loop nest or linalg op `OutlinedNests` found becomes one
    `nem_lowering.kernel`."""

    def __init__(self, nests: OutlinedNests) -> None:
        self.nests = nests

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        k = self.nests.found.get(op)
        if k is None:
            return
        arg_types = [region_type(m) for m in (*k.ins, *k.outs)]
        kfn = kernel_function([op, *k.after], k.ins, k.outs, k.index_vals, k.consts, (), arg_types)
        kop = KernelOp(k.ins, k.outs, k.index_vals, kfn, k.what, k.why)
        kop.location = op.location
        rewriter.insert(kop, InsertPoint.before(op))
        for o in reversed(k.after):
            rewriter.erase(o)
        rewriter.erase(op)


@dataclass(frozen=True)
class OutlineKernelsPass(ModulePass):
    """Outline the loop nests that escape on every target as `nem_lowering.kernel`
    ops, which the conversion lowers to `compute op="mlir.kernel"` tasks (D-LOW-OUTLINE).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-outline-kernels"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        nests = OutlinedNests(entry_function(op, self.entry))
        # the rewriter's walk visits every op of the function: only when there
        # is something to outline (none where every loop moves data, as the
        # compile routes give)
        if nests.found:
            PatternRewriteWalker(OutlineKernels(nests), apply_recursively=False).rewrite_region(
                nests.fn.body
            )


def lower_kernel(lw: Lowering, op: KernelOp, st: BlockState) -> None:
    """The `compute op="mlir.kernel"` task of a `nem_lowering.kernel`: its
    accesses checked (D-LOW-BOUNDS) and what it touches logged (D-LOW-PEEL)
    as the conversion does for a nest it escapes, on its index arguments'
    values, then the task the escape hatch emits (`escape.emit_kernel`)."""
    ctx = lw.ctx
    block = op.kernel.body.block
    body = [o for o in block.ops if not isinstance(o, func.ReturnOp)]
    memrefs = (*op.ins, *op.outs)
    env = index_constants(body)
    env.update((a, ctx.index(v, op)) for a, v in zip(block.args[len(memrefs) :], op.index_args))
    for o in body:
        check_access_bounds(o, env)
    nest = [o for o in body if not isinstance(o, arith.ConstantOp)]

    def log_boxes() -> None:
        if len(nest) == 1 and isinstance(top := nest[0], affine.ForOp):
            accessed = accessed_boxes(top, env)
            log_accessed_boxes(
                ctx,
                op,
                {
                    memrefs[a.index]: box
                    for a, box in accessed.items()
                    if isinstance(a, BlockArgument) and a.owner is block
                },
            )

    emit_kernel(
        lw,
        op,
        st,
        (op.ins, op.outs, op.index_args),
        lambda: kernel_line(op.kernel),
        op.what.data,
        op.why.data,
        log_boxes,
    )
