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
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.kernel_op import KernelOp, region_type
from nem.passes.lowering.access_bounds import check_access_bounds
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.conversion_walk import (
    VAR,
    ConversionWalk,
    NeedsView,
    index_constants,
    no_view,
)
from nem.passes.lowering.escape import (
    carried_out,
    emit_kernel,
    kernel_function,
    kernel_line,
    kernel_operands,
    location_text,
    log_accessed_boxes,
)
from nem.passes.lowering.loop_ranges import accessed_boxes
from nem.passes.lowering.memref_roots import MemrefRoots
from nem.passes.lowering.prepare import entry_function, rewrite_once
from nem.passes.lowering.raise_decision import Escape, RaiseAnalysis
from nem.passes.lowering.state import BlockState, Lowering


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


class OutlinedNests(ConversionWalk):
    """Which loop nests of function `fn` escape on every target, each with
    its kernel (`outlined`), found in the conversion's walk
    (`ConversionWalk`: the scopes it lowers op by op, on the index values
    it binds there)."""

    def __init__(self, fn: func.FuncOp) -> None:
        self.found: dict[Operation, Outlined] = {}
        super().__init__(fn)

    def decide(self, top: Operation, env: dict[SSAValue, Aff]) -> None:
        k = outlined(top, env, self.roots)
        if k is not None:
            self.found[top] = k


def outlined(top: Operation, env: dict[SSAValue, Aff], roots: MemrefRoots) -> Outlined | None:
    """The kernel of loop nest or linalg op `top` when it escapes on every
    target, decided on `env` (the index values of the scopes around it)
    and `roots` as `compute.lower_nest` / `lower_linalg` decide it; None
    where the conversion must decide (module docstring).  A linalg op is
    decided before its kernel's operands are gathered: nearly all of them
    (the tiles' copies and fills) are raised, and gathering was most of
    the pass's cost (D-LOW-OUTLINE)."""
    analysis = RaiseAnalysis(env, no_view, roots)
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
    except (NeedsView, NemDiagnosticError):
        return None  # the conversion's error, a scalar a load outside gives, a box
    if not isinstance(decision, Escape) or VAR in decision.why:
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
            rewrite_once(nests.fn.body, OutlineKernels(nests))


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
