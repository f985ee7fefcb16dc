"""The execution engine: instruction streams, task instances, token bookkeeping,
loop windows, placement, schedule policies and the timed model.

Execution model (decisions D-RT-STREAM, D-RT-LOOP, D-RT-SCHED):

* The program body and every loop iteration are *instruction streams*
  (`Frame`).  A stream's program counter advances over its instructions,
  creating task instances as it goes; it stops at a `wait` or a `.sync` task
  until the tokens are satisfied (TASK-05, TASK-08/09), and at a loop until
  every iteration's stream has reached its end (`semantics.LOOP_END`:
  `endloop` is not a barrier, tasks of the last iterations that no wait
  covered may still run, D-SEM-ENDLOOP).
* A loop opens iteration j only when every iteration <= j - N has completed
  (`semantics.may_open`, `@max_in_flight(N)`, default 1: LOOP-01, LOOP-02, LOOP-05, LOOP-06);
  iterations are created lazily, so memory is proportional to N, not to the
  trip count.  An iteration completes when its stream has reached its end
  and all it issued (nested loops too) has completed (`ITERATION_END`); the
  program completes when every task has (`PROGRAM_END`).
* A task is ready when all its dependency tokens are satisfied (EXEC-01).
  The policy picks the next ready task: `source` = the earliest issued,
  `random` = uniform among ready tasks (seeded), `timed` = the one that can
  start earliest on its unit (ties: issue order).
* Placement: a task touching L1[k] runs on engine k (PLACE-01), `@seq_engine(k)`
  on engine k (PLACE-04), others on any engine (PLACE-03: round-robin in
  functional mode, earliest free in timed mode).  Units by op (RES-07), and
  `@resource(U[i])` per the Target Resource Validity Rule (RES-03/04/05).
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypedDict

from xdsl.ir import Operation

from nem.dialect.diagnostics import SourceLoc
from nem.dialect.semantics.cost import DEFAULT_PROFILE, Profile, UnitChars, transfer_bytes
from nem.dialect.semantics.streams import LOOP_END, may_open
from nem.dialect.semantics.units import DEVICE_UNITS, bind_unit
from nem.runtime import replay
from nem.runtime.checks import (
    Access,
    Deadlock,
    DeadlockError,
    RaceDetector,
    TaskRef,
    Unconsumed,
    join,
)
from nem.runtime.critical_path import AFTER_LOOP, DEP, UNIT, WAIT, WINDOW
from nem.runtime.deadlock_report import witness
from nem.runtime.engine import (
    COMPUTE,
    CompiledProgram,
    LoopTpl,
    RegionTpl,
    RunError,
    TaskTpl,
    ValueRef,
    WaitTpl,
    ev,
    task_attrs,
)
from nem.runtime.kernel_support import Kernel
from nem.runtime.memory import Memory, RegionInst
from nem.runtime.race_horizon import live_vcs
from nem.runtime.task_cost import task_work
from nem.runtime.task_effects import prepare_compute, prepare_move
from nem.runtime.task_state import (
    EMPTY,
    Frame,
    LoopRun,
    TaskInst,
    Token,
    Unit,
    VectorClock,
    task_key,
)

if TYPE_CHECKING:
    from nem.runtime.critical_path import Link
    from nem.runtime.roofline_tally import Tally
    from nem.runtime.trace import TraceEntry

EFFECTS = 1024
"""Bound data effects a scheduler keeps for reuse (`Scheduler._effect`)."""


def _frozen(v: object) -> object:
    """A resolved attribute value as a dictionary key (lists become tuples)."""
    return tuple(_frozen(x) for x in v) if isinstance(v, list) else v


class Topology(TypedDict):
    """The units a run has: engines, and the unit counts per engine and device-wide."""

    num_engines: int
    per_engine: dict[str, int]
    device_units: dict[str, int]
    l2: int  # bytes of L2, and of each engine's L1
    l1: int


Placement = tuple[int | None, str, int | None, list[Unit]]
"""(engine or None for any, unit type, fixed instance index or None, candidate units)."""

AccessLog = tuple[tuple[int, tuple[int, ...]], VectorClock, int, int, list[Access], TaskRef]
"""What the explorer logs of a task: (key, vc, lane, epoch, accesses, ref)."""


class Scheduler:
    def __init__(
        self,
        cp: CompiledProgram,
        memory: Memory,
        *,
        topology: Topology,
        unit_chars: UnitChars | None = None,
        mode: str = "functional",
        policy: str = "source",
        seed: int = 0,
        kernels: Mapping[str, Kernel] | None = None,
        races: bool = True,
        trace: bool = True,
        profile: Profile | None = None,
        file: str = "<input>",
    ) -> None:
        self.cp = cp
        self.memory = memory
        self.mode = mode
        self.timed = mode == "timed"
        self.policy = policy
        self.rng = random.Random(seed)
        self.kernels = kernels if kernels is not None else {}
        self.race = RaceDetector(memory) if races else None
        self.tracing = trace
        self.trace: list[TraceEntry] = []
        self.profile = {k: dict(v) for k, v in DEFAULT_PROFILE.items()}
        for k, v in (profile or {}).items():
            self.profile.setdefault(k, {}).update(v)
        self.unit_chars = unit_chars or {}
        self.topology = topology  # dict: num_engines, per_engine{}, device_units{}
        self.file = file
        self.seq = 0
        self.steps = 0
        self.ready_heap: list[tuple[int, TaskInst]] = []
        self.ready_list: list[TaskInst] = []
        self.live: dict[int, TaskInst] = {}
        self.frames: set[Frame] = set()
        self.runnable: deque[Frame] = deque()
        self.counts: dict[str, int] = {}
        self.busy: dict[Unit, int] = {}
        self.unit_free: dict[Unit, int] = {}
        # the critical-path link of the task that ends at each `unit_free`
        # (with a roofline tally, D-RT-ROOFLINE; `nem.runtime.critical_path`)
        self.unit_chain: dict[Unit, Link] = {}
        self.rr: dict[tuple[Unit, int], int] = {}
        self.loop_max_active: dict[int, int] = {}  # by the loop's line
        # `_effect`: bound data effects by task and regions
        self.effects: dict[tuple[object, ...], Callable[[], None]] = {}
        self.placed: dict[TaskTpl, Placement] = {}  # `_placement` by template
        # `_placement`'s results: (kind, opcode, resource, seq_engine, level
        # names of the regions) -> (engine, unit type, index, candidate units)
        self.placements: dict[tuple[str | int | tuple[str, int] | None, ...], Placement] = {}
        # what a replayed plan depends on in the topology (`replay.key_of`)
        self.topo_key = (
            topology["num_engines"],
            tuple(sorted(topology["per_engine"].items())),
            tuple(sorted(topology["device_units"].items())),
        )
        self.now = 0
        self.total_cycles = 0
        self.finished = False
        self.deadlock: Deadlock | None = None
        self.satisfied: dict[str, int] = {}
        for tpl in cp.tasks:
            tpl.produced = tpl.consumed = 0
        self.root = Frame(cp.body, None, (), (), EMPTY, 0)
        self.frames.add(self.root)
        self.runnable.append(self.root)
        self._chosen: TaskInst | None = None
        # explorer: picks the next task among the ready ones
        self.choose: Callable[[list[TaskInst]], TaskInst] | None = None
        self.log: list[AccessLog] | None = None  # explorer: what each task did
        self.recording: replay.Plan | None = None  # D-RT-REPLAY: this run's effects
        self.dry_steps = 0  # D-RT-REPLAY: steps whose effects are already in memory
        self.planning = False  # D-RT-PREPARE: effects are bound and recorded, not run
        self.roofline: Tally | None = None  # timed mode (D-RT-ROOFLINE)

    # ------------------------------------------------------------------ streams
    def _lookup(self, frame: Frame, ref: ValueRef) -> Frame:
        f = frame
        for _ in range(frame.depth - ref.depth):
            assert f.parent is not None  # a reference is to an enclosing stream's value
            f = f.parent
        return f

    def _token(self, frame: Frame, ref: ValueRef) -> Token:
        f = self._lookup(frame, ref)
        tok: Token | None = f.env.get(ref.slot)
        if tok is None:  # forward reference (MLIR input): a placeholder
            tok = f.env[ref.slot] = Token()
        return tok

    def _advance(self, frame: Frame) -> None:
        body = frame.body
        n = len(body)
        memory = self.memory
        while frame.pc < n:
            ins = body[frame.pc]
            if ins.__class__ is RegionTpl:
                try:
                    frame.env[ins.slot] = ins.instantiate(memory, frame.iv, frame.ords)
                except RunError as e:
                    e.where = e.where or frame.iteration()
                    raise
                frame.pc += 1
            elif ins.__class__ is TaskTpl:
                t = self._issue(frame, ins)
                frame.pc += 1
                if ins.sync:  # TASK-08/09: .async followed by wait
                    assert t.token is not None  # set by `_issue`
                    if not self._wait_on(frame, [t.token]):
                        return
            elif ins.__class__ is WaitTpl:
                toks = []
                for r in ins.dep_refs:
                    tok = self._token(frame, r)
                    if tok.task is None and r.depth == frame.depth and r.pos >= frame.pc:
                        raise RunError(
                            f"wait on token {self._ref_name(r)} that can never be produced: its "
                            f"task (line {self._ref_line(r)}) comes after this wait in the same "
                            "instruction stream",
                            "TASK-05",
                            ins.op,
                            frame.iteration(),
                            "issue the task before the wait (decision D-TOK-DEADLOCK)",
                        )
                    toks.append(tok)
                frame.pc += 1
                if not self._wait_on(frame, toks):
                    return
            elif ins.__class__ is LoopTpl:
                lo, hi = ev(ins.lower, frame.iv), ev(ins.upper, frame.iv)
                frame.pc += 1
                if lo > hi:
                    continue
                run = LoopRun(ins, frame, lo, hi)
                frame.loop = run
                frame.live += 1  # the loop is outstanding work of this stream
                self._open_iterations(run)
                return
            else:
                frame.pc += 1
        frame.finished = True
        looprun = frame.looprun
        if looprun is not None:  # what a loop's next iterations learn (the root's is unused)
            frame.done_vc = join(frame.done_vc, frame.K)
            self._stream_ended(looprun, frame)
        if frame.live == 0:
            self._frame_done(frame)

    def _stream_ended(self, run: LoopRun, frame: Frame) -> None:
        """An iteration's stream reached its end: once every iteration's has,
        the statements after `endloop` may issue (semantics.LOOP_END)."""
        run.streams_left -= 1
        run.end_vc = join(run.end_vc, frame.K)
        if frame.time > run.end_time:
            run.end_time = frame.time
            run.end_chain = frame.chain
        if run.streams_left == 0 and not LOOP_END.drains:
            self._resume_after_loop(run, run.end_vc, run.end_time, run.end_chain)

    def _resume_after_loop(
        self, run: LoopRun, vc: VectorClock, time: int, chain: Link | None
    ) -> None:
        parent = run.frame
        parent.K = join(parent.K, vc)
        if time > parent.time:
            parent.time, parent.chain, parent.kind = time, chain, AFTER_LOOP
        parent.loop = None
        self.runnable.append(parent)

    @staticmethod
    def _ref_name(r: ValueRef) -> str:
        op = r.value.owner
        name = op.token_name() if hasattr(op, "token_name") else None
        return name or "?"

    @staticmethod
    def _ref_line(r: ValueRef) -> int:
        owner = r.value.owner  # a region's or task's op
        loc = SourceLoc.of(owner) if isinstance(owner, Operation) else None
        return loc.line if loc else 0

    def _wait_on(self, frame: Frame, toks: list[Token]) -> bool:
        """Block `frame` on `toks`; True when all are already satisfied."""
        pending = False
        for tok in toks:
            if not tok.consumed:
                tok.consumed = True
                if tok.tpl is not None:
                    tok.tpl.consumed += 1
            if not tok.done:
                pending = True
                if tok.waiters is None:
                    tok.waiters = [frame]
                else:
                    tok.waiters.append(frame)
        if pending:
            frame.blocked = toks
            return False
        self._unblock(frame, toks)
        return True

    def _unblock(self, frame: Frame, toks: list[Token]) -> None:
        K = frame.K
        t = frame.time
        chain = frame.chain
        for tok in toks:
            K = join(K, tok.vc)
            if tok.end > t:
                t, chain = tok.end, tok.chain
        frame.K = K
        if t > frame.time:
            frame.time, frame.chain, frame.kind = t, chain, WAIT
        frame.blocked = None

    def _open_iterations(self, run: LoopRun) -> None:
        tpl = run.tpl
        parent = run.frame
        names = None
        while run.next <= run.hi and may_open(run.next - run.lo, run.window - run.lo, tpl.n):
            i = run.next
            run.next += 1
            if names is None:
                names = parent.names + (tpl.var,)
            later = run.prefix_time > parent.time
            f = Frame(
                tpl.body,
                parent,
                parent.iv + (i,),
                names,
                join(parent.K, run.prefix_vc),
                run.prefix_time if later else parent.time,
                run,
                i,
                parent.ords + (i - run.lo,),
                run.prefix_chain if later else parent.chain,
                WINDOW if later else parent.kind,
            )
            if run.next > run.hi:
                run.last_open_vc = f.K
            run.active += 1
            self.frames.add(f)
            self.runnable.append(f)
        if run.active > run.max_active:
            run.max_active = run.active
            key = tpl.line
            if run.active > self.loop_max_active.get(key, 0):
                self.loop_max_active[key] = run.active

    def _frame_done(self, frame: Frame) -> None:
        self.frames.discard(frame)
        frame.env = {}  # break token <-> task <-> frame cycles: memory stays O(window)
        run = frame.looprun
        if run is None:  # semantics.PROGRAM_END drains: every task has completed
            self.finished = frame is self.root
            return
        run.active -= 1
        assert frame.index is not None  # an iteration's stream
        run.done[frame.index] = (frame.done_vc, frame.done_time, frame.done_chain)
        while run.window in run.done:
            vc, t, chain = run.done.pop(run.window)
            run.prefix_vc = join(run.prefix_vc, vc)
            if t > run.prefix_time:
                run.prefix_time, run.prefix_chain = t, chain
            run.window += 1
        if run.window > run.hi:  # every iteration completed: the loop is done
            parent = run.frame
            if parent.looprun is not None:
                parent.done_vc = join(parent.done_vc, run.prefix_vc)
            if run.prefix_time > parent.done_time:
                parent.done_time, parent.done_chain = run.prefix_time, run.prefix_chain
            if LOOP_END.drains:
                self._resume_after_loop(run, run.prefix_vc, run.prefix_time, run.prefix_chain)
            parent.live -= 1
            if parent.live == 0 and parent.finished:
                self._frame_done(parent)
        else:
            self._open_iterations(run)

    # ------------------------------------------------------------------ tasks
    def _issue(self, frame: Frame, tpl: TaskTpl) -> TaskInst:
        self.seq += 1
        t = TaskInst(tpl, frame, self.seq)
        t.issue_time = frame.time
        t.chain, t.kind = frame.chain, frame.kind
        t.kvc = frame.K
        env_up = self._lookup
        regions: list[RegionInst] = []
        for ref, _w in tpl.region_refs:
            f = env_up(frame, ref) if ref.depth != frame.depth else frame
            r = f.env.get(ref.slot)
            if r is None:
                raise RunError(
                    "region used before its declaration",
                    None,
                    tpl.op,
                    frame.iteration(),
                    "declare the region before its first use",
                )
            regions.append(r)
        t.regions = regions
        # the token (a placeholder may exist from a forward reference)
        tok: Token | None = frame.env.get(tpl.slot)
        if tok is None or tok.task is not None:
            tok = Token(t)
        else:
            tok.task, tok.tpl = t, tpl
            if tok.consumed:
                tpl.consumed += 1
        frame.env[tpl.slot] = tok
        t.token = tok
        tpl.produced += 1
        deps = []
        npending = 0
        for ref in tpl.dep_refs:
            d = self._token(frame, ref)
            if not d.consumed:
                d.consumed = True
                if d.tpl is not None:
                    d.tpl.consumed += 1
            deps.append(d)
            if not d.done:
                npending += 1
                if d.waiters is None:
                    d.waiters = [t]
                else:
                    d.waiters.append(t)
        t.deps = deps
        t.npending = npending
        frame.live += 1
        self.live[t.seq] = t
        if npending == 0:
            self._make_ready(t)
        return t

    def _make_ready(self, t: TaskInst) -> None:
        rt = t.issue_time
        deps = t.deps
        assert deps is not None  # cleared only when the task completes
        for d in deps:
            if d.end > rt:
                rt = d.end
                t.chain, t.kind = d.chain, DEP
        t.ready_time = rt
        if self.policy == "source" and not self.timed and self.choose is None:
            heapq.heappush(self.ready_heap, (t.seq, t))
        else:
            self.ready_list.append(t)

    # ------------------------------------------------------------------ placement
    def _placement(self, t: TaskInst) -> Placement:
        """(engine or None for any, unit type, fixed instance index or None, count).

        A function of the topology and of what `bind_unit` reads (the task's kind
        and opcode, `@resource`, `@seq_engine` and its regions' levels), so it is
        computed once per distinct combination of the run (`placements`), not
        once per template: a first run of a long unrolled program binds a
        handful of combinations, not one per task."""
        tpl = t.tpl
        hit = self.placed.get(tpl)  # a template's regions keep their levels
        if hit is not None:
            return hit
        regions = t.regions
        key = (tpl.kind, tpl.opcode, tpl.resource, tpl.seq_engine, *[r.level.name for r in regions])
        hit = self.placements.get(key)
        if hit is not None:
            self.placed[tpl] = hit
            return hit
        engine = None
        for r in regions:
            name = r.level.name
            if name.startswith("L1["):
                engine = int(name[3:-1])
                break
        if engine is None and tpl.seq_engine is not None:
            engine = tpl.seq_engine
        topo = self.topology
        per, dev = topo["per_engine"], topo["device_units"]

        def count(u: str) -> int:
            return dev.get(u, 0) if u in DEVICE_UNITS else per.get(u, 0)

        # D-SEM-UNITS: RES-03 exact, RES-04 same-type remap, RES-05 cross-type, RES-07
        b = bind_unit(tpl.op, tpl.resource, count)
        if b.error is not None:
            raise RunError(b.error, b.rule, tpl.op, t.iteration(), b.fix)
        utype, idx = b.unit, b.index
        assert utype is not None  # bound when there is no error
        if utype in DEVICE_UNITS:
            engine = -1
        engines = (engine,) if engine is not None else tuple(range(topo["num_engines"]))
        idxs = (idx,) if idx is not None else tuple(range(count(utype)))
        res = (engine, utype, idx, [(e, utype, i) for e in engines for i in idxs])
        self.placements[key] = res
        self.placed[tpl] = res
        return res

    def _candidates(self, t: TaskInst) -> list[Unit]:
        return self._placement(t)[3]

    def _choose_unit(self, t: TaskInst) -> Unit:
        cands = self._candidates(t)
        if len(cands) == 1:
            return cands[0]
        if self.timed:
            free = self.unit_free
            return min(cands, key=lambda u: free.get(u, 0))
        key = (cands[0], len(cands))
        k = self.rr.get(key, 0)
        self.rr[key] = k + 1
        return cands[k % len(cands)]

    # ------------------------------------------------------------------ selection
    def _pump(self) -> None:
        runnable = self.runnable
        while runnable:
            f = runnable.popleft()
            if f.blocked is None and f.loop is None and not f.finished:
                self._advance(f)

    def peek(self) -> TaskInst | None:
        """The task that will run next (None when the program has finished)."""
        if self._chosen is not None:
            return self._chosen
        self._pump()
        if self.timed:
            lst = self.ready_list
            if not lst:
                self._stalled()
                return None
            best, bk = None, None
            for t in lst:
                u = self._choose_unit(t)
                s = max(t.ready_time, self.unit_free.get(u, 0))
                k = (s, t.seq)
                if bk is None or k < bk:
                    best, bk, bu = t, k, u
            assert best is not None and bk is not None  # `lst` is not empty
            lst.remove(best)
            best.unit = bu
            best.start = bk[0]
            if best.start > best.ready_time:  # it waited for its unit
                best.chain, best.kind = self.unit_chain.get(bu), UNIT
            self._chosen = best
            return best
        if self.choose is not None:
            lst = self.ready_list
            if not lst:
                self._stalled()
                return None
            t = self.choose(lst)
            lst.remove(t)
        elif self.policy == "source":
            if not self.ready_heap:
                self._stalled()
                return None
            t = heapq.heappop(self.ready_heap)[1]
        else:
            lst = self.ready_list
            if not lst:
                self._stalled()
                return None
            i = self.rng.randrange(len(lst))
            lst[i], lst[-1] = lst[-1], lst[i]
            t = lst.pop()
        self._chosen = t
        return t

    def _stalled(self) -> None:
        if self.finished and not self.live:
            return None
        if not self.live and not self.frames:
            self.finished = True
            return None
        self.deadlock = Deadlock(
            witness(self.live.values(), self.frames, self.file, self.cp.values, self.ref)
        )
        raise DeadlockError(self.deadlock)

    def ref(self, t: TaskInst) -> TaskRef:
        return TaskRef(t.tpl.label, t.tpl.opcode, t.tpl.line, self.file, t.iteration(), t.seq)

    # ------------------------------------------------------------------ execution
    def step(self) -> TaskInst | None:
        t = self.peek()
        if t is None:
            return None
        self._chosen = None
        self._run(t)
        return t

    def _run(self, t: TaskInst) -> None:
        tpl = t.tpl
        regions = t.regions
        if self.timed:
            unit = t.unit
        else:
            unit = t.unit = self._choose_unit(t)
        assert unit is not None  # placed when it became the next task (timed)
        t.engine = unit[0]
        try:
            if self.steps < self.dry_steps:
                pass  # a failed replay's re-walk: this effect is in memory already
            else:
                effect = self._effect(t)
                if not self.planning:
                    effect()
                if self.recording is not None:
                    self.recording.effects.append(effect)
        except RunError as e:
            e.where = e.where or t.iteration()
            raise
        if self.race is not None:
            vc_in = t.kvc
            deps = t.deps or ()
            for d in deps:
                vc_in = join(vc_in, d.vc)
            t.vc, t.lane, t.epoch = self.race.start(
                vc_in, [d.task.lane for d in deps if d.task is not None] if deps else ()
            )
            race = self.race
            accesses = [
                (
                    r.level.ident,
                    r.start,
                    r.start + r.extent,
                    rw[1],
                    r.buffer.offset,
                    race.elements(r) if r.exact else None,
                )
                for rw, r in zip(tpl.region_refs, regions)
            ]
            self.race.access(t, accesses, self.ref)
            if self.log is not None:
                self.log.append((task_key(t), t.vc, t.lane, t.epoch, accesses, self.ref(t)))
            if self.race.needs_gc():
                self.race.gc(live_vcs(self.frames, self.live.values()))
        if self.timed:
            work = task_work(tpl, regions, unit[1], self.unit_chars, self.profile)
            cost = work.cycles
            t.end = t.start + cost
            self.unit_free[unit] = t.end
            self.busy[unit] = self.busy.get(unit, 0) + cost
            if t.end > self.total_cycles:
                self.total_cycles = t.end
            if self.roofline is not None:
                t.chain = self.roofline.add(tpl, unit[1], work, t.start, t.end, t.chain, t.kind)
                self.unit_chain[unit] = t.chain
        else:
            t.start = self.steps
            t.end = self.steps
        self.steps += 1
        self.counts[tpl.opcode] = self.counts.get(tpl.opcode, 0) + 1
        if self.tracing:
            nbytes = (
                transfer_bytes(regions[0], regions[1])
                if tpl.kind != COMPUTE
                else sum(r.extent for r in regions)
            )
            self.trace.append(
                (
                    self.steps,
                    tpl,
                    t.frame.iteration(),
                    unit,
                    t.start,
                    t.end if self.timed else t.start + 1,
                    nbytes,
                )
            )
        self._complete(t)

    def _effect(self, t: TaskInst) -> Callable[[], None]:
        """The task's data effect bound to its region instances
        (`prepare_compute`/`prepare_move`), shared by the instances of its
        statement that meet the same region instances and attributes: an
        effect reads its regions when called (D-RT-REPLAY), so it is bound once
        per distinct combination rather than once per iteration (the region
        instances are the template's own, `RegionTpl.instantiate`).  The key
        holds the instances themselves, compared by identity; at most
        `EFFECTS` are kept (D-RT-SHARE)."""
        tpl = t.tpl
        key: tuple[object, ...]
        if tpl.kind == COMPUTE:
            attrs = task_attrs(tpl, t.frame.iv)
            key = (
                (tpl, *t.regions, *map(_frozen, (attrs[k] for k in tpl.attrs_dyn)))
                if tpl.attrs_dyn
                else (tpl, *t.regions)
            )
        else:
            key = (tpl, *t.regions)
        cache = self.effects
        effect = cache.get(key)
        if effect is None:
            effect = (
                prepare_compute(tpl, t.regions, attrs, self.kernels)
                if tpl.kind == COMPUTE
                else prepare_move(tpl, t.regions[1], t.regions[0])
            )  # operand_regions: (src, dst)
            if len(cache) < EFFECTS:
                cache[key] = effect
            else:
                cache.clear()
        return effect

    def _complete(self, t: TaskInst) -> None:
        tok = t.token
        assert tok is not None  # cleared below: a task completes once
        tok.done = True
        tok.vc = t.vc
        tok.end = t.end
        tok.chain = t.chain
        name = t.tpl.label
        self.satisfied[name] = self.satisfied.get(name, 0) + 1
        del self.live[t.seq]
        f = t.frame
        if self.race is not None and f.looprun is not None:  # _frame_done reads it
            f.done_vc = join(f.done_vc, t.vc)
        if t.end > f.done_time:
            f.done_time, f.done_chain = t.end, t.chain
        waiters = tok.waiters
        if waiters:
            tok.waiters = None
            for w in waiters:
                if isinstance(w, TaskInst):
                    w.npending -= 1
                    if w.npending == 0:
                        self._make_ready(w)
                elif w.blocked is not None and all(x.done for x in w.blocked):
                    self._unblock(w, w.blocked)
                    self.runnable.append(w)
        t.deps = None  # no reference cycles through completed tasks
        t.token = None
        f.live -= 1
        if f.live == 0 and f.finished:
            self._frame_done(f)

    def run(self, limit: int | None = None, progress: Callable[[int], object] | None = None) -> int:
        if limit is None:  # a whole run: replay it when the plan allows (D-RT-REPLAY)
            plan = replay.start(self)
            if plan is not None:
                done = replay.replay(self, plan, progress)
                if done is not None:
                    return done
        n = 0
        step = self.step
        with replay.collector_paused(self.recording is not None):
            while limit is None or n < limit:
                if step() is None:
                    break
                n += 1
                if progress is not None and (n & 1023) == 0:
                    progress(self.steps)
        if self.recording is not None and self.finished:
            replay.finish_recording(self)
        return n

    # ------------------------------------------------------------------ reports
    def unconsumed(self) -> list[Unconsumed]:
        out = []
        for tpl in self.cp.tasks:
            if tpl.produced and tpl.consumed < tpl.produced and not tpl.sync:
                out.append(
                    Unconsumed(
                        tpl.label, self.file, tpl.line, tpl.produced, tpl.produced - tpl.consumed
                    )
                )
        return out

    def unit_name(self, unit: Unit) -> str:
        e, u, i = unit
        return f"{u}[{i}]" if e == -1 else f"E{e}.{u}[{i}]"
