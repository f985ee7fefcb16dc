"""Schedule hunting: K seeded random schedules and the exhaustive explorer.

Both run many schedules of one loaded program from the same initial memory
and compare what they produce; both use every core (`jobs`, default all)
with results independent of the number of jobs: schedules are numbered,
workers (forked processes that share the loaded program) return a compact
outcome per schedule (status, races, deadlock, a digest of every buffer,
never a copy of memory), and the parent combines outcomes in schedule order.
Memory therefore does not grow with the number of schedules.

The explorer (`explore`) enumerates the distinct interleavings of a small
program: two schedules are equivalent when they order every pair of
conflicting accesses (overlapping bytes, one a write) the same way, so one
schedule per equivalence class (Mazurkiewicz trace) is run.  The
happens-before order of NEM task instances (deps, waits and `.sync` in a
stream, the `@max_in_flight` window, loop and program ends: semantics) does
not depend on the schedule, so the classes are exactly the acyclic
orientations of the conflicting pairs it leaves unordered (the races): the
explorer records one execution, computes the races from its vector clocks,
enumerates their orientations with pruning (an orientation implied by earlier
ones is not a choice), and replays one topological order of each; a replay
that cannot follow its order would mean a schedule-dependent happens-before
and is reported.  Decision D-SEM-EXPLORE.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from nem.dialect.diagnostics import Diagnostic
    from nem.runtime.checks import Access, Deadlock, Race
    from nem.runtime.memory import Memory
    from nem.runtime.session import Program, RunResult, RunSettings, Session
    from nem.runtime.task_state import TaskInst

    class HuntSettings(RunSettings, Protocol):
        """The interpreter whose schedule options a hunt sets for each schedule
        (`nem.runtime.api.NemInterpreter`)."""

        policy: str
        seed: int


MAX_EXPLORE_TASKS = 4000
"""Task instances beyond which `--explore` refuses (use `--schedules K`)."""

WorkerState = tuple["HuntSettings", "Program", "Memory"]
"""What forked workers read (`worker_state`): the interpreter, the loaded
program and its initial memory."""

_STATE: ContextVar[WorkerState] = ContextVar("hunt_worker_state")
"""The state of the innermost `sharing` block: a context variable, not a
module global a hunt assigns (issue 36 item 4), so it is scoped to the block,
restored on the way out also by an exception, and per thread."""


@contextlib.contextmanager
def sharing(state: WorkerState) -> Iterator[None]:
    """Within the block, `worker_state()` is `state` (also in the workers
    `pmap` forks inside it)."""
    token = _STATE.set(state)
    try:
        yield
    finally:
        _STATE.reset(token)


T = TypeVar("T")
R = TypeVar("R")

TaskKey = tuple[int, tuple[int, ...]]
"""A task instance across schedules (`task_state.task_key`)."""


def default_jobs() -> int:
    return max(
        1,
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
    )


def pmap(
    fn: Callable[[T], R], items: Sequence[T], jobs: int | None, state: WorkerState, desc: str
) -> list[R]:
    """`[fn(x) for x in items]` on `jobs` forked workers (results in item order),
    with a progress bar on stderr when it is a terminal.  `state` is what `fn`
    reads through `worker_state()` (inherited by the forked workers)."""
    jobs = default_jobs() if not jobs else jobs
    bar = _progress(len(items), desc)
    with sharing(state), contextlib.closing(bar):
        if jobs <= 1 or len(items) <= 1:
            out = []
            for x in items:
                out.append(fn(x))
                bar.update(1)
            return out
        ctx = multiprocessing.get_context("fork")
        # each worker sets the state itself: one the pool forks again from its
        # own thread (to replace a lost worker) starts with an empty context
        with ctx.Pool(min(jobs, len(items)), _STATE.set, (state,)) as pool:
            out = []
            for r in pool.imap(fn, items, chunksize=max(1, len(items) // (8 * jobs))):
                out.append(r)
                bar.update(1)
            return out


def worker_state() -> WorkerState:
    state = _STATE.get(None)
    assert state is not None, "worker_state() is read inside pmap or a hunt"
    return state


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, desc: str) -> _NoBar | _RichBar:
    """A transient rich progress bar on stderr, only on a terminal (logs never
    get carriage returns); the same library as nem-run's task bar."""
    if not sys.stderr.isatty() or total < 2:
        return _NoBar()
    return _RichBar(total, desc)


class _RichBar:
    def __init__(self, total: int, desc: str) -> None:
        from rich.console import Console
        from rich.progress import Progress

        self.bar = Progress(console=Console(stderr=True), transient=True)
        self.task = self.bar.add_task(desc, total=total)
        self.bar.start()

    def update(self, n: int) -> None:
        self.bar.advance(self.task, n)

    def close(self) -> None:
        self.bar.stop()


