"""Replaying a functional run of an unchanged program (decision D-RT-REPLAY).

In functional mode with the default `source` policy, everything the
scheduler decides is a function of the program, the device topology and
the run options, never of the data: loop bounds, region offsets, shapes and
attributes are expressions of constants and loop variables (CONST-05), the
policy picks the earliest issued ready task, placement is round-robin from
a fresh counter, and race detection (D-RT-RACE) compares happens-before
clocks and byte ranges, not values.  So a second run performs exactly the
same sequence of data effects (task, region instances, attributes) and ends
in the same scheduler state (counts, races, trace, unconsumed tokens).

The first eligible run of a program on a memory records that sequence and
its final state (`Plan`); later eligible runs on the same memory execute
only the data effects and then take over the recorded final state.  An
effect is recorded as the call the scheduler made (`task_effects.prepare_compute`
/ `prepare_move`, the one home of execution semantics): the kernel, its
operand views and everything that depends on the region instances only are
bound when the scheduler first runs the task, so a replay pays for the
numerics alone.  When a data effect fails during a replay (a kernel's
`NumericError`, say), the scheduler re-walks the first steps without their
data effects (they are already in memory) and runs the failing step for
real, so the error, its location and the partial state are those of a
normal run.

Not replayed (always scheduled): timed mode, the `random` policy, the
explorer (`choose`), sessions that step or stop at breakpoints, and
programs whose task count is not static or exceeds `MAX_EFFECTS`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from nem.dialect.gc_pause import gc_paused
from nem.runtime.checks import DeadlockError
from nem.runtime.engine import CompiledProgram, RunError, TaskTpl

if TYPE_CHECKING:
    from nem.runtime.memory import Memory

# scheduler fields that make up the state at the end of a run; containers
# are copied when a replay takes them over
STATE = (
    "seq",
    "steps",
    "live",
    "frames",
    "runnable",
    "counts",
    "busy",
    "unit_free",
    "rr",
    "loop_max_active",
    "now",
    "total_cycles",
    "finished",
    "deadlock",
    "satisfied",
    "root",
    "race",
    "trace",
    "ready_heap",
    "ready_list",
)


PlanKey = tuple[object, bool, bool]
"""What a plan depends on besides its program and memory: (topology, races, trace)."""


@dataclass
class Plan:
    """One recorded run: its data effects in order and its final state."""

    memory: Memory
    key: PlanKey
    # task_effects.prepare_*: calls in run order
    effects: list[Callable[[], None]] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)  # the scheduler's `STATE` fields
    # (task template, produced, consumed)
    tokens: list[tuple[TaskTpl, int, int]] = field(default_factory=list)


class Replayable(Protocol):
    """What recording and replaying read and set of a run's scheduler
    (`nem.runtime.scheduler.Scheduler`; the `STATE` fields are set by name)."""

    recording: Plan | None
    planning: bool
    dry_steps: int

    @property
    def timed(self) -> bool: ...
    @property
    def policy(self) -> str: ...
    @property
    def choose(self) -> object: ...
    @property
    def log(self) -> object: ...
    @property
    def steps(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def cp(self) -> CompiledProgram: ...
    @property
    def topo_key(self) -> object: ...
    @property
    def race(self) -> object: ...
    @property
    def tracing(self) -> bool: ...
    @property
    def memory(self) -> Memory: ...
    @property
    def finished(self) -> bool: ...
    @property
    def live(self) -> object: ...
    @property
    def deadlock(self) -> object: ...

    def step(self) -> object: ...


# the largest run recorded, in task instances (about 3 MB): a plan holds every instance's
# regions (a few hundred bytes each), so a long loop is scheduled each time
# and memory stays independent of its trip count (D-RT-LOOP)
MAX_EFFECTS = 10_000


def not_eligible(s: Replayable) -> str | None:
    """Why scheduler `s`'s run is always scheduled, never recorded or
    replayed; None when it is eligible."""
    if s.timed:
        return "timed mode"
    if s.policy != "source":
        return "random schedules"
    if s.choose is not None or s.log is not None or s.steps or s.seq:
        return "an explored or stepped run"
    n = s.cp.static_task_count()
    if n is None:
        return "a loop whose bounds are not constants (no static task count)"
    if n > MAX_EFFECTS:
        return f"{n} task instances, above {MAX_EFFECTS:,}"
    return None


def key_of(s: Replayable) -> PlanKey | None:
    """What a plan depends on besides the program and its memory; None when
    the run is not eligible."""
    if not_eligible(s) is not None:
        return None
    return (s.topo_key, s.race is not None, s.tracing)


def start(s: Replayable) -> Plan | None:
    """The plan to replay for scheduler `s`, or None (then `s.recording` says
    whether this run records one)."""
    key = key_of(s)
    s.recording = None
    if key is None:
        return None
    plan = s.cp.replay
    if isinstance(plan, Plan) and plan.memory is s.memory and plan.key == key:
        return plan
    s.recording = Plan(s.memory, key)
    return None


@contextmanager
def collector_paused(recording: bool) -> Iterator[None]:
    """Python's cyclic garbage collector paused while a run records its plan
    (D-RT-GC): such a run allocates at most MAX_EFFECTS instances' worth of
    objects (a few MB), and the collections it would trigger mostly rescan the
    objects of the program just loaded (a quarter of a first run's time).
    Its garbage is collected after the run; a collector the process had
    disabled stays disabled (`nem.dialect.gc_pause`)."""
    with gc_paused(recording):
        yield


def finish_recording(s: Replayable) -> None:
    """Keep the recorded plan of a run that completed."""
    plan = s.recording
    s.recording = None
    if plan is None or not s.finished or s.live or s.deadlock is not None:
        return
    plan.final = {k: getattr(s, k) for k in STATE}
    plan.tokens = [(t, t.produced, t.consumed) for t in s.cp.tasks]
    s.cp.replay = plan


def prepare(s: Replayable) -> bool:
    """Record the plan of scheduler `s`'s run without running its data effects
    (decision D-RT-PREPARE): every task is scheduled, race-checked and bound
    to its operands as in a run, and nothing is read or written.  True when a
    plan for `s`'s memory and options is ready (recorded now or before); False
    when the run is not eligible or its walk stopped (a run-time error or a
    deadlock, which the run itself then reports, since neither depends on the
    data)."""
    if start(s) is not None:
        return True
    plan = s.recording
    if plan is None:
        return False
    s.planning = True
    try:
        with collector_paused(True):
            while s.step() is not None:
                pass
    except (RunError, DeadlockError):
        return False
    finally:
        s.planning = False
    finish_recording(s)
    if s.cp.replay is not plan:
        return False
    s.memory.commit()
    return True


def replay(
    s: Replayable, plan: Plan, progress: Callable[[int], object] | None = None
) -> int | None:
    """Run `plan`'s data effects on `s`'s memory and take over its final
    state; returns the number of tasks run, or None when an effect failed at
    step i (then `s.dry_steps` = i and the caller runs normally)."""
    n = 0  # effects done
    step = 1024 if progress is not None else len(plan.effects)  # effects between reports
    while n < len(plan.effects):
        try:
            for effect in plan.effects[n : n + step]:
                effect()
                n += 1
        except Exception:  # noqa: BLE001 - re-run below, where a normal run reports it
            s.dry_steps = n
            return None
        if progress is not None:
            progress(n)
    for k, v in plan.final.items():
        setattr(s, k, v.copy() if isinstance(v, (dict, list, set, deque)) else v)
    for t, produced, consumed in plan.tokens:
        t.produced, t.consumed = produced, consumed
    return n
