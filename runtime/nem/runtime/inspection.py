"""What a paused session shows: `Task` and `Token` snapshots with useful
attributes and a readable `repr`, instead of the scheduler's internals.

    >>> s.get_ready_tasks()
    [<Task tA add.async line 16 [i=1] ready>]
    >>> s.get_tokens()["tX[i=1]"]
    <Token tX [i=1] satisfied (by transfer.async line 15)>

Snapshots are taken when asked for; they do not change as the session runs.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Task:
    """One task instance (a task statement in one loop iteration)."""

    name: str
    """The token name the program gives it, else `opcode@line`."""
    opcode: str
    sync: bool
    line: int
    iteration: dict[str, int]
    """Loop variables of its instance, outermost first (`{}` outside loops)."""
    state: str
    """`pending` (waits for a dependency), `ready` or `completed`."""
    deps: tuple[str, ...]
    """The tokens it depends on (`name[i=..]`; not kept once it completed)."""
    waiting_for: tuple[str, ...]
    """The dependencies not satisfied yet."""
    unit: str | None = None
    """The execution unit it ran on, once completed."""
    seq: int = field(default=0, compare=False)
    """Issue order."""

    @property
    def kind(self) -> str:
        return f"{self.opcode}.{'sync' if self.sync else 'async'}"

    @property
    def key(self) -> str:
        """`name[i=..]`, the key of its token in `Session.get_tokens()`."""
        return self.name + _iteration_suffix(self.iteration)

    def __repr__(self) -> str:
        it = f" [{_iteration_text(self.iteration)}]" if self.iteration else ""
        wait = f" on {', '.join(self.waiting_for)}" if self.waiting_for else ""
        unit = f" on {self.unit}" if self.unit and self.state == "completed" else ""
        return f"<Task {self.name} {self.kind} line {self.line}{it} {self.state}{wait}{unit}>"


@dataclass(frozen=True)
class Token:
    """The completion token of one task instance."""

    name: str
    iteration: dict[str, int]
    satisfied: bool
    consumed: bool
    """Whether a `deps`, `wait` or `.sync` refers to it yet."""
    produced_by: Task | None

    @property
    def key(self) -> str:
        return self.name + _iteration_suffix(self.iteration)

    def __repr__(self) -> str:
        it = f" [{_iteration_text(self.iteration)}]" if self.iteration else ""
        state = "satisfied" if self.satisfied else "pending"
        by = self.produced_by
        src = f" (by {by.kind} line {by.line})" if by is not None else ""
        return f"<Token {self.name}{it} {state}{src}>"


def _iteration_text(iteration: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in iteration.items())


def _iteration_suffix(iteration: dict[str, int]) -> str:
    return f"[{_iteration_text(iteration)}]" if iteration else ""


def _iteration(frame) -> dict[str, int]:
    return dict(zip(frame.names, frame.iv))


def task_of(inst, sched, state: str | None = None) -> Task:
    """A snapshot of scheduler task instance `inst`."""
    tpl = inst.tpl
    deps = tuple(_token_key(d) for d in inst.deps) if getattr(inst, "deps", None) else ()
    waiting = tuple(_token_key(d) for d in inst.deps if not d.done) \
        if getattr(inst, "deps", None) else ()
    if state is None:  # the scheduler drops a completed task's token and deps
        state = "completed" if inst.token is None or inst.token.done else \
            ("pending" if inst.npending else "ready")
    unit = sched.unit_name(inst.unit) if state == "completed" and inst.unit is not None else None
    return Task(tpl.label, tpl.opcode, tpl.sync, tpl.line, _iteration(inst.frame), state, deps,
                waiting, unit, inst.seq)


def token_of(tok, frame, sched) -> Token:
    task = task_of(tok.task, sched) if tok.task is not None else None
    return Token(tok.tpl.label if tok.tpl is not None else "?", _iteration(frame), tok.done,
                 tok.consumed, task)


def _token_key(tok) -> str:
    if tok.task is None:
        return tok.tpl.label if tok.tpl is not None else "?"
    return tok.tpl.label + _iteration_suffix(_iteration(tok.task.frame))


def unknown_name(kind: str, name: str, known: list[str]) -> ValueError:
    """A ValueError for a name that no task of the program has."""
    near = difflib.get_close_matches(name, known, 3)
    hint = f"; did you mean {', '.join(near)}?" if near else \
        f"; the program's {kind}s: {', '.join(sorted(set(known))) or 'none'}"
    return ValueError(f"no {kind} named '{name}' in the program{hint}")
