"""`nem-check-task-control-flow` (D-LOW-TASK-CF): the control flow a NEM
task cannot hold, rejected before the conversion (issue 36 item 1: the
conversion's rejecting handlers as an analysis of their own, the last
preparation pass, after `nem-inline-async-executes`).

NEM has loops and tasks, no branches: an `scf`, `cf`, `affine.if` or
`affine.parallel` op where the conversion lowers ops one by one (a task
boundary) has no equivalent, while inside a compute loop nest its kernel
runs it.  `TaskControlFlow` walks the scopes the conversion lowers op by
op, in its order, and raises the conversion's diagnostic at the first such
op, same text, same op:

- the entry function's block, the bodies of the loops it keeps as NEM
  loops (`structure.is_structural`, or marked `nem_lowering.tile_loop` by
  `nem-mark-tile-loops`), `nem_lowering.scope` bodies, and the last
  iteration `nem-reroll-pipelines` put after a re-rolled loop (an
  `scf.execute_region`, its ops but its yield, D-LOW-PIPE), where a failure
  is the loop's peeling's, as the conversion reports it
  (`loops.peel_failure`);
- not a function the conversion rejects at an argument, nor the body of
  a loop it rejects before it (one carrying values,
  `loops.carried_values`; bounds `loops.loop_bounds` rejects; a bad
  `nem.max_in_flight`, `reroll.is_rerolled`) nor
  of one whose constant bounds give no iteration and no last iteration
  after it (it lowers no body); not a loop it lowers as one compute task,
  nor a tile loop it decides itself: such a loop holds index arithmetic
  and loops only (`tile_loops.may_be_tile_loop`), so no control-flow op of
  its body is lowered one by one; not an outlined kernel, a linalg op or
  any other op's regions.

An `scf.for` left there (not over `index`, or without a constant positive
step: `nem-raise-scf-for` raised the others, D-LOW-SCF) says why; an
`scf.execute_region` that is not a re-rolled loop's last iteration is
rejected as any other.  The conversion's table has none of these ops: a
last iteration is its loop's to lower (`loops.lower_for`, D-LOW-WALK).
Known differences (D-LOW-TASK-CF): this check
runs before the conversion, so a diagnostic the conversion raised at an
earlier op comes after this one; a control-flow op in a loop the
conversion peels at a partial last tile (not a re-rolled one) is reported
at the op, not within the peeling's message; the body of a loop whose
bounds have operands is checked even when it has no iteration.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, cf, func, scf
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.per_class import PerClass
from nem.dialect.scope_op import ScopeOp
from nem.frontends.upstream_dialects.affine_if import AffineIfOp
from nem.passes.lowering.affine_algebra import eval_map
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.loops import carried_values, loop_bounds, peel_failure, tail_partial
from nem.passes.lowering.prepare import entry_function
from nem.passes.lowering.reroll import is_last_iteration, is_rerolled, last_iteration
from nem.passes.lowering.structure import kept_as_loop
from nem.passes.lowering.views import check_elem, memref_strides

CONTROL_FLOW: tuple[type[Operation], ...] = (
    AffineIfOp,
    affine.ParallelOp,
    *scf.Scf.operations,
    *cf.Cf.operations,
)
"""The op classes a task cannot hold (and their subclasses)."""


def control_flow_error(op: Operation) -> NemDiagnosticError:
    """The diagnostic of control-flow op `op` at task level."""
    return reject(
        op,
        "control flow other than affine.for is not supported at task level",
        "keep conditionals inside a compute loop nest (its kernel runs them)",
    )


def scf_for_error(op: scf.ForOp) -> NemDiagnosticError:
    """The diagnostic of an `scf.for` `nem-raise-scf-for` left: not over
    `index`, or no constant positive step."""
    why = (
        f"its induction variable is {op.lb.type}, not index"
        if not isinstance(op.lb.type, IndexType)
        else "its step is not a positive constant"
    )
    return reject(
        op,
        f"scf.for is not supported here: {why}; a NEM loop needs an index "
        "variable and a constant positive step (D-LOW-SCF)",
        "loop over index with an arith.constant step",
    )


def _is_control_flow(cls: type) -> bool:
    return issubclass(cls, CONTROL_FLOW)


class TaskControlFlow:
    """The scopes of function `fn` the conversion lowers op by op, walked in
    its order (module docstring); `check` raises at the first control-flow
    op there."""

    def __init__(self, fn: func.FuncOp) -> None:
        self.fn = fn
        self._is_control_flow = PerClass(_is_control_flow)
        """One `issubclass` per op class, not per op."""

    def check(self) -> None:
        """Raise the conversion's diagnostic at the first control-flow op it
        would lower, unless it rejects the function first (an argument)."""
        fn = self.fn
        for arg in fn.body.block.args:
            t = arg.type
            if not isinstance(t, MemRefType):
                return  # `Lowerer.convert` rejects the function first
            try:
                check_elem(fn, t.element_type)
                memref_strides(fn, t)
            except NemDiagnosticError:
                return
        self._ops(fn.body.block.ops)

    def _ops(self, ops: Iterable[Operation]) -> None:
        for op in ops:
            if isinstance(op, affine.ForOp):
                self._loop(op)
            elif isinstance(op, ScopeOp):  # lowered in place (D-LOW-ASYNC-INLINE)
                self._ops(op.body.block.ops)
            elif not self._is_control_flow[type(op)]:
                continue
            elif isinstance(op, scf.ForOp):
                raise scf_for_error(op)
            elif not (isinstance(op, scf.ExecuteRegionOp) and is_last_iteration(op)):
                raise control_flow_error(op)

    def _loop(self, loop: affine.ForOp) -> None:
        """The body of `loop` where the conversion lowers it as a NEM loop
        (`loops.lower_for`), then a re-rolled loop's last iteration, whose
        failure the conversion reports as that of the loop's peeling
        (`loops.peel_failure`, D-LOW-PIPE)."""
        if not kept_as_loop(loop):
            return  # a compute task, or a tile loop of index arithmetic and loops
        try:  # what `loops.lower_loop` checks before the body
            trips = _trips(loop)
            carried_values(loop)
            tail = last_iteration(loop) if is_rerolled(loop) else None
        except NemDiagnosticError:
            return  # rejected at the loop
        if tail is None:
            if trips != 0:
                self._ops(loop.body.block.ops)
            return
        try:
            if trips != 0:
                self._ops(loop.body.block.ops)
            self._ops(list(tail.region.block.ops)[:-1])  # its ops but the scf.yield
        except NemDiagnosticError as e:
            raise peel_failure(loop, tail_partial(tail), e) from None


def _trips(loop: affine.ForOp) -> int | None:
    """The trip count of `loop` when its bounds are constant (the
    conversion's rejection of them raised), else None: the conversion's to
    evaluate."""
    if loop.lowerBoundOperands or loop.upperBoundOperands:
        return None
    return loop_bounds(loop, lambda op, m, operands: eval_map(m, []))[2]


@dataclass(frozen=True)
class CheckTaskControlFlowPass(ModulePass):
    """Reject the control flow a NEM task cannot hold where the conversion
    lowers the entry function op by op, as it rejected it (D-LOW-TASK-CF).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-check-task-control-flow"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        TaskControlFlow(entry_function(op, self.entry)).check()
