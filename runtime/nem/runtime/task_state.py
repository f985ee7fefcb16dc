"""The run-time state of the instruction streams, of one task instance and of the
token it completes.

Kept apart from the scheduler that creates and advances them: a session reads
tokens (`Session` inspection) and the replay log keys tasks by `task_key`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nem.runtime.critical_path import START
from nem.runtime.memory import RegionInst

if TYPE_CHECKING:
    from nem.runtime.critical_path import Link
    from nem.runtime.engine import Instr, LoopTpl, TaskTpl

VectorClock = dict[int, int]
"""A vector clock: lane -> the last epoch of it known (`nem.runtime.checks`)."""

EMPTY: VectorClock = {}
"""The empty vector clock (shared: clocks are replaced, never mutated in place)."""


class Frame:
    """An instruction stream: the program body, or one iteration of a loop."""

    __slots__ = (
        "body",
        "pc",
        "parent",
        "depth",
        "iv",
        "names",
        "env",
        "K",
        "time",
        "blocked",
        "loop",
        "live",
        "finished",
        "looprun",
        "index",
        "done_vc",
        "done_time",
        "ords",
        "label",
        "chain",
        "done_chain",
        "kind",
    )
    # slot of an SSA value (`CompiledProgram.values`) -> its Token or
    # RegionInst, which the compiled program's references tell apart;
    # emptied when the stream is done (no token <-> task <-> frame cycles)
    env: dict[int, Any]
    depth: int
    blocked: list[Token] | None  # tokens waited on
    loop: LoopRun | None  # the LoopRun whose streams this stream waits for
    # the critical-path links that end at `time` and `done_time` (timed mode
    # with a roofline tally, `nem.runtime.critical_path`; else None), and
    # what `time` waited for (`critical_path.KINDS`: start, wait, window)
    chain: Link | None
    done_chain: Link | None
    kind: str

    def __init__(
        self,
        body: list[Instr],
        parent: Frame | None,
        iv: tuple[int, ...],
        names: tuple[str, ...],
        K: VectorClock,
        time: int,
        looprun: LoopRun | None = None,
        index: int | None = None,
        ords: tuple[int, ...] = (),
        chain: Link | None = None,
        kind: str = START,
    ) -> None:
        self.body = body
        self.pc = 0
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.iv = iv
        self.ords = ords
        self.names = names
        self.env = {}
        self.K = K
        self.time = time
        self.blocked = None
        self.loop = None
        self.live = 0  # incomplete tasks and loops this stream issued
        self.finished = False
        self.looprun = looprun
        self.index = index
        self.done_vc = EMPTY
        self.done_time = time
        self.label: str | None = None
        self.chain = self.done_chain = chain
        self.kind = kind

    def iteration(self) -> str:
        """`i=2, j=0` (built once: every task of the stream's trace entry names it)."""
        if self.label is None:
            self.label = ", ".join(f"{n}={v}" for n, v in zip(self.names, self.iv))
        return self.label


class LoopRun:
    """One execution of a loop statement: its iterations' streams and what
    the statements after it learn from them."""

    __slots__ = (
        "tpl",
        "frame",
        "lo",
        "hi",
        "next",
        "window",
        "active",
        "done",
        "prefix_vc",
        "prefix_time",
        "max_active",
        "streams_left",
        "end_vc",
        "end_time",
        "last_open_vc",
        "prefix_chain",
        "end_chain",
    )
    # completed iteration -> (done_vc, done_time, done_chain)
    done: dict[int, tuple[VectorClock, int, Link | None]]
    last_open_vc: VectorClock | None
    prefix_chain: Link | None  # the critical-path links ending at `prefix_time`, `end_time`
    end_chain: Link | None

    def __init__(self, tpl: LoopTpl, frame: Frame, lo: int, hi: int) -> None:
        self.tpl = tpl
        self.frame = frame
        self.lo = lo
        self.hi = hi
        self.next = lo
        self.window = lo
        self.active = 0
        self.done = {}
        self.prefix_vc = EMPTY
        self.prefix_time = frame.time
        self.max_active = 0
        self.streams_left = hi - lo + 1  # iteration streams that have not reached their end
        self.end_vc = EMPTY  # what the ended streams know (LOOP_END)
        self.end_time = frame.time
        self.last_open_vc = None  # what the last iteration knew when it opened
        self.prefix_chain = self.end_chain = frame.chain


class Token:
    __slots__ = ("task", "done", "vc", "end", "waiters", "consumed", "tpl", "chain")
    tpl: TaskTpl | None
    chain: Link | None  # its task's critical-path link, once it completed
    waiters: list[Frame | TaskInst] | None  # streams and tasks blocked on it

    def __init__(self, task: TaskInst | None = None) -> None:
        self.task = task
        self.tpl = task.tpl if task is not None else None
        self.done = False
        self.vc = EMPTY
        self.end = 0
        self.waiters = None
        self.consumed = False
        self.chain = None


Unit = tuple[int, str, int]
"""A unit instance: (engine, unit type, index)."""


class TaskInst:
    __slots__ = (
        "tpl",
        "frame",
        "seq",
        "npending",
        "deps",
        "regions",
        "token",
        "kvc",
        "vc",
        "lane",
        "epoch",
        "ready_time",
        "start",
        "end",
        "engine",
        "unit",
        "issue_time",
        "chain",
        "kind",
    )
    # set when the task is issued (`Scheduler._issue`); `deps` and `token`
    # are cleared when it completes, `unit` and `engine` set when it is placed
    issue_time: int
    kvc: VectorClock
    regions: list[RegionInst]
    token: Token | None
    deps: list[Token] | None
    ready_time: int
    engine: int | None
    unit: Unit | None
    # the critical-path link ending at its issue time, then at its ready
    # time, then at its start (`Scheduler`), then its own once it ran, and
    # the kind of that wait (`critical_path.KINDS`)
    chain: Link | None
    kind: str

    def __init__(self, tpl: TaskTpl, frame: Frame, seq: int) -> None:
        self.tpl = tpl
        self.frame = frame
        self.seq = seq
        self.npending = 0
        self.vc = EMPTY
        self.lane = 0
        self.epoch = 0
        self.start = self.end = 0
        self.engine = None
        self.unit = None

    def iteration(self) -> str:
        return self.frame.iteration()

    def __repr__(self) -> str:
        it = self.iteration()
        return (
            f"<Task {self.tpl.label} ({self.tpl.opcode}) line {self.tpl.line}"
            + (f" {it}" if it else "")
            + ">"
        )


def task_key(t: TaskInst) -> tuple[int, tuple[int, ...]]:
    """A task instance's identity across schedules: its statement and loop variables."""
    return (t.tpl.seq_id, t.frame.iv)
