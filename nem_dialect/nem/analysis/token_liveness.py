"""Token liveness and token errors: DEV-17 (`max_live_tokens` against
`SEQ.max_active_tokens`), TASK-01 unconsumed tokens, TASK-03 deadlocks
(decisions D-TOK-*), on the happens-before model's `Structure`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from xdsl.ir import Block, Operation

from nem.analysis.happens_before import StaticTask, Structure, task_label
from nem.analysis.ir_walk import block_ops
from nem.dialect.diagnostics import Diagnostic, SourceLoc
from nem.dialect.expressions import Evaluator, ExprError
from nem.dialect.gc_pause import gc_paused
from nem.dialect.ops import LoopOp, ProgramOp, TaskOp, WaitOp
from nem.dialect.per_class import subclass_table
from nem.dialect.semantics.streams import loop_window

_IS_TASK = subclass_table(TaskOp)


def max_live_tokens(program: ProgramOp) -> int:
    """The maximum number of simultaneously live synchronization tokens (DEV-17).

    A token is *live* from the issue of the task that produces it until the
    last statement that consumes it (a `deps` entry or a `wait`) has been
    issued -- after that the sequencer no longer needs to track it; a token
    nobody consumes stays live until the end of its block (the program's end,
    or the end of its loop iteration).  A `.sync` task's token is live only at
    its own statement.  A loop statement contributes the maximum live count of
    its body times the number of iterations that may be in flight
    (min(N, trip count) for `@max_in_flight(N)`), on top of the enclosing
    block's tokens live across the loop (decision D-TOK-LIVE).  This is an
    upper bound over every schedule the program allows.
    """
    return live_token_peak(program)[0]


def live_token_peak(program: ProgramOp) -> tuple[int, Operation | None]:
    """`max_live_tokens` and the statement (task or loop) where the peak is
    reached, so a DEV-17 diagnostic can point at it."""
    with gc_paused():
        return _block_live(program.block, Evaluator())


def first_over(program: ProgramOp, limit: int) -> Operation | None:
    """The first statement, in program order, at which more than `limit`
    tokens are live (D-TOK-LIVE), inside a loop whose body alone exceeds it:
    where a DEV-17 error points (the task whose token is one too many, not
    the peak, which may be many tasks later)."""
    ev = Evaluator()
    block = program.block
    with gc_paused():
        while True:
            live = block_liveness(block, ev)
            over = next((k for k, c in enumerate(live.counts()) if c > limit), None)
            if over is None:
                return None
            op = live.ops[over]
            if not (isinstance(op, LoopOp) and _block_live(op.block, ev)[0] > limit):
                return op
            block = op.block


@dataclass
class BlockLiveness:
    """Token liveness in one block (D-TOK-LIVE): the statements, the live
    interval `[first, last]` (statement indices) of each task's token, and
    what each loop statement adds (its body's peak times the iterations in
    flight)."""

    ops: list[Operation]
    intervals: dict[TaskOp, tuple[int, int]]
    nested: list[int]

    def counts(self) -> list[int]:
        """Live tokens at each statement (this block's and its loops')."""
        n = len(self.ops)
        delta = [0] * (n + 2)
        for first, last in self.intervals.values():
            delta[first] += 1
            delta[last + 1] -= 1
        out, live = [], 0
        for k in range(n):
            live += delta[k]
            out.append(live + self.nested[k])
        return out

    def peak(self) -> tuple[int, Operation | None]:
        best, where = 0, None
        for k, c in enumerate(self.counts()):
            if c > best:
                best, where = c, self.ops[k]
        return best, where


def block_liveness(block: Block, ev: Evaluator | None = None, bodies: bool = True) -> BlockLiveness:
    """The liveness of `block`'s tokens (D-TOK-LIVE); loop bodies count
    through their peak (not at all without `bodies`: the block's own tokens,
    for a caller that counts the bodies itself)."""
    ev = ev or Evaluator()
    ops = block_ops(block)
    idx = {op: k for k, op in enumerate(ops)}
    n = len(ops)
    nested = [0] * n
    intervals: dict[TaskOp, tuple[int, int]] = {}
    for k, op in enumerate(ops):
        # `type(op) is` and a per-class table: isinstance on xDSL's (ABC) op
        # classes runs Python code, asked twice of every op of a lowered CNN
        # (no op class derives from LoopOp)
        if bodies and type(op) is LoopOp:
            body, _ = _block_live(op.block, ev)
            nested[k] = body * loop_copies(op, ev)
        if not _IS_TASK[type(op)]:
            continue
        op = cast(TaskOp, op)
        if op.is_sync:
            last = k
        else:
            last = n  # unconsumed: until the end of the block
            uses = [
                idx.get(a)
                for a in (ancestor_in(u.operation, block) for u in op.results[0].uses)
                if a is not None
            ]
            found = [u for u in uses if u is not None]
            if found:
                last = max(found)
        intervals[op] = (k, last)
    return BlockLiveness(ops, intervals, nested)


def loop_copies(op: LoopOp, ev: Evaluator) -> int:
    """How many iterations of `op` may hold their tokens at once (D-TOK-LIVE):
    min(`@max_in_flight` N, trip count), 0 for a loop that never runs."""
    try:
        lo, hi = ev.static(op.lower), ev.static(op.upper)
    except ExprError:
        lo = hi = None
    trip = hi - lo + 1 if lo is not None and hi is not None else None
    return 0 if trip is not None and trip <= 0 else loop_window(op.max_in_flight(), trip)


def _block_live(block: Block, ev: Evaluator) -> tuple[int, Operation | None]:
    return block_liveness(block, ev).peak()


def ancestor_in(op: Operation, block: Block) -> Operation | None:
    """The statement of `block` that is or holds `op` (None: none): where a
    use inside a loop body counts for the block's liveness."""
    cur: Operation | None = op
    while cur is not None and cur.parent_block() is not block:
        cur = cur.parent_op()
    return cur