# ---------------------------------------------------------------------------
# one schedule
# ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one schedule produced (picklable, small)."""

    result: RunResult
    digests: list[bytes]
    order: list[TaskKey] | None = None  # task keys in execution order (explorer)
    diverged: str | None = None


def _session(
    policy: str,
    seed: int,
    choose: Callable[[list[TaskInst]], TaskInst] | None = None,
    log: bool = False,
) -> tuple[Session, Memory]:
    from nem.runtime.session import Session

    interp, prog, initial = worker_state()
    saved = (interp.policy, interp.seed)
    interp.policy, interp.seed = policy, seed
    try:
        mem = initial.clone()
        s = Session(interp, prog, mem)
    finally:
        interp.policy, interp.seed = saved
    s.sched.choose = choose
    if log:
        s.sched.log = []
    return s, mem


def run_seed(seed: int) -> Outcome:
    s, mem = _session("random", seed)
    r = s.run_to_end()
    return Outcome(r, mem.digests())


class _Diverged(Exception):
    pass


def run_order(order: list[TaskKey]) -> Outcome:
    """Replay the schedule that runs task instances in `order`."""
    pos = [0]

    def choose(ready: list[TaskInst]) -> TaskInst:
        want = order[pos[0]] if pos[0] < len(order) else None
        for t in ready:
            if (t.tpl.seq_id, t.frame.iv) == want:
                pos[0] += 1
                return t
        raise _Diverged(f"task {want} is not ready at step {pos[0] + 1}")

    s, mem = _session("source", 0, choose)
    try:
        r = s.run_to_end()
    except _Diverged as e:
        return Outcome(s.result(), mem.digests(), order, str(e))
    return Outcome(r, mem.digests(), order)


# ---------------------------------------------------------------------------
# random schedules
# ---------------------------------------------------------------------------


def first_difference(
    interp: HuntSettings,
    prog: Program,
    initial: Memory,
    run_a: Callable[[], tuple[Session, Memory]],
    run_b: Callable[[], tuple[Session, Memory]],
) -> tuple[str, int] | None:
    """(buffer, byte) where two (deterministic) schedules' final memories first differ."""
    mems = []
    with sharing((interp, prog, initial)):
        for run in (run_a, run_b):
            s, mem = run()
            s.run_to_end()
            mems.append(mem)
    return mems[0].first_difference(mems[1])


def random_schedules(
    interp: HuntSettings, prog: Program, k: int, seed: int, jobs: int | None
) -> tuple[list[RunResult], tuple[int, int, str, int] | None, Memory]:
    """K random schedules (seeds seed..seed+k-1): (results, difference, final memory
    of the last schedule); difference is None or (seed_a, seed_b, buffer, byte)."""
    initial = prog.memory.clone()
    outs = pmap(run_seed, list(range(seed, seed + k)), jobs, (interp, prog, initial), "schedules")
    diff = None
    for j, o in enumerate(outs[1:], 1):
        if o.digests != outs[0].digests:
            where = first_difference(
                interp,
                prog,
                initial,
                lambda: _session("random", seed),
                partial(_session, "random", seed + j),
            )
            diff = (seed, seed + j, *where) if where else None
            break
    with sharing((interp, prog, initial)):
        # the memory --output reads: the last schedule's (deterministic, re-run)
        s, last = _session("random", seed + k - 1)
        s.run_to_end()
    return [o.result for o in outs], diff, last


# ---------------------------------------------------------------------------
# the explorer
# ---------------------------------------------------------------------------


@dataclass
class RaceWitness:
    race: Race
    schedule: list[str]  # a schedule after which both tasks are ready


@dataclass
class Exploration:
    schedules: int
    complete: bool
    limit: int
    races: list[RaceWitness] = field(default_factory=list)
    deadlocks: list[tuple[Deadlock, list[str]]] = field(default_factory=list)
    outcomes: int = 0  # distinct final memories
    errors: list[Diagnostic] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)
    task_instances: int = 0
    too_large: bool = False


def _bits(x: int) -> Iterable[int]:
    while x:
        low = x & -x
        yield low.bit_length() - 1
        x ^= low


