"""The run-time state of one task instance and of the token it completes.

Kept apart from the scheduler that creates and advances them: a session reads
tokens (`Session` inspection) and the replay log keys tasks by `task_key`.
"""

from __future__ import annotations

from nem.runtime.memory import RegionInst

EMPTY: dict = {}
"""The empty vector clock (shared: clocks are replaced, never mutated in place)."""


class Token:
    __slots__ = ("task", "done", "vc", "end", "waiters", "consumed", "tpl")

    def __init__(self, task=None):
        self.task = task
        self.tpl = task.tpl if task is not None else None
        self.done = False
        self.vc = EMPTY
        self.end = 0
        self.waiters = None
        self.consumed = False


Unit = tuple[int, str, int]
"""A unit instance: (engine, unit type, index)."""


class TaskInst:
    __slots__ = ("tpl", "frame", "seq", "npending", "deps", "regions", "token", "kvc", "vc",
                 "lane", "epoch", "ready_time", "start", "end", "engine", "unit", "issue_time")
    # set when the task is issued (`Scheduler._issue`); `deps` and `token`
    # are cleared when it completes, `unit` and `engine` set when it is placed
    issue_time: int
    kvc: dict[int, int]
    regions: list[RegionInst]
    token: Token | None
    deps: list[Token] | None
    ready_time: int
    engine: int | None
    unit: Unit | None

    def __init__(self, tpl, frame, seq):
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
        return f"<Task {self.tpl.label} ({self.tpl.opcode}) line {self.tpl.line}" + \
            (f" {it}" if it else "") + ">"


def task_key(t: TaskInst) -> tuple:
    """A task instance's identity across schedules: its statement and loop variables."""
    return (t.tpl.seq_id, t.frame.iv)
