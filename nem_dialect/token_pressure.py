"""A bound on simultaneously live tokens, for `SEQ.max_active_tokens` (DEV-17).

Scoped fallback used by `nem-verify-device` when no token analysis with a
`max_live_tokens(program)` function is installed (the token/hazard engineer's
happens-before analysis supersedes it).  The model (decision D-DEV-TOKENS):

* the sequencer dispatches the statements of a block in order;
* an async task's token is live from its task through the last statement
  of the same block that consumes it (a `deps=[...]` entry or a `wait`, also
  from inside a nested loop body); a token nobody consumes stays live to the
  end of its block (program end, or the end of its loop iteration);
* a `.sync` task's token is live only at its own statement unless a later
  statement consumes it;
* a loop contributes, at its statement, min(@max_in_flight N, trip count)
  times the peak of its body (N iterations may be active together, each at
  its own peak), on top of the outer tokens live across the loop.

Linear in the number of ops (one sweep per block).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Block, Operation

from nem.dialect.capacity import loop_copies
from nem.dialect.exprs import Evaluator
from nem.dialect.ops import LoopOp, ProgramOp, TaskOp, WaitOp


@dataclass(frozen=True)
class TokenPeak:
    count: int
    op: Operation | None
    """The statement at which the peak is reached (a task or a loop)."""


def token_peak(prog: ProgramOp, ev: Evaluator | None = None) -> TokenPeak:
    return _block_peak(prog.block, ev or Evaluator())


def max_live_tokens(prog: ProgramOp) -> int:
    return token_peak(prog).count


def _block_peak(block: Block, ev: Evaluator) -> TokenPeak:
    ops = list(block.ops)
    index = {op: i for i, op in enumerate(ops)}
    n = len(ops)
    delta = [0] * (n + 2)
    extra = [0] * (n + 1)
    inner_op: dict[int, Operation | None] = {}
    for i, op in enumerate(ops):
        if isinstance(op, LoopOp):
            body = _block_peak(op.block, ev)
            extra[i] = loop_copies((op,), ev) * body.count
            inner_op[i] = op
        if not isinstance(op, TaskOp):
            continue
        end = -1  # first statement at which the token is dead
        for use in op.results[0].uses:
            user = use.operation
            while user is not None and user.parent_block() is not block:
                user = user.parent_op()
            if user is not None:
                # live up to and including its last consumer: a task queued
                # on a dependency coexists with it until the producer completes
                end = max(end, index[user] + 1)
        if end < 0:
            end = i + 1 if op.is_sync else n
        delta[i] += 1
        delta[max(end, i + 1)] -= 1
    best, where, live = 0, None, 0
    for i in range(n):
        live += delta[i]
        here = live + extra[i]
        if here > best:
            best, where = here, inner_op.get(i, ops[i])
    return TokenPeak(best, where)
