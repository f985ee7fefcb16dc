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

from nem.analysis.happens_before import Structure
from nem.analysis.ir_walk import ops_of
from nem.analysis.token_liveness import check_tokens
from nem.dialect.gc_pause import gc_paused
from nem.dialect.ops import ProgramOp
from nem.passes.pass_context import NemPassContext, report

STRUCTURES = "structures"
"""The key, in `NemPassContext.cache`, of a dict program -> its `Structure`
(the happens-before model's static facts), set by the staged `nem-verify`
around its token and hazard stages only: the token stage fills it, the
hazard stage takes it (between the two no pass changes the program, so both
read the same facts from one build).  Absent anywhere else: a `-p` list of
separate passes may change the program in between, and each builds its own."""


def shared_structures(ctx: Context) -> dict[ProgramOp, Structure] | None:
    """The dict under STRUCTURES, when the staged `nem-verify` set one."""
    return ctx.cache.get(STRUCTURES) if isinstance(ctx, NemPassContext) else None


@dataclass(frozen=True)
class CheckTokensPass(ModulePass):
    """Check token hygiene: unconsumed tokens (warning) and waits that can never complete."""

    name = "nem-check-tokens"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        shared = shared_structures(ctx)
        diags = []
        for prog in ops_of(op, ProgramOp):
            s = None
            if shared is not None:
                with gc_paused():  # as check_tokens builds it
                    s = shared[prog] = Structure(prog)
            diags += check_tokens(prog, s)
        report(ctx, diags)
