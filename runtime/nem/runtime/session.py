"""One execution of a loaded program (`Session`: step, breakpoints,
inspection) and what the runtime API hands back: `Program`, `RunResult`,
`StepResult`.  `nem.runtime.api.NemInterpreter` loads programs and starts
sessions; its `run` is a session run to the end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar

import numpy as np
import numpy.typing as npt
from xdsl.dialects.builtin import ModuleOp

from nem.dialect.device_model import Device
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError
from nem.dialect.ops import ProgramOp
from nem.dialect.semantics.cost import DEFAULT_PROFILE, Profile
from nem.runtime import roofline, roofline_tally, tensor_io
from nem.runtime import trace as trace_mod
from nem.runtime.checks import Deadlock, DeadlockError, Race, Unconsumed
from nem.runtime.critical_path import Segment
from nem.runtime.engine import CompiledProgram, RunError, default_kernels
from nem.runtime.inspection import (
    Task,
    Token,
    check_loop_iter,
    iteration_of,
    loops_of,
    task_of,
    token_of,
    unknown_name,
)
from nem.runtime.memory import DEFAULT_L1_SIZE, DEFAULT_L2_SIZE, Memory, MemoryError_, RegionInst
from nem.runtime.scheduler import Scheduler, Topology

if TYPE_CHECKING:
    from nem.runtime.escape_hatch import EscapeHatch
    from nem.runtime.kernel_support import Kernel
    from nem.runtime.task_state import TaskInst
    from nem.runtime.trace import TraceEntry

T = TypeVar("T")


class RunSettings(Protocol):
    """What a session takes from the interpreter that starts it
    (`nem.runtime.api.NemInterpreter`): the run's mode, schedule and checks,
    read once when the session starts."""

    @property
    def kernels(self) -> Mapping[str, Kernel]: ...

    @property
    def mode(self) -> str: ...

    @property
    def policy(self) -> str: ...

    @property
    def seed(self) -> int: ...

    @property
    def races(self) -> bool: ...

    @property
    def tracing(self) -> bool: ...

    @property
    def profile(self) -> Profile: ...

    @property
    def escape_hatch(self) -> EscapeHatch: ...


DEFAULT_TOPOLOGY: Topology = {
    "num_engines": 1,
    "per_engine": {"NMU": 1, "CSTL": 1, "DMA": 1, "VPU": 1},
    "device_units": {"sDMA": 1},
    "l2": DEFAULT_L2_SIZE,
    "l1": DEFAULT_L1_SIZE,
}


def topology_of(device: Device | None) -> Topology:
    """The scheduler's view of a device's topology (`DEFAULT_TOPOLOGY`: one
    unit of each kind, for a program with no device)."""
    if device is None:
        return DEFAULT_TOPOLOGY
    t = device.topology
    return {
        "num_engines": t.num_engines,
        "per_engine": dict(t.per_engine),
        "device_units": dict(t.device_units),
        "l2": t.l2_size_bytes,
        "l1": t.l1_size_bytes,
    }


def diag_from(e: RunError, file: str) -> Diagnostic:
    """A run-time error as a diagnostic (iteration named when inside a loop)."""
    loc = e.loc
    where = f" (iteration {e.where})" if e.where else ""
    return Diagnostic("error", f"{e}{where}", loc, e.rule, e.fix)


@dataclass
class Program:
    """A loaded program: its NEM IR, target device, memory image and compiled form."""

    module: ModuleOp
    op: ProgramOp
    file: str
    device: Device | None
    memory: Memory
    compiled: CompiledProgram
    diagnostics: list[Diagnostic] = field(default_factory=list)
    given: set[str] = field(default_factory=set)
    """The buffers given contents by the caller (`write_tensor`, `write_bytes`,
    `randomize_inputs`, a `.nemb`'s Data section); "DDR" when bytes went into
    DDR by offset, which may be any DDR buffer's (D-RT-UNSET)."""

    @property
    def name(self) -> str:
        return self.op.sym_name.data if self.op.sym_name is not None else Path(self.file).stem

    def __repr__(self) -> str:
        dev = self.device.name if self.device is not None else "device-agnostic"
        return (
            f"<NEM program {self.name} ({self.file}) on {dev}: "
            f"{len(self.memory.buffers)} buffers, {len(self.compiled.tasks)} task statements, "
            f"{len(self.compiled.loops)} loops>"
        )


@dataclass
class RunResult:
    status: str  # "completed" | "deadlock" | "error"
    mode: str
    schedule: str
    tasks_run: int
    counts: dict[str, int]
    races: list[Race]
    race_count: int
    deadlock: Deadlock | None
    unconsumed: list[Unconsumed]
    cycle_count: int | None
    unit_busy: dict[str, int]
    max_active_iterations: dict[int, int]
    error: Diagnostic | None = None

    @property
    def ok(self) -> bool:
        return self.status == "completed" and not self.race_count

    def utilization(self) -> dict[str, float]:
        if not self.cycle_count:
            return {}
        return {u: b / self.cycle_count for u, b in self.unit_busy.items()}

    def __repr__(self) -> str:
        cyc = f", {self.cycle_count} cycles" if self.cycle_count is not None else ""
        return (
            f"<RunResult {self.status}: {self.tasks_run} tasks{cyc}, "
            f"{self.race_count} races, {'deadlock' if self.deadlock else 'no deadlock'}>"
        )


@dataclass
class StepResult:
    task_id: str
    task_type: str
    status: str
    token: str | None
    line: int
    iteration: str
    unit: str

    def __repr__(self) -> str:
        it = f" [{self.iteration}]" if self.iteration else ""
        return f"<Step {self.task_id} {self.task_type} line {self.line}{it} on {self.unit}>"


class Breakpoint(TypedDict):
    """Where `Session.run` stops: every key given (not None) must match."""

    task: str | None
    line: int | None
    loop_iter: int | None


class Session:
    """One execution of a program: step, breakpoints, inspection."""

    def __init__(self, interp: RunSettings, program: Program, memory: Memory):
        self.interp = interp
        self.program = program
        self.memory = memory
        dev = program.device
        topo = topology_of(dev)
        self.sched = Scheduler(
            program.compiled,
            memory,
            topology=topo,
            unit_chars=dev.unit_characteristics if dev is not None else {},
            mode=interp.mode,
            policy=interp.policy,
            seed=interp.seed,
            kernels={**default_kernels(lambda: interp.escape_hatch), **interp.kernels},
            races=interp.races,
            trace=interp.tracing,
            profile=interp.profile,
            file=program.file,
        )
        if self.sched.timed:
            self.sched.roofline = roofline_tally.Tally(program.compiled, topo)
        self.breakpoints: list[Breakpoint] = []
        self._skip_break: TaskInst | None = None
        self.status = "ready"
        self.error: Diagnostic | None = None

    # context manager
    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    # -------------------------------------------------------------- breakpoints
    def add_breakpoint(
        self, task: str | None = None, line: int | None = None, loop_iter: int | None = None
    ) -> None:
        """Break before a task whose token name is `task`, at source `line`, and/or in
        loop iteration `loop_iter` (the innermost loop variable); all given must match.
        A breakpoint that can never fire is a ValueError (decision D-RT-NAMES): a task
        name or line that no task statement of the program has, a task not at that
        line, or a `loop_iter` outside the innermost loop of every task it may stop."""
        cp = self.program.compiled
        tasks = cp.tasks
        if task is not None and task not in {t.label for t in tasks}:
            raise unknown_name("task", task, [t.label for t in tasks])
        if line is not None and line not in {t.line for t in tasks}:
            lines = ", ".join(str(n) for n in sorted({t.line for t in tasks}))
            raise ValueError(f"no task statement at line {line} (task lines: {lines or 'none'})")
        if task is None and line is None and loop_iter is None:
            raise ValueError("a breakpoint needs task=, line= or loop_iter=")
        matching = [
            t
            for t in tasks
            if (task is None or t.label == task) and (line is None or t.line == line)
        ]
        if not matching:
            at = ", ".join(str(n) for n in sorted({t.line for t in tasks if t.label == task}))
            raise ValueError(f"no task {task} at line {line} (task {task} is at line {at})")
        if loop_iter is not None:
            whom = (
                f"task {task}"
                if task is not None
                else (f"the task at line {line}" if line is not None else "the program's tasks")
            )
            check_loop_iter(
                loop_iter,
                [lts[-1] if (lts := loops_of(cp, t.op)) else None for t in matching],
                whom,
            )
        self.breakpoints.append({"task": task, "line": line, "loop_iter": loop_iter})

    def clear_breakpoints(self) -> None:
        self.breakpoints.clear()

    def _hits(self, t: TaskInst) -> bool:
        for b in self.breakpoints:
            if b["task"] is not None and t.tpl.label != b["task"]:
                continue
            if b["line"] is not None and t.tpl.line != b["line"]:
                continue
            if b["loop_iter"] is not None and (not t.frame.iv or t.frame.iv[-1] != b["loop_iter"]):
                continue
            return True
        return False

    # -------------------------------------------------------------- stepping
    def _guard(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except RunError as e:
            self.status = "error"
            self.error = diag_from(e, self.program.file)
            raise NemDiagnosticError([self.error]) from None
        except DeadlockError:
            self.status = "deadlock"
            raise

    def step(self, n: int = 1) -> StepResult | list[StepResult] | None:
        """Execute the next `n` tasks; returns a StepResult (n == 1) or a list."""
        out = []
        for _ in range(n):
            t = self._guard(self.sched.step)
            if t is None:
                self.status = "completed"
                break
            self.status = "paused"
            out.append(self._result(t))
        return out[0] if n == 1 and out else (None if n == 1 else out)

    def _result(self, t: TaskInst) -> StepResult:
        unit = t.unit
        assert unit is not None  # a task that ran was placed
        return StepResult(
            t.tpl.label,
            f"{t.tpl.opcode}.{'sync' if t.tpl.sync else 'async'}",
            "completed",
            t.tpl.label if t.tpl.op.token_name() else None,
            t.tpl.line,
            t.iteration(),
            self.sched.unit_name(unit),
        )

    def run(self, progress: Callable[[int], object] | None = None) -> str:
        """Run until a breakpoint or completion; returns the status."""
        sched = self.sched

        def go() -> None:
            n = 0
            while True:
                t = sched.peek()
                if t is None:
                    self.status = "completed"
                    return
                if self.breakpoints and self._skip_break is not t and self._hits(t):
                    self._skip_break = t
                    self.status = "breakpoint"
                    return
                sched.step()
                n += 1
                if progress is not None and (n & 1023) == 0:
                    progress(sched.steps)

        self._guard(go)
        return self.status

    continue_ = run

    def run_until(self, token: str) -> str:
        """Run until a task whose token is named `token` has completed; a name
        no task of the program gives its token is a ValueError (D-RT-NAMES)."""
        names = [n for t in self.program.compiled.tasks if (n := t.op.token_name())]
        if token not in names:
            raise unknown_name("token", token, names)
        sched = self.sched
        before = sched.satisfied.get(token, 0)

        def go() -> None:
            while sched.satisfied.get(token, 0) == before:
                if sched.step() is None:
                    self.status = "completed"
                    return
            self.status = "paused"

        self._guard(go)
        return self.status

    def step_iteration(self) -> str:
        """Run until the innermost loop iteration of the next task has completed."""
        t = self._guard(self.sched.peek)
        if t is None:
            return "completed"
        frame = t.frame

        def go() -> None:
            while frame in self.sched.frames or frame.live:
                if self.sched.step() is None:
                    self.status = "completed"
                    return
            self.status = "paused"

        self._guard(go)
        return self.status

    def run_to_end(self, progress: Callable[[int], object] | None = None) -> RunResult:
        sched = self.sched
        err = None
        try:
            self._guard(lambda: sched.run(progress=progress))
            self.status = "completed" if sched.finished or not sched.live else self.status
        except NemDiagnosticError as e:
            err = e.diagnostics[0]
        except DeadlockError:
            pass
        return self.result(err)

    def result(self, error: Diagnostic | None = None) -> RunResult:
        s = self.sched
        status = (
            "deadlock"
            if s.deadlock
            else ("error" if error or self.status == "error" else self.status)
        )
        race = s.race
        return RunResult(
            status=status,
            mode=s.mode,
            schedule=s.policy if not s.timed else "timed",
            tasks_run=s.steps,
            counts=dict(s.counts),
            races=list(race.races) if race else [],
            race_count=race.race_count if race else 0,
            deadlock=s.deadlock,
            unconsumed=s.unconsumed() if status == "completed" else [],
            cycle_count=s.total_cycles if s.timed else None,
            unit_busy={
                s.unit_name(u): b
                for u, b in sorted(s.busy.items(), key=lambda x: (x[0][0], x[0][1], x[0][2]))
            },
            max_active_iterations=dict(s.loop_max_active),
            error=error or self.error,
        )

    # -------------------------------------------------------------- inspection
    def _region(self, name: str, **loop_vars: object) -> RegionInst:
        """Region `name` in the iteration `loop_vars` names: every variable of
        its loops, each in its loop's range (`inspection.iteration_of`); over a
        loop-body buffer, that iteration's instance (D-SEM-INSTANCES).  An
        unknown name is a ValueError, as in breakpoints (D-RT-NAMES)."""
        cp = self.program.compiled
        named = [t for t in cp.regions if not t.name.startswith("region(")]
        tpl = next((t for t in named if t.name == name), None)
        if tpl is None:
            if not isinstance(name, str):
                raise TypeError(f"name must be a region's name (a str), not {name!r}")
            raise unknown_name("region", name, [t.name for t in named])
        iv, ords = iteration_of(name, loops_of(cp, tpl.op), loop_vars)
        try:
            return tpl.instantiate(self.memory, iv, ords)
        except RunError as e:
            raise NemDiagnosticError([diag_from(e, self.program.file)]) from None

    def region(self, name: str, **loop_vars: object) -> RegionInst:
        return self._region(name, **loop_vars)

    def read_region(self, name: str, **loop_vars: object) -> np.ndarray:
        """A region's values as a typed array (a copy), e.g. read_region("Y_pp_i", i=1):
        a region declared in loops names its iteration, every loop variable."""
        return np.array(self._region(name, **loop_vars).read(), copy=True)

    def dump_region(self, name: str, **loop_vars: object) -> str:
        r = self._region(name, **loop_vars)
        head = " ".join(f"0x{b:02x}" for b in r.raw()[:32])
        return (
            f"Region: {r.name}\n  Buffer: {r.buffer.name}, offset={r.offset}, "
            f"extent={r.extent}\n  Type: {r.elem or 'untyped'}, shape={list(r.shape or [])}"
            f"\n  Contents: [{head}{' ...' if r.extent > 32 else ''}]"
        )

    def read_buffer(self, name: str) -> np.ndarray:
        return self.memory.buffer_bytes(name).copy()

    def read_memory(
        self, level: str, offset: int = 0, size: int | None = None, engine: int | None = None
    ) -> bytes:
        if level == "L1" and engine is not None:
            level = f"L1[{engine}]"
        lv = self.memory.level(level)
        size = lv.size - offset if size is None else size
        try:
            return lv.read(offset, size)
        except MemoryError_ as e:
            raise ValueError(f"{e} [{e.rule}]") from None

    def write_tensor(
        self, buffer: str | None, tensor: npt.ArrayLike, offset: int = 0, raw: bool = False
    ) -> int:
        """As `NemInterpreter.write_tensor`, into this session's memory."""
        return tensor_io.write_tensor(
            self.memory, self.program.compiled, buffer, tensor, offset, raw
        )

    def read_tensor(
        self,
        buffer: str | None,
        shape: Sequence[int] | None = None,
        dtype: npt.DTypeLike | None = None,
        offset: int = 0,
    ) -> np.ndarray:
        """As `NemInterpreter.read_tensor`, from this session's memory."""
        return tensor_io.read_tensor(
            self.memory, self.program.compiled, buffer, shape, dtype, offset
        )

    def get_tokens(self) -> dict[str, Token]:
        """The tokens of the live instruction streams (the program body and the
        active loop iterations), keyed `name` or `name[i=..]`."""
        from nem.runtime.task_state import Token as SchedToken

        out = {}
        for f in sorted(self.sched.frames, key=lambda f: (f.depth, f.index or 0)):
            for x in f.env.values():
                if isinstance(x, SchedToken) and x.task is not None:
                    tok = token_of(x, f, self.sched)
                    out[tok.key] = tok
        return out

    def get_ready_tasks(self) -> list[Task]:
        """The task instances that may run now, in issue order."""
        s = self.sched
        s._pump()
        tasks = [t for _, t in s.ready_heap] + list(s.ready_list)
        if s._chosen is not None:
            tasks.append(s._chosen)
        return [task_of(t, s, "ready") for t in sorted(set(tasks), key=lambda t: t.seq)]

    def get_pending_tasks(self) -> list[Task]:
        """The issued task instances that wait for a dependency, in issue order."""
        return [
            task_of(t, self.sched, "pending")
            for t in sorted(self.sched.live.values(), key=lambda t: t.seq)
            if t.npending
        ]

    @property
    def trace(self) -> list[TraceEntry]:
        return self.sched.trace

    def dump_buffers(self) -> str:
        lines = [f"{'Buffer':<16}{'Level':<8}{'Offset':>10}{'Size':>10}{'Align':>7}  Status"]
        for b in self.memory.all_buffers():
            name = b.name if b.instances == 1 else f"{b.name}#{b.instance}"
            lines.append(
                f"{name:<16}{b.level:<8}{hex(b.offset):>10}{b.size:>10}{b.align:>7}  allocated"
            )
        return "\n".join(lines)

    def dump_trace(self) -> str:
        return trace_mod.to_table(self.sched.trace, self.sched.timed)

    def roofline(
        self, least: roofline.Least | None = None, nodes: Sequence[tuple[str, str]] = ()
    ) -> roofline.Report:
        """The roofline report of what has run so far (timed mode, D-RT-ROOFLINE);
        with `least`, the least work of the program's ONNX nodes (a
        `nem.frontends.onnx.traffic.NodeTraffic`'s `of`), each node row's
        ideal bound too; `nodes`: the model's (name, op type), those no task
        names listed (`Report.no_tasks`)."""
        tally = self.sched.roofline
        if tally is None:
            raise ValueError(
                "not supported: a roofline needs a timed run (the bound and the "
                "cycles come from the timed cost model, D-RT-COST); "
                "set_mode('timed') before start()"
            )
        dev = self.program.device
        price = roofline.Pricing(
            tally.units, dev.unit_characteristics if dev is not None else {}, self.sched.profile
        )
        return roofline.report(
            tally,
            self.sched.total_cycles,
            self.program.name,
            dev.name if dev is not None else "device-agnostic",
            roofline_tally.usable_counts(p[3] for p in self.sched.placements.values()),
            self.sched.profile != DEFAULT_PROFILE,
            (least, price) if least is not None else None,
            nodes,
        )

    def critical_path(self) -> list[Segment]:
        """The critical path of what has run so far in time order, a segment
        per change of group (timed mode, D-RT-ROOFLINE; else [])."""
        tally = self.sched.roofline
        return tally.segments() if tally is not None else []

    def export_trace(self, path: str) -> None:
        """The trace as Chrome JSON or CSV (`.csv`), with the critical path."""
        trace_mod.export(
            self.sched.trace, path, self.program.name, self.sched.mode, self.critical_path()
        )

    def __repr__(self) -> str:
        s = self.sched
        live_iters = sorted({t.iteration() for t in s.live.values() if t.iteration()})
        nxt = ""
        try:
            if s._chosen is not None:
                nxt = f", next {s._chosen!r}"
        except Exception:  # pragma: no cover
            pass
        cyc = f", cycle {s.total_cycles}" if s.timed else ""
        races = s.race.race_count if s.race else 0
        return (
            f"<Session {self.program.name} [{self.status}] {s.mode}/{s.policy}: "
            f"{s.steps} tasks run, {len(s.live)} in flight"
            f"{' (' + '; '.join(live_iters[:4]) + ')' if live_iters else ''}"
            f"{cyc}, {races} races{nxt}>"
        )