def check_tokens(program: ProgramOp, s: Structure | None = None) -> list[Diagnostic]:
    """Token diagnostics: unconsumed tokens (warning, D-TOK-UNUSED), waits that
    can never complete (error, D-TOK-DEADLOCK).  `@max_in_flight(N < 1)` is the
    static verifier's LOOP-03 (`LoopOp.window_error`).  `s`: the program's
    `Structure` as of now, when the caller has it (else built here)."""
    with gc_paused():
        return _check_tokens(program, s if s is not None else Structure(program))


def _check_tokens(program: ProgramOp, s: Structure) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    maxpos: dict[StaticTask, int] = {}

    def reach(t: StaticTask) -> int:
        """The latest program position among t and everything it depends on."""
        stack = [(t, False)]
        expanded: set[int] = set()  # guards against dependency cycles in hand-written IR
        while stack:
            c, done = stack.pop()
            if c in maxpos:
                continue
            if done:
                maxpos[c] = max([c.pos] + [maxpos.get(d, d.pos) for d in c.deps])
                continue
            if id(c) in expanded:
                continue
            expanded.add(id(c))
            stack.append((c, True))
            stack.extend((d, False) for d in c.deps if d not in maxpos)
        return maxpos[t]

    for op in s.order:
        if isinstance(op, TaskOp):
            st = s.tasks[op]
            if op.is_sync:
                blockers = [st]
            else:
                blockers = []
                if not op.results[0].uses:
                    diags.append(
                        Diagnostic(
                            "warning",
                            f"the token of {task_label(op)} is never consumed: no deps "
                            "or wait refers to it",
                            SourceLoc.of(op),
                            "TASK-01",
                            (
                                f"wait({op.token_name()}) before it matters, or use the .sync form"
                                if op.token_name()
                                else "name the token and wait for it, or use .sync"
                            )
                            + " (decision D-TOK-UNUSED)",
                        )
                    )
            for t in blockers:
                if reach(t) > s.pos[op]:
                    diags.append(_deadlock(s, op, t))
        elif isinstance(op, WaitOp):
            for v in op.tokens:
                producer = s.producer(v)
                if producer is not None and reach(producer) > s.pos[op]:
                    diags.append(_deadlock(s, op, producer))
    return diags


def _deadlock(s: Structure, op: Operation, t: StaticTask) -> Diagnostic:
    late = max((c for c in _closure(t)), key=lambda c: c.pos)
    what = "waits for" if isinstance(op, WaitOp) else "is .sync and needs"
    # the awaited task itself may be the late one (a wait before its producer): say so
    # rather than "t, which can only become ready after t"
    why = (
        "a task issued after this statement"
        if late is t
        else f"which can only become ready after {task_label(late.op)}, a task issued after "
        "this statement"
    )
    return Diagnostic(
        "error",
        f"deadlock: this {'wait' if isinstance(op, WaitOp) else 'task'} {what} "
        f"{task_label(t.op)}, {why}",
        SourceLoc.of(op),
        "TASK-03",
        "a wait blocks the statements after it: produce every awaited token, and "
        "everything it depends on, before the wait (decision D-TOK-DEADLOCK)",
        [Diagnostic("note", f"{task_label(late.op)} is issued here", SourceLoc.of(late.op))],
    )


def _closure(t: StaticTask) -> Iterator[StaticTask]:
    seen: set[int] = set()
    stack = [t]
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        yield c
        stack.extend(c.deps)