def _orientations(
    n: int, pred: list[int], pairs: list[tuple[int, int]], limit: int
) -> Iterator[list[int]]:
    """Acyclic orientations of `pairs` over the DAG `pred` (transitively closed
    predecessor bitsets); yields (closed pred bitsets) per class, at most `limit`
    (then stops; the caller sees it got `limit`)."""
    succ = [0] * n
    for b in range(n):
        for a in _bits(pred[b]):
            succ[a] |= 1 << b
    count = 0
    stack = [(0, pred, succ)]
    while stack:
        k, p, s = stack.pop()
        while k < len(pairs):
            a, b = pairs[k]
            if (p[b] >> a) & 1 or (p[a] >> b) & 1:
                k += 1  # already ordered by earlier choices: not a choice
                continue
            break
        if k == len(pairs):
            yield p
            count += 1
            if count >= limit:
                return
            continue
        a, b = pairs[k]
        for u, v in ((b, a), (a, b)):  # pushed second = explored first: a before b
            p2, s2 = list(p), list(s)
            before, after = p2[u] | (1 << u), s2[v] | (1 << v)
            for x in _bits(before):
                s2[x] |= after
            for y in _bits(after):
                p2[y] |= before
            stack.append((k + 1, p2, s2))


def _topo(n: int, pred: list[int]) -> list[int]:
    placed, out = 0, list[int]()
    while len(out) < n:
        for i in range(n):
            if not (placed >> i) & 1 and pred[i] & ~placed == 0:
                out.append(i)
                placed |= 1 << i
                break
    return out


def explore(
    interp: HuntSettings, prog: Program, max_schedules: int, jobs: int | None
) -> Exploration:
    """Run one schedule of every distinct interleaving (up to `max_schedules`)."""
    from nem.runtime.checks import Race

    initial = prog.memory.clone()
    with sharing((interp, prog, initial)):
        s, first_mem = _session("source", 0, log=True)
        first = s.run_to_end()
        prog.memory = first_mem  # what --output reads: the source-order schedule's result
    log = s.sched.log or []
    ex = Exploration(1, True, max_schedules, task_instances=len(log))
    if first.deadlock is not None or first.error is not None:
        # happens-before is schedule-independent: every schedule reaches the same state
        if first.deadlock is not None:
            ex.deadlocks.append((first.deadlock, [str(e[5]) for e in log]))
        if first.error is not None:
            ex.errors.append(first.error)
        ex.outcomes = 1
        return ex
    n = len(log)
    if n > MAX_EXPLORE_TASKS:
        ex.too_large, ex.complete = True, False
        return ex
    pred = [0] * n
    for b in range(n):
        vb = log[b][1]
        for a in range(b):
            if vb.get(log[a][2], 0) >= log[a][3]:
                pred[b] |= 1 << a
    pairs, conflicts = [], {}
    for b in range(n):
        for a in range(b):
            if (pred[b] >> a) & 1:
                continue
            hit = _conflict(log[a][4], log[b][4])
            if hit is not None:
                pairs.append((a, b))
                conflicts[(a, b)] = hit
    keys = [e[0] for e in log]
    orders = [[keys[i] for i in _topo(n, p)] for p in _orientations(n, pred, pairs, max_schedules)]
    ex.schedules = len(orders)
    ex.complete = len(orders) < max_schedules or not _more(n, pred, pairs, max_schedules)
    outs = pmap(run_order, orders, jobs, (interp, prog, initial), "explore")
    ex.outcomes = len({tuple(o.digests) for o in outs})
    for o in outs:
        if o.diverged:
            ex.diverged.append(o.diverged)
        if o.result.deadlock is not None:
            ex.deadlocks.append((o.result.deadlock, [str(k) for k in o.order or ()]))
        if o.result.error is not None:
            ex.errors.append(o.result.error)
    memory = prog.memory
    for (a, b), (lvl, lo, hi, wa, wb) in conflicts.items():
        past = pred[a] | pred[b]
        sched = [str(log[i][5]) for i in _topo(n, pred) if (past >> i) & 1]
        level = memory.by_id[lvl]
        buf, blo, bhi = level.name, lo, hi
        for info in memory.all_buffers():
            if info.level == level.name and info.offset <= lo < info.offset + info.size:
                buf, blo, bhi = info.label, lo - info.offset, hi - info.offset
                break
        ex.races.append(
            RaceWitness(
                Race(log[a][5], wa, log[b][5], wb, level.name, lo, hi, buf, blo, bhi), sched
            )
        )
    return ex


def _more(n: int, pred: list[int], pairs: list[tuple[int, int]], limit: int) -> bool:
    """Does the space hold more than `limit` classes?"""
    return sum(1 for _ in _orientations(n, pred, pairs, limit + 1)) > limit


def _conflict(xs: list[Access], ys: list[Access]) -> tuple[int, int, int, bool, bool] | None:
    """The first conflicting pair of accesses: (level, lo, hi, x writes, y writes)."""
    from nem.runtime.checks import common_bytes

    for lx, ax, bx, wx, _, mx in xs:
        for ly, ay, by, wy, _, my in ys:
            if lx == ly and ax < by and ay < bx and (wx or wy):
                both = common_bytes(ax, bx, mx, ay, by, my)  # elements (D-HAZ-ELEMENTS)
                if both is not None:
                    return lx, both[0], both[1], wx, wy
    return None
