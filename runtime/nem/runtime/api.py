"""The Python API of the NEM reference runtime (in the spirit of the interpreter
architecture document, §3):

    interp = NemInterpreter(device="npm_lite")
    prog = interp.load("examples/gemm_bias_relu.nem")
    interp.write_tensor("A_L2", a)               # any buffer; DDR by offset too
    result = interp.run()                        # RunResult: status, tasks, races, ...
    y = interp.read_tensor("Y_L2", (256, 128), np.float16)

    with interp.start() as s:                    # step-by-step
        s.add_breakpoint(task="tG", loop_iter=2)
        s.run(); s.read_region("Y_pp_i"); s.step(); s.dump_trace()

Errors a user can cause (parse, static rules, device, out-of-bounds, ...)
raise `NemDiagnosticError` with file:line:col diagnostics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nem.dialect.diagnostics import (
    Diagnostic,
    NemDiagnosticError,
    SourceLoc,
    register_source,
)
from nem.dialect.ops import ProgramOp
from nem.runtime import tensor_io
from nem.runtime import trace as trace_mod
from nem.runtime.checks import Deadlock, Race, Unconsumed
from nem.runtime.engine import CompiledProgram, RunError, compile_program, default_kernels
from nem.runtime.inspection import Task, Token, task_of, token_of, unknown_name
from nem.runtime.memory import (
    DEFAULT_DDR_SIZE,
    DEFAULT_L1_SIZE,
    DEFAULT_L2_SIZE,
    DTYPES,
    Memory,
    MemoryError_,
    RegionInst,
)
from nem.runtime.scheduler import DeadlockError, Scheduler

DEFAULT_TOPOLOGY = {"num_engines": 1, "per_engine": {"NMU": 1, "CSTL": 1, "DMA": 1, "VPU": 1},
                    "device_units": {"sDMA": 1}, "l2": DEFAULT_L2_SIZE, "l1": DEFAULT_L1_SIZE}


def _diag_from(e: RunError, file: str) -> Diagnostic:
    loc = e.loc
    where = f" (iteration {e.where})" if e.where else ""
    return Diagnostic("error", f"{e}{where}", loc, e.rule)


@dataclass
class Program:
    """A loaded program: its NEM IR, target device, memory image and compiled form."""

    module: ModuleOp
    op: ProgramOp
    file: str
    device: object
    memory: Memory
    compiled: CompiledProgram
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.op.sym_name.data if self.op.sym_name is not None else Path(self.file).stem

    def __repr__(self) -> str:
        dev = self.device.name if self.device is not None else "device-agnostic"
        return (f"<NEM program {self.name} ({self.file}) on {dev}: "
                f"{len(self.memory.buffers)} buffers, {len(self.compiled.tasks)} task statements, "
                f"{len(self.compiled.loops)} loops>")


@dataclass
class RunResult:
    status: str                       # "completed" | "deadlock" | "error"
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
        return (f"<RunResult {self.status}: {self.tasks_run} tasks{cyc}, "
                f"{self.race_count} races, {'deadlock' if self.deadlock else 'no deadlock'}>")


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


class NemInterpreter:
    def __init__(self, device=None, ddr_size: int | None = DEFAULT_DDR_SIZE, include_dirs=(),
                 kernels: dict | None = None, races: bool = True, trace: bool = True):
        self.include_dirs = tuple(include_dirs)
        self.ddr_size = ddr_size
        self.kernels = kernels
        self.races = races
        self.tracing = trace
        self.mode = "functional"
        self.policy = "source"
        self.seed = 0
        self.profile: dict = {}
        self.device = self._resolve_device(device) if device is not None else None
        self.program: Program | None = None

    # -------------------------------------------------------------- configuration
    def _resolve_device(self, device):
        if not isinstance(device, str):
            return device
        from nem.devices.device_lookup import find_device
        from nem.devices.device_resolver import resolve_device_file

        if device.endswith(".nem") and Path(device).is_file():
            return resolve_device_file(Path(device), None, self.include_dirs)
        return find_device(device, self.include_dirs, None)

    def set_mode(self, mode: str) -> None:
        if mode not in ("functional", "timed"):
            raise ValueError(f"mode must be 'functional' or 'timed', not {mode!r}")
        self.mode = mode

    def set_scheduling(self, policy: str, seed: int | None = None) -> None:
        if policy in ("deterministic", "source"):
            self.policy = "source"
        elif policy == "random":
            self.policy = "random"
            self.seed = 0 if seed is None else seed
        else:
            raise ValueError(f"scheduling must be 'source' or 'random', not {policy!r}")

    def set_timing_profile(self, profile: dict) -> None:
        """Override cost-model parameters, e.g. {"DMA": {"bandwidth": 64, "latency": 8}};
        ValueError naming the first bad entry (unknown unit or key, a value that
        is not a positive number; latencies may be 0)."""
        problem = profile_problem(profile)
        if problem is not None:
            raise ValueError(f"bad timing profile: {problem}")
        for k, v in profile.items():
            self.profile.setdefault(k, {}).update(v)

    # -------------------------------------------------------------- loading
    def load(self, path: str | Path, check: bool = True) -> Program:
        """Load `.nem` text, NEM IR as MLIR (`.mlir`), or NEM bytecode (`.nemb`,
        recognized by its magic number whatever the file is called).  The file
        is read capped and only if regular (D-LIMITS); text that is not UTF-8
        is an error at its first bad byte."""
        from nem.dialect.source_files import decode_source, read_source_bytes
        from nem.frontends.bytecode.container import is_nemb

        path = str(path)
        raw = read_source_bytes(path, "program")
        if is_nemb(raw) or path.endswith(".nemb"):
            return self.load_bytecode(raw, path, check)
        return self.load_string(decode_source(raw, path), path, check)

    def load_bytecode(self, data: bytes, file: str = "<nemb>", check: bool = True) -> Program:
        """Load a `.nemb` file, binding it to the device late: its Requirements
        section is checked against the target first (naming what is missing),
        then the usual static and device rules, then embedded initial contents
        are written to their buffers (docs/bytecode.md, "Loading")."""
        from nem.frontends.bytecode.loader import check_target, load_nemb

        loaded = load_nemb(data, file, verify=check)
        if check:
            check_target(loaded, self._device_for(loaded.program, file), file)
        program = self._load_module(loaded.module, loaded.program, file, check)
        for slot, offset, raw in loaded.data:
            self.write_bytes(loaded.buffers[slot].buffer_name.data, raw, offset)
        return program

    def load_string(self, text: str, file: str = "<string>", check: bool = True,
                    syntax: str | None = None) -> Program:
        """Parse `text` into NEM IR, apply the static and device rules (skipped with
        check=False, to exercise the runtime checks alone) and allocate its buffers.
        `syntax` is "nem" or "mlir" (NEM IR in MLIR syntax); default: by the
        extension of `file` (.mlir, else .nem)."""
        from xdsl.utils.exceptions import ParseError, VerifyException

        register_source(file, text)
        try:
            if (syntax or ("mlir" if file.endswith(".mlir") else "nem")) == "mlir":
                module = self._parse_mlir(text, file)
            else:
                from nem.frontends.nem_text.parser import parse_nem

                module = parse_nem(text, file)
        except ParseError as e:
            from nem.frontends.upstream_dialects import parse_error_message

            line, col, _ = e.span.get_line_col()
            raise NemDiagnosticError([Diagnostic("error", parse_error_message(e),
                                                 SourceLoc(file, line + 1, col + 1))]) from None
        except VerifyException as e:
            raise NemDiagnosticError([Diagnostic("error", str(e).splitlines()[0],
                                                 SourceLoc(file, 1, 1))]) from None
        progs = [op for op in module.walk() if isinstance(op, ProgramOp)]
        if len(progs) != 1:
            raise NemDiagnosticError([Diagnostic("error", f"expected one nem.program, found "
                                                 f"{len(progs)}", SourceLoc(file, 1, 1))])
        return self._load_module(module, progs[0], file, check)

    def _load_module(self, module: ModuleOp, prog: ProgramOp, file: str, check: bool) -> Program:
        """Check `prog` (static and device rules) and allocate its buffers."""
        diags = self._validate(prog, file) if check else []
        errors = [d for d in diags if d.severity == "error"]
        if errors:
            raise NemDiagnosticError(diags)
        device = self._device_for(prog, file)
        topo = self._topology(device)
        memory = Memory(topo["num_engines"], topo["l2"], topo["l1"], self.ddr_size)
        catalog = device.catalog if device is not None else None
        try:
            compiled = compile_program(prog, memory, catalog, self._accum_resolver(catalog))
        except RunError as e:
            raise NemDiagnosticError([_diag_from(e, file)]) from None
        self.program = Program(module, prog, file, device, memory, compiled, diags)
        return self.program

    def _parse_mlir(self, text: str, file: str) -> ModuleOp:
        from nem.dialect.dialect import nem_context
        from nem.frontends.upstream_dialects.mlir_input import parse_mlir_checked

        try:
            return parse_mlir_checked(nem_context(), text, file)
        except NemDiagnosticError as e:
            for d in e.diagnostics:
                if "is not registered" in d.message:
                    d.fix = ("nem-run runs NEM IR: lower the MLIR first, e.g. "
                             "nem-opt X.mlir -p 'lower-to-nem{device=D}' -t nem | nem-run -")
            raise

    def _validate(self, prog: ProgramOp, file: str) -> list[Diagnostic]:
        from nem.devices.program_device import check_device_validity
        from nem.dialect.verifier import verify_program

        diags = verify_program(prog)
        if any(d.severity == "error" for d in diags):
            return diags
        device = self._device_for(prog, file)
        if device is not None:
            diags += [*device.warnings, *check_device_validity(prog, device)]
        return diags

    def _device_for(self, prog: ProgramOp, file: str):
        if self.device is not None:
            return self.device
        from nem.devices.program_device import program_device

        return program_device(prog, file, self.include_dirs, None)

    @staticmethod
    def _topology(device) -> dict:
        if device is None:
            return DEFAULT_TOPOLOGY
        t = device.topology
        return {"num_engines": t.num_engines, "per_engine": dict(t.per_engine),
                "device_units": dict(t.device_units), "l2": t.l2_size_bytes,
                "l1": t.l1_size_bytes}

    @staticmethod
    def _accum_resolver(catalog):
        from nem.dialect.operand_binding import match_families
        from nem.dialect.verifier import baseline_catalog

        cat = catalog or baseline_catalog()

        def resolve(op):
            res = match_families(op, cat)
            if not res.matched:
                return None
            fam = cat.families.get(res.matched[0].family)
            return fam.accum if fam is not None else None
        return resolve

    def _prog(self, program: Program | None) -> Program:
        p = program or self.program
        if p is None:
            raise RuntimeError("no program loaded: call load() or load_string() first")
        return p

    def validate(self, program: Program | None = None) -> list[Diagnostic]:
        """Static and device diagnostics (warnings included) of the loaded program."""
        p = self._prog(program)
        return list(p.diagnostics)

    # -------------------------------------------------------------- running
    def start(self, program: Program | None = None, memory: Memory | None = None) -> Session:
        p = self._prog(program)
        return Session(self, p, memory or p.memory)

    def run(self, program: Program | None = None, progress=None) -> RunResult:
        """Run to completion on the program's memory (results stay readable)."""
        s = self.start(program)
        return s.run_to_end(progress)

    def run_schedules(self, k: int, seed: int = 0, program: Program | None = None,
                      jobs: int | None = 1):
        """Run K seeded random schedules from the current memory image, on `jobs`
        processes (None: every core; results do not depend on it).

        Returns (results, difference) where difference is None when every final
        memory is identical, else (seed_a, seed_b, buffer, byte offset).  Only a
        digest of each schedule's memory is kept; afterwards the program's
        memory is the last schedule's final memory."""
        from nem.runtime.hunt import random_schedules

        p = self._prog(program)
        results, diff, last = random_schedules(self, p, k, seed, jobs)
        p.memory = last
        return results, diff

    def explore(self, max_schedules: int = 1000, program: Program | None = None,
                jobs: int | None = 1):
        """Run one schedule of every distinct interleaving (`nem.runtime.hunt.explore`,
        decision D-SEM-EXPLORE), at most `max_schedules`; returns an `Exploration`."""
        from nem.runtime.hunt import explore

        return explore(self, self._prog(program), max_schedules, jobs)

    # -------------------------------------------------------------- memory I/O
    def _mem(self) -> Memory:
        return self._prog(None).memory

    def write_tensor(self, buffer: str | None = None, tensor=None, offset: int = 0,
                     raw: bool = False) -> None:
        """Write an array into buffer or top-level region `buffer` (at byte
        `offset`), or its bytes into DDR at `offset` when `buffer` is None.
        Unless `raw`, the array's dtype must be the target's element type
        (and a region's shape); see `nem.runtime.tensor_io`."""
        if buffer is None:
            self.write_bytes(None, np.ascontiguousarray(tensor), offset)
            return
        p = self._prog(None)
        tensor_io.write_tensor(p.memory, p.compiled, buffer, tensor, offset, raw)

    def write_bytes(self, buffer: str | None, data, offset: int = 0) -> None:
        """Write raw bytes at `offset` of a buffer or top-level region (of DDR
        when `buffer` is None); bounds checked (HAZ-04)."""
        mem = self._mem()
        raw = np.frombuffer(bytes(data), np.uint8) if not isinstance(data, np.ndarray) else \
            np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        if buffer is None:
            try:
                mem.levels["DDR"].write(offset, raw)
            except MemoryError_ as e:
                raise tensor_io.TensorIOError(f"{e} [{e.rule}]") from None
            return
        tensor_io.write_tensor(mem, self._prog(None).compiled, buffer, raw, offset, raw=True)

    def read_tensor(self, buffer: str | None = None, shape=None, dtype=None,
                    offset: int = 0) -> np.ndarray:
        """A copy of buffer or top-level region `buffer`'s values: its element
        type and shape by default, else `dtype`/`shape` from byte `offset`;
        DDR from `offset` when `buffer` is None (bytes unless `dtype`)."""
        if buffer is None:
            dt = np.dtype(DTYPES.get(dtype, dtype)) if isinstance(dtype, str) else \
                np.dtype(dtype if dtype is not None else np.uint8)
            n = math.prod(shape) * dt.itemsize
            out = np.frombuffer(self.ddr_read(offset, n), np.uint8).copy().view(dt)
            return out.reshape(shape)
        p = self._prog(None)
        return tensor_io.read_tensor(p.memory, p.compiled, buffer, shape, dtype, offset)

    ddr_write_tensor = write_tensor

    def ddr_write(self, offset: int, data) -> None:
        self.write_bytes(None, data, offset)

    def ddr_read(self, offset: int, size: int) -> bytes:
        try:
            return self._mem().levels["DDR"].read(offset, size)
        except MemoryError_ as e:
            raise tensor_io.TensorIOError(f"{e} [{e.rule}]") from None

    def read_buffer(self, name: str) -> np.ndarray:
        return self._mem().buffer_bytes(name).copy()

    def buffer_size(self, name: str) -> int:
        """The size in bytes of buffer `name` (KeyError naming the known ones)."""
        return self._mem().buffer(name).size

    def tensor_size(self, name: str) -> int:
        """The size in bytes of buffer or top-level region `name` (what
        `write_tensor(name, ...)` can fill; KeyError naming the known ones)."""
        p = self._prog(None)
        try:
            t = tensor_io.target(p.memory, p.compiled, name)
        except tensor_io.TensorIOError as e:
            raise KeyError(str(e)) from None
        return t.region.extent if t.region is not None else t.buffer.size

    def ddr_info(self) -> dict:
        lv = self._mem().levels["DDR"]
        size = lv.capacity if lv.capacity is not None else lv.size
        return {"size": size, "allocated": lv.top, "free": size - lv.top}

    def randomize_inputs(self, seed: int, levels=("DDR", "L2")) -> list[str]:
        """Fill every DDR and L2 buffer with seeded random values of the element
        type of the first typed region declared over it (raw bytes when untyped):
        floats uniform in [-1, 1), i4 in [-8, 7], i8/u8 over their full range,
        wider integers in [-1000, 1000].  Returns the buffers filled."""
        rng = np.random.default_rng(seed)
        mem = self._mem()
        filled = []
        for b in mem.all_buffers():
            if b.level.split("[")[0] not in levels:
                continue
            data = mem.instance_bytes(b)
            data[:] = random_bytes(rng, mem.buffers[b.name].elem_hint, b.size)
            if b.instance == 0:
                filled.append(b.name)
        return filled

    def get_device_info(self) -> dict:
        dev = self.device or (self.program.device if self.program else None)
        topo = self._topology(dev)
        return {"name": dev.name if dev else None, "num_engines": topo["num_engines"],
                "per_engine": topo["per_engine"], "device_units": topo["device_units"],
                "l2_size": topo["l2"], "l1_size": topo["l1"], "ddr_size": self.ddr_size}

    def __repr__(self) -> str:
        dev = self.device.name if self.device is not None else "from program"
        prog = self.program.name if self.program else "none"
        sched = self.policy + (f"(seed={self.seed})" if self.policy == "random" else "")
        return f"<NemInterpreter device={dev} mode={self.mode} schedule={sched} program={prog}>"


