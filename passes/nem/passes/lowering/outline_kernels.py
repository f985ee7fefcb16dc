"""`nem-outline-kernels` (D-LOW-OUTLINE): the loop nests that escape on
every target (D-LOW-ESCAPE) become `nem_lowering.kernel` ops before the
conversion, which lowers each to its `compute op="mlir.kernel"` task
(`lower_kernel`) instead of deciding it itself.

Which nests: those `RaiseAnalysis` answers `Escape` for on the MLIR alone,
with what the pass knows at the top level of the entry function (index
constants; which buffer, element type and shape each memref is:
`MemrefRoots`).  A nest whose decision needs more is left to the
conversion, which decides it as before: one inside another loop (the loop
variables are the conversion's, and a peeled loop decides its body once
per copy), one that takes an index value other than a constant or a value
a scalar load outside it gives (the kernel loads it itself), one whose
decision reads a view's box (D-LOW-ALIAS's touches, a fill), one with a
memref of dynamic shape, a loop the conversion keeps as a NEM loop
(`is_structural`, a tile loop), and one the conversion rejects.  An escape
found where a plan's tasks have no variant on the device stays the
conversion's too (`staging.illegal`).  So the output is the conversion's,
byte for byte (the differential test, test_lowering_outline_kernels.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NoReturn

from xdsl.context import Context
from xdsl.dialects import affine, arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.kernel_op import KernelOp, region_type
from nem.passes.lowering.access_bounds import check_access_bounds
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.escape import (
    carried_out,
    emit_kernel,
    kernel_function,
    kernel_line,
    kernel_operands,
    location_text,
)
from nem.passes.lowering.loops import is_structural
from nem.passes.lowering.memref_roots import MemrefRoots
from nem.passes.lowering.prepare import entry_function
from nem.passes.lowering.raise_decision import Escape, RaiseAnalysis
from nem.passes.lowering.state import BlockState, Lowering
from nem.passes.lowering.tile_loops import may_be_tile_loop


class _NeedsView(Exception):
    """The decision asked for a view's box: the conversion decides the nest."""


def _no_view(m: SSAValue, user: Operation) -> NoReturn:
    raise _NeedsView


@dataclass(frozen=True)
class Outlined:
    """What a nest's `nem_lowering.kernel` holds (`outlined`)."""

    why: str
    after: tuple[Operation, ...]
    ins: list[SSAValue]
    outs: list[SSAValue]
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


def outlined(top: affine.ForOp, env: dict[SSAValue, Aff], roots: MemrefRoots) -> Outlined | None:
    """The kernel of top-level nest `top` when it escapes on every target,
    decided on `env` (the function's index constants) and `roots`; None
    where the conversion must decide (module docstring)."""
    if not _candidate(top):
        return None
    try:
        after = tuple(carried_out(top)) if top.results else ()
        body = [*top.walk(), *(x for a in after for x in a.walk())]
        ins, outs, index_vals, consts = kernel_operands(top, body, ())
    except NemDiagnosticError:
        return None  # the conversion's error, or a scalar a load outside gives
    if index_vals or not all(
        isinstance(m.type, MemRefType) and m.type.has_static_shape() for m in (*ins, *outs)
    ):
        return None
    try:
        decision = RaiseAnalysis(env, _no_view, roots).nest(top)
    except (_NeedsView, NemDiagnosticError):
        return None
    if not isinstance(decision, Escape):
        return None
    assert decision.after == after
    return Outlined(decision.why, after, ins, outs, consts)


class OutlineKernels(RewritePattern):
    """A top-level loop nest of the entry function that escapes on every
    target becomes one `nem_lowering.kernel` (`outlined`)."""

    def __init__(self, fn: func.FuncOp) -> None:
        self.fn = fn
        self.env = index_constants(list(fn.body.block.ops))

    @cached_property
    def roots(self) -> MemrefRoots:
        """The function's `MemrefRoots`, walked once the first nest reaches
        the decision (none in a function whose top-level loops all move
        data, as the compile routes give)."""
        return MemrefRoots(self.fn)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.ForOp, rewriter: PatternRewriter) -> None:
        if op.parent_op() is not self.fn:
            return
        k = outlined(op, self.env, self.roots)
        if k is None:
            return
        arg_types = [region_type(m) for m in (*k.ins, *k.outs)]
        kfn = kernel_function([op, *k.after], k.ins, k.outs, (), k.consts, (), arg_types)
        kop = KernelOp(k.ins, k.outs, (), kfn, f"loop nest at {location_text(op)}", k.why)
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
        fn = entry_function(op, self.entry)
        # the rewriter's walk visits every op of the function; a function whose
        # top-level loops all move data or loop over tiles (what the compile
        # routes give) has no candidate, found on its top-level ops alone
        if any(_candidate(o) for o in fn.body.block.ops):
            PatternRewriteWalker(OutlineKernels(fn), apply_recursively=False).rewrite_region(
                fn.body
            )


def _candidate(op: Operation) -> bool:
    """A loop `outlined` may outline: not one the conversion keeps as a loop."""
    return isinstance(op, affine.ForOp) and not (is_structural(op) or may_be_tile_loop(op))


def lower_kernel(lw: Lowering, op: KernelOp, st: BlockState) -> None:
    """The `compute op="mlir.kernel"` task of a `nem_lowering.kernel`: its
    accesses checked (D-LOW-BOUNDS) as the conversion checks a nest it
    escapes, then the task the escape hatch emits (`escape.emit_kernel`)."""
    body = [o for o in op.kernel.body.block.ops if not isinstance(o, func.ReturnOp)]
    env = index_constants(body)
    for o in body:
        check_access_bounds(o, env)
    emit_kernel(
        lw,
        op,
        st,
        (op.ins, op.outs, op.index_args),
        lambda: kernel_line(op.kernel),
        op.what.data,
        op.why.data,
    )
