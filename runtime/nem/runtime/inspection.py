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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nem.runtime.tensor_io import int_like

if TYPE_CHECKING:
    from xdsl.ir import Operation

    from nem.runtime.engine import CompiledProgram, LoopTpl
    from nem.runtime.scheduler import Scheduler
    from nem.runtime.task_state import Frame, TaskInst
    from nem.runtime.task_state import Token as TokenState


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


def _iteration(frame: Frame) -> dict[str, int]:
    return dict(zip(frame.names, frame.iv))


def task_of(inst: TaskInst, sched: Scheduler, state: str | None = None) -> Task:
    """A snapshot of scheduler task instance `inst`."""
    tpl = inst.tpl
    # None once completed (and unset while `Scheduler._issue` builds it)
    held: list[TokenState] | None = getattr(inst, "deps", None)
    deps = tuple(_token_key(d) for d in held) if held else ()
    waiting = tuple(_token_key(d) for d in held if not d.done) if held else ()
    if state is None:  # the scheduler drops a completed task's token and deps
        state = (
            "completed"
            if inst.token is None or inst.token.done
            else ("pending" if inst.npending else "ready")
        )
    unit = sched.unit_name(inst.unit) if state == "completed" and inst.unit is not None else None
    return Task(
        tpl.label,
        tpl.opcode,
        tpl.sync,
        tpl.line,
        _iteration(inst.frame),
        state,
        deps,
        waiting,
        unit,
        inst.seq,
    )


def token_of(tok: TokenState, frame: Frame, sched: Scheduler) -> Token:
    task = task_of(tok.task, sched) if tok.task is not None else None
    return Token(
        tok.tpl.label if tok.tpl is not None else "?",
        _iteration(frame),
        tok.done,
        tok.consumed,
        task,
    )


def _token_key(tok: TokenState) -> str:
    if tok.task is None:
        return tok.tpl.label if tok.tpl is not None else "?"
    return tok.task.tpl.label + _iteration_suffix(_iteration(tok.task.frame))


def unknown_name(kind: str, name: str, known: list[str]) -> ValueError:
    """A ValueError for a name that no task of the program has."""
    near = difflib.get_close_matches(name, known, 3)
    hint = (
        f"; did you mean {', '.join(near)}?"
        if near
        else f"; the program's {kind}s: {', '.join(sorted(set(known))) or 'none'}"
    )
    return ValueError(f"no {kind} named '{name}' in the program{hint}")


# ---------------------------------------------------------------------------
# Iterations a session is asked about (D-RT-NAMES)
# ---------------------------------------------------------------------------


def loops_of(compiled: CompiledProgram, op: Operation) -> list[LoopTpl]:
    """The compiled loops (`engine.LoopTpl`) around `op`, outermost first."""
    by_op: dict[Operation, LoopTpl] = {lt.op: lt for lt in compiled.loops}
    out = []
    p = op.parent_op()
    while p is not None:
        if p in by_op:
            out.append(by_op[p])
        p = p.parent_op()
    return out[::-1]


def _bounds(loop: LoopTpl, outer: tuple[int, ...] | None = None) -> tuple[int, int] | None:
    """[lo, hi] of `loop`: static, or evaluated with the outer loops' values
    `outer`; None when it depends on outer values not given."""
    lo, hi = loop.lower, loop.upper
    if isinstance(lo, int) and isinstance(hi, int):
        return lo, hi
    if outer is None:
        return None
    return (lo if isinstance(lo, int) else lo(outer)), (hi if isinstance(hi, int) else hi(outer))


def _loop_text(loop: LoopTpl, outer: tuple[int, ...] | None = None) -> str:
    b = _bounds(loop, outer)
    return f"{loop.var}{f' in [{b[0]}..{b[1]}]' if b else ''} (line {loop.line})"


def _loops_text(loops: Sequence[LoopTpl]) -> str:
    return ("loop " if len(loops) == 1 else "loops ") + ", ".join(_loop_text(lt) for lt in loops)


def iteration_of(
    name: str, loops: Sequence[LoopTpl], loop_vars: Mapping[str, object]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(loop values, ordinals) of region `name`, declared inside `loops`
    (outermost first), in the iteration `loop_vars` names.  Every variable of
    its loops and no other must be given, each inside its loop's range: a
    read without them took i=0, an unknown one was ignored, and one outside
    the range read data of no iteration (or blamed the program with HAZ-04)."""
    names = [lt.var for lt in loops]
    example = f"read_region({name!r}{''.join(f', {n}=0' for n in names)})"
    extra = [v for v in loop_vars if v not in names]
    if extra and not loops:
        raise ValueError(
            f"region {name} has no loop variable {extra[0]}: it is declared outside "
            f"any loop; {example}"
        )
    if extra:
        raise ValueError(
            f"region {name} has no loop variable {extra[0]}: it is declared inside "
            f"{_loops_text(loops)}; name its iteration, e.g. {example}"
        )
    if len(loop_vars) < len(names):
        raise ValueError(
            f"region {name} is declared inside {_loops_text(loops)}: name its "
            f"iteration, e.g. {example}"
        )
    iv: list[int] = []
    ords: list[int] = []
    for lt in loops:
        v = loop_vars[lt.var]
        if not int_like(v):
            raise TypeError(
                f"region {name}: {lt.var} must be an int, not {v!r} ({type(v).__name__})"
            )
        b = _bounds(lt, tuple(iv))
        assert b is not None
        if not b[0] <= v <= b[1]:
            when = f" when {_iteration_text(dict(zip(names, iv)))}" if _bounds(lt) is None else ""
            raise ValueError(
                f"region {name}: {lt.var}={v} is outside loop {_loop_text(lt, tuple(iv))}{when}"
            )
        iv.append(int(v))
        ords.append(int(v) - b[0])
    return tuple(iv), tuple(ords)


def check_loop_iter(loop_iter: object, innermost: Sequence[LoopTpl | None], whom: str) -> None:
    """A breakpoint's `loop_iter` (an iteration of the innermost loop of the
    tasks it may stop, `innermost`: one loop or None per task) that no such
    loop has is a ValueError, as a misspelt task name is (D-RT-NAMES): the
    program ran to its end.  A range that depends on outer loop variables is
    not checked."""
    if not int_like(loop_iter):
        raise TypeError(f"loop_iter must be an int, not {loop_iter!r} ({type(loop_iter).__name__})")
    loops = list(dict.fromkeys(lt for lt in innermost if lt is not None))
    if not loops:
        who = "no task of the program is" if whom == "the program's tasks" else f"{whom} is not"
        raise ValueError(f"loop_iter={loop_iter} never matches: {who} inside a loop")
    for lt in loops:
        b = _bounds(lt)
        if b is None or b[0] <= loop_iter <= b[1]:
            return
    many = len(loops) > 1
    raise ValueError(
        f"loop_iter={loop_iter} matches no iteration: the innermost loop"
        f"{'s' if many else ''} of {whom} {'are' if many else 'is'} "
        + ", ".join("loop " + _loop_text(lt) for lt in loops)
    )
