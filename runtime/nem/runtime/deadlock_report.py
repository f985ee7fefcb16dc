"""What a stalled run reports (`checks.Deadlock`: no task is ready but work
remains): the live tasks and the streams blocked at a wait or a `.sync`, and
the tokens each still waits for.

Kept apart from the scheduler, which only decides that no task can make
progress; naming what every waiter waits for is work done once, at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from xdsl.ir import Operation, SSAValue

from nem.dialect.diagnostics import SourceLoc
from nem.runtime.checks import TaskRef
from nem.runtime.engine import TaskTpl, WaitTpl
from nem.runtime.task_state import Frame, TaskInst, Token


def witness(
    live: Iterable[TaskInst],
    frames: Collection[Frame],
    file: str,
    values: Sequence[SSAValue],
    ref: Callable[[TaskInst], TaskRef],
) -> list[str]:
    """One line per live task and per blocked stream of a stalled run: what
    it waits for, each token named by the task that would produce it, or
    as never produced."""
    out = []
    for t in sorted(live, key=lambda t: t.seq):
        waits = [_tok_desc(d, frames, file, values, ref) for d in t.deps or () if not d.done]
        out.append(f"task {ref(t)} waits for " + ", ".join(waits))
    for f in sorted(frames, key=lambda f: (f.depth, f.index or 0)):
        if f.blocked:
            ins = f.body[f.pc - 1]
            assert isinstance(ins, WaitTpl | TaskTpl)  # a stream blocks at a wait or .sync
            what = "wait" if isinstance(ins, WaitTpl) else f"{ins.opcode}.sync"
            it = f" iteration {f.iteration()}" if f.iteration() else ""
            waits = [_tok_desc(d, frames, file, values, ref) for d in f.blocked if not d.done]
            out.append(f"{what} at {file}:{ins.line}{it} waits for " + ", ".join(waits))
    return out


def _tok_desc(
    tok: Token,
    frames: Collection[Frame],
    file: str,
    values: Sequence[SSAValue],
    ref: Callable[[TaskInst], TaskRef],
) -> str:
    if tok.task is None:
        for f in frames:
            for slot, x in f.env.items():
                if x is tok:
                    v = values[slot]
                    loc = SourceLoc.of(v.owner) if isinstance(v.owner, Operation) else None
                    name = v.owner.token_name() if hasattr(v.owner, "token_name") else "?"
                    return (
                        f"token {name} (never produced: its task at "
                        f"{file}:{loc.line if loc else '?'} is never issued)"
                    )
        return "a token that is never produced"
    return f"token {ref(tok.task)}"