def random_bytes(rng, elem: str | None, size: int) -> np.ndarray:
    if elem in ("f16", "bf16", "f32"):
        dt = DTYPES[elem]
        n = size // dt.itemsize
        vals = rng.uniform(-1, 1, n).astype(dt)
        out = np.zeros(size, np.uint8)
        out[:n * dt.itemsize] = vals.view(np.uint8)
        return out
    if elem == "i4":
        lo = rng.integers(0, 16, size, dtype=np.uint8)
        hi = rng.integers(0, 16, size, dtype=np.uint8)
        return (lo | (hi << 4)).astype(np.uint8)
    if elem in ("i16", "i32", "u16", "u32"):
        dt = DTYPES[elem]
        n = size // dt.itemsize
        low = 0 if elem.startswith("u") else -1000
        vals = rng.integers(low, 1001, n).astype(dt)
        out = np.zeros(size, np.uint8)
        out[:n * dt.itemsize] = vals.view(np.uint8)
        return out
    return rng.integers(0, 256, size, dtype=np.uint8)


class Session:
    """One execution of a program: step, breakpoints, inspection."""

    def __init__(self, interp: NemInterpreter, program: Program, memory: Memory):
        self.interp = interp
        self.program = program
        self.memory = memory
        dev = program.device
        topo = interp._topology(dev)
        self.sched = Scheduler(
            program.compiled, memory, topology=topo,
            unit_chars=dev.unit_characteristics if dev is not None else {},
            mode=interp.mode, policy=interp.policy, seed=interp.seed,
            kernels=interp.kernels if interp.kernels is not None else default_kernels(),
            races=interp.races, trace=interp.tracing, profile=interp.profile,
            file=program.file)
        self.breakpoints: list[dict] = []
        self._skip_break = None
        self.status = "ready"
        self.error: Diagnostic | None = None

    # context manager
    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        return None

    # -------------------------------------------------------------- breakpoints
    def add_breakpoint(self, task: str | None = None, line: int | None = None,
                       loop_iter: int | None = None) -> None:
        """Break before a task whose token name is `task`, at source `line`, and/or in
        loop iteration `loop_iter` (the innermost loop variable); all given must match.
        A task name or line that no task statement of the program has is a ValueError
        (decision D-RT-NAMES)."""
        tasks = self.program.compiled.tasks
        if task is not None and task not in {t.label for t in tasks}:
            raise unknown_name("task", task, [t.label for t in tasks])
        if line is not None and line not in {t.line for t in tasks}:
            lines = ", ".join(str(n) for n in sorted({t.line for t in tasks}))
            raise ValueError(f"no task statement at line {line} (task lines: {lines or 'none'})")
        if task is None and line is None and loop_iter is None:
            raise ValueError("a breakpoint needs task=, line= or loop_iter=")
        self.breakpoints.append({"task": task, "line": line, "loop_iter": loop_iter})

    def clear_breakpoints(self) -> None:
        self.breakpoints.clear()

    def _hits(self, t) -> bool:
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
    def _guard(self, fn):
        try:
            return fn()
        except RunError as e:
            self.status = "error"
            self.error = _diag_from(e, self.program.file)
            raise NemDiagnosticError([self.error]) from None
        except DeadlockError:
            self.status = "deadlock"
            raise

    def step(self, n: int = 1):
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

    def _result(self, t) -> StepResult:
        return StepResult(t.tpl.label, f"{t.tpl.opcode}.{'sync' if t.tpl.sync else 'async'}",
                          "completed", t.tpl.label if t.tpl.op.token_name() else None,
                          t.tpl.line, t.iteration(), self.sched.unit_name(t.unit))

    def run(self, progress=None) -> str:
        """Run until a breakpoint or completion; returns the status."""
        sched = self.sched

        def go():
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
        names = [t.op.token_name() for t in self.program.compiled.tasks if t.op.token_name()]
        if token not in names:
            raise unknown_name("token", token, names)
        sched = self.sched
        before = sched.satisfied.get(token, 0)

        def go():
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
        def go():
            while frame in self.sched.frames or frame.live:
                if self.sched.step() is None:
                    self.status = "completed"
                    return
            self.status = "paused"
        self._guard(go)
        return self.status

    def run_to_end(self, progress=None) -> RunResult:
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
        status = "deadlock" if s.deadlock else ("error" if error or self.status == "error"
                                               else self.status)
        race = s.race
        return RunResult(
            status=status, mode=s.mode,
            schedule=s.policy if not s.timed else "timed",
            tasks_run=s.steps, counts=dict(s.counts),
            races=list(race.races) if race else [], race_count=race.race_count if race else 0,
            deadlock=s.deadlock, unconsumed=s.unconsumed() if status == "completed" else [],
            cycle_count=s.total_cycles if s.timed else None,
            unit_busy={s.unit_name(u): b for u, b in sorted(s.busy.items(),
                                                             key=lambda x: (x[0][0], x[0][1], x[0][2]))},
            max_active_iterations=dict(s.loop_max_active), error=error or self.error)

    # -------------------------------------------------------------- inspection
    def _region(self, name: str, **loop_vars) -> RegionInst:
        sched = self.sched
        # the newest instance bound in a live stream, else evaluate the declaration
        for f in sorted(sched.frames, key=lambda f: -(f.index or 0)):
            for v, x in f.env.items():
                if isinstance(x, RegionInst) and x.name == name and not loop_vars:
                    return x
        for tpl in self.program.compiled.regions:
            if tpl.name == name:
                iv = tuple(loop_vars.get(n, 0) for n in self._loop_names(tpl))
                try:
                    return tpl.instantiate(self.memory, iv)
                except RunError as e:
                    raise NemDiagnosticError([_diag_from(e, self.program.file)]) from None
        raise KeyError(f"no region named '{name}'")

    def _loop_names(self, tpl) -> list[str]:
        names = []
        op = tpl.op.parent_op()
        while op is not None and op.name == "nem.loop":
            names.append(op.iv_name.data)
            op = op.parent_op()
        return list(reversed(names))

    def region(self, name: str, **loop_vars) -> RegionInst:
        return self._region(name, **loop_vars)

    def read_region(self, name: str, **loop_vars) -> np.ndarray:
        """A region's values as a typed array (a copy), e.g. read_region("Y_pp_i", i=1)."""
        return np.array(self._region(name, **loop_vars).read(), copy=True)

    def dump_region(self, name: str, **loop_vars) -> str:
        r = self._region(name, **loop_vars)
        head = " ".join(f"0x{b:02x}" for b in r.raw()[:32])
        return (f"Region: {r.name}\n  Buffer: {r.buffer.name}, offset={r.offset}, "
                f"extent={r.extent}\n  Type: {r.elem or 'untyped'}, shape={list(r.shape or [])}"
                f"\n  Contents: [{head}{' ...' if r.extent > 32 else ''}]")

    def read_buffer(self, name: str) -> np.ndarray:
        return self.memory.buffer_bytes(name).copy()

    def read_memory(self, level: str, offset: int = 0, size: int | None = None,
                    engine: int | None = None) -> bytes:
        if level == "L1" and engine is not None:
            level = f"L1[{engine}]"
        lv = self.memory.level(level)
        size = lv.size - offset if size is None else size
        try:
            return lv.read(offset, size)
        except MemoryError_ as e:
            raise ValueError(f"{e} [{e.rule}]") from None

    def write_tensor(self, buffer: str, tensor, offset: int = 0, raw: bool = False) -> None:
        """As `NemInterpreter.write_tensor`, into this session's memory."""
        tensor_io.write_tensor(self.memory, self.program.compiled, buffer, tensor, offset, raw)

    def read_tensor(self, buffer: str, shape=None, dtype=None, offset: int = 0) -> np.ndarray:
        """As `NemInterpreter.read_tensor`, from this session's memory."""
        return tensor_io.read_tensor(self.memory, self.program.compiled, buffer, shape, dtype,
                                     offset)

    def get_tokens(self) -> dict[str, Token]:
        """The tokens of the live instruction streams (the program body and the
        active loop iterations), keyed `name` or `name[i=..]`."""
        from nem.runtime.scheduler import Token as SchedToken

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
        return [task_of(t, self.sched, "pending")
                for t in sorted(self.sched.live.values(), key=lambda t: t.seq) if t.npending]

    @property
    def trace(self) -> list:
        return self.sched.trace

    def dump_buffers(self) -> str:
        lines = [f"{'Buffer':<16}{'Level':<8}{'Offset':>10}{'Size':>10}{'Align':>7}  Status"]
        for b in self.memory.all_buffers():
            name = b.name if b.instances == 1 else f"{b.name}#{b.instance}"
            lines.append(f"{name:<16}{b.level:<8}{hex(b.offset):>10}{b.size:>10}"
                         f"{b.align:>7}  allocated")
        return "\n".join(lines)

    def dump_trace(self) -> str:
        return trace_mod.to_table(self.sched.trace, self.sched.timed)

    def export_trace(self, path: str) -> None:
        trace_mod.export(self.sched.trace, path, self.program.name, self.sched.mode)

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
        return (f"<Session {self.program.name} [{self.status}] {s.mode}/{s.policy}: "
                f"{s.steps} tasks run, {len(s.live)} in flight"
                f"{' (' + '; '.join(live_iters[:4]) + ')' if live_iters else ''}"
                f"{cyc}, {races} races{nxt}>")


def profile_problem(profile: object) -> str | None:
    """Why `profile` is not a valid cost-model override, or None (issue 11:
    wrong types, a list, zero or negative bandwidths)."""
    from nem.runtime.engine import DEFAULT_PROFILE

    if not isinstance(profile, dict):
        return f"expected an object of units, got {type(profile).__name__}"
    for unit, keys in profile.items():
        if unit not in DEFAULT_PROFILE:
            return f"unknown unit {unit!r} (units: {', '.join(DEFAULT_PROFILE)})"
        if not isinstance(keys, dict):
            return f"{unit}: expected an object of parameters, got {type(keys).__name__}"
        for key, value in keys.items():
            if key not in DEFAULT_PROFILE[unit]:
                return (f"{unit}: unknown parameter {key!r} (parameters: "
                        f"{', '.join(DEFAULT_PROFILE[unit])})")
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    value != value or value in (float("inf"), float("-inf")):
                return f"{unit}.{key}: expected a number, got {value!r}"
            if value < 0 or (value == 0 and key != "latency"):
                need = ">= 0" if key == "latency" else "> 0"
                return f"{unit}.{key} is {value}, must be {need}"
    return None
