"""`nem-check-tokens`: token hygiene.

* tokens produced but never consumed by a `deps` entry or a `wait` (warning,
  TASK-01, decision D-TOK-UNUSED; `.sync` tokens are consumed by construction);
* waits (and `.sync` tasks) on a task that can only become ready after the
  wait, i.e. that depends on something issued later (error, decision
  D-TOK-DEADLOCK) -- only hand-written IR can express this, the `.nem` parser
  rejects tokens used before they are produced (TASK-03);

`max_live_tokens(program)` (DEV-17) lives in `nem.analysis.token_liveness`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nem.analysis.ir_walk import ops_of
from nem.analysis.token_liveness import check_tokens
from nem.dialect.ops import ProgramOp
from nem.passes.pass_context import report


@dataclass(frozen=True)
class CheckTokensPass(ModulePass):
    """Check token hygiene: unconsumed tokens (warning) and waits that can never complete."""

    name = "nem-check-tokens"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        report(
            ctx,
            [d for prog in ops_of(op, ProgramOp) for d in check_tokens(prog)],
        )
