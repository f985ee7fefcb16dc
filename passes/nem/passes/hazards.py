"""`nem-check-hazards`: hazards and aliasing across tasks and loop iterations.

HAZ-01 (overlapping accesses, one a write, not ordered by the token graph)
and HAZ-03 / LOOP-06 (the same across iterations of a pipelined loop under
`@max_in_flight(N)`), with the semantics of decisions D-HAZ-* in
docs/spec-decisions.md; the analysis lives in `nem.analysis.hazard_finder`
(over sets of task instances, D-HAZ-SYMBOLIC).
HAZ-02 (transfer self-overlap without `@memmove`) is checked by the static
verifier.  All findings of a program are reported together.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nem.analysis.hazard_finder import MAX_TASK_INSTANCES, find_hazards
from nem.dialect.ops import ProgramOp
from nem.passes.pass_context import report, shape_memos
from nem.passes.tokens import shared_structures


@dataclass(frozen=True)
class CheckHazardsPass(ModulePass):
    """Check races between tasks and across pipelined loop iterations (HAZ-01, HAZ-03, LOOP-06).

    Options:
      max-instances: task instances to enumerate, for accesses isl cannot represent, before windowing (D-HAZ-WINDOW)
    """

    name = "nem-check-hazards"

    max_instances: int = MAX_TASK_INSTANCES
    """Task instances to enumerate where an access is not quasi-affine (the
    rest is decided over sets of instances, D-HAZ-SYMBOLIC), before
    windowing (D-HAZ-WINDOW); `-p 'nem-check-hazards{max_instances=1000}'`."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        shared = shared_structures(ctx) or {}
        diags = [
            d
            for prog in op.walk()
            if isinstance(prog, ProgramOp)
            for d in find_hazards(
                prog, self.max_instances, shape_memos(ctx), shared.pop(prog, None)
            )
        ]
        diags.sort(
            key=lambda d: (d.severity != "warning", (d.loc.line, d.loc.col) if d.loc else (0, 0))
        )
        report(ctx, diags)
