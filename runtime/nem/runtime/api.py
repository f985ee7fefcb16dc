"""The Python API of the NEM reference runtime (in the spirit of the interpreter
architecture document, §3):

    interp = NemInterpreter(device="npm_lite")
    prog = interp.load("examples/gemm_bias_relu.nem")
    interp.write_tensor("A_L2", a)               # any buffer; DDR by offset too
    result = interp.run()                        # RunResult: status, tasks, races, ...
    y = interp.read_tensor("Y_L2", (256, 128), np.float16)

    with interp.start() as s:                    # step-by-step
        s.add_breakpoint(task="tG", loop_iter=2)
        s.run(); s.read_region("Y_pp_i", i=2); s.step(); s.dump_trace()

Errors a user can cause (parse, static rules, device, out-of-bounds, ...)
raise `NemDiagnosticError` with file:line:col diagnostics.  A session and the
results it gives (`Session`, `Program`, `RunResult`, `StepResult`) are in
`nem.runtime.session`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from xdsl.dialects.builtin import ModuleOp

from nem.dialect.diagnostics import (
    Diagnostic,
    NemDiagnosticError,
    SourceLoc,
    register_source,
)
from nem.dialect.elements import ELEM_DTYPES as DTYPES
from nem.dialect.ops import ComputeOp, ProgramOp, programs
from nem.dialect.semantics.cost import MAC_RATE_KEYS, Profile
from nem.runtime import tensor_io
from nem.runtime.engine import AccumResolver, RunError, compile_program
from nem.runtime.memory import (
    DEFAULT_DDR_SIZE,
    Memory,
    MemoryError_,
)
from nem.runtime.session import Program, RunResult, Session, diag_from, topology_of

if TYPE_CHECKING:
    from nem.dialect.device_model import Device
    from nem.dialect.families import Catalog
    from nem.runtime.escape_hatch import EscapeHatch
    from nem.runtime.hunt import Exploration
    from nem.runtime.kernel_support import Kernel


def _user_kernels(kernels: object) -> MappingProxyType[str, Kernel]:
    """`kernels={opcode: fn}` checked when given (an unknown opcode would be
    ignored silently, the reference kernel running instead) and wrapped as
    `kernel_support.UserKernel`s, in a read-only mapping: the kernels are
    fixed when the interpreter is made, so a run after `prepare()` (which
    binds them) and a run without it compute the same (D-RT-PREPARE)."""
    import difflib

    from nem.dialect.registry import opcodes
    from nem.runtime.kernel_support import UserKernel

    if kernels is None:
        return MappingProxyType({})
    if not isinstance(kernels, Mapping):
        raise TypeError(f"kernels must be a dict {{opcode: fn}}, not {type(kernels).__name__}")
    known = opcodes()
    out: dict[str, Kernel] = {}
    for name, fn in kernels.items():
        if name not in known:
            near = difflib.get_close_matches(str(name), list(known), n=1)
            hint = (
                f"; did you mean '{near[0]}'?"
                if near
                else " (escape-hatch kernels are the opcode 'compute')"
            )
            raise ValueError(f"kernels: '{name}' is not an opcode{hint}")
        if not callable(fn):
            raise TypeError(
                f"kernels: the kernel for '{name}' is not callable "
                f"({type(fn).__name__}): give a function fn(inputs, outputs, attrs)"
            )
        out[name] = UserKernel(fn, name)
    return MappingProxyType(out)


class NemInterpreter:
    def __init__(
        self,
        device: str | Device | None = None,
        ddr_size: int | None = DEFAULT_DDR_SIZE,
        include_dirs: Sequence[str] = (),
        kernels: Mapping[str, Kernel] | None = None,
        races: bool = True,
        trace: bool = True,
    ) -> None:
        from nem.dialect.arguments import check_type
        from nem.dialect.device_model import Device

        if device is not None:
            check_type(
                "NemInterpreter",
                "device",
                device,
                (str, Device),
                "a device name or .nem path (str), a resolved Device, or None",
            )
        if ddr_size is not None:
            check_type("NemInterpreter", "ddr_size", ddr_size, int, "an int or None")
            if ddr_size < 1:
                raise ValueError(f"NemInterpreter: ddr_size must be positive, not {ddr_size}")
        check_type(
            "NemInterpreter",
            "include_dirs",
            include_dirs,
            (list, tuple),
            "a list or tuple of directories",
        )
        self.include_dirs = tuple(include_dirs)
        self.ddr_size = ddr_size
        self.kernels = _user_kernels(kernels)
        self.races = races
        self.tracing = trace
        self.mode = "functional"
        self.policy = "source"
        self.seed = 0
        self.profile: Profile = {}
        self.device = self._resolve_device(device) if device is not None else None
        self.program: Program | None = None
        self._escape_hatch: EscapeHatch | None = None

    @property
    def escape_hatch(self) -> EscapeHatch:
        """This interpreter's `compute op="mlir.kernel"` tasks: backend, work
        limit, notices and compiled kernels (`nem.runtime.escape_hatch`), made
        when first used (the backend's default is NEM_MLIR_KERNEL then)."""
        if self._escape_hatch is None:
            from nem.runtime.escape_hatch import EscapeHatch

            self._escape_hatch = EscapeHatch()
        return self._escape_hatch

    # -------------------------------------------------------------- configuration
    def _resolve_device(self, device: str | Device) -> Device:
        if not isinstance(device, str):
            return device
        from nem.devices.device_lookup import find_device
        from nem.devices.device_resolver import resolve_device_file

        if device.endswith(".nem") and Path(device).is_file():
            return resolve_device_file(Path(device), None, self.include_dirs)
        if device.endswith(".nem") and os.path.exists(device):  # a FIFO was "not found"
            from nem.dialect.diagnostics import fail
            from nem.dialect.source_files import FileRefused, regular_file

            try:
                regular_file(device, "device file")
            except FileRefused as e:
                raise fail(str(e), None, "DEV-20", e.fix) from None
        return find_device(device, self.include_dirs, None)

    def set_mode(self, mode: str) -> None:
        if mode not in ("functional", "timed"):
            raise ValueError(f"mode must be 'functional' or 'timed', not {mode!r}")
        self.mode = mode

    def set_scheduling(self, policy: str, seed: int | None = None) -> None:
        if seed is not None:
            seed = check_seed(seed)
        if policy in ("deterministic", "source"):
            self.policy = "source"
        elif policy == "random":
            self.policy = "random"
            self.seed = 0 if seed is None else seed
        else:
            raise ValueError(f"scheduling must be 'source' or 'random', not {policy!r}")

    def set_timing_profile(self, profile: Mapping[str, Mapping[str, float]]) -> None:
        """Override cost-model parameters, e.g. {"DMA": {"bandwidth": 64, "latency": 8}};
        ValueError naming the first bad entry (unknown unit or key, a value that
        is not a positive number; latencies may be 0)."""
        problem = profile_problem(profile)
        if problem is not None:
            raise ValueError(f"bad timing profile: {problem}")
        for k, v in profile.items():
            # a latency of 8.0 is 8: every duration stays a whole number of cycles
            given = {key: int(x) if key == "latency" else x for key, x in v.items()}
            if k == "NMU" and "macs" in given:
                # the rate of every input type, above the device's own rates
                # (`cost.macs_per_cycle`); a per-type key given beside it wins
                given = {**dict.fromkeys(MAC_RATE_KEYS, given["macs"]), **given}
            self.profile.setdefault(k, {}).update(given)

    # -------------------------------------------------------------- loading
    def load(self, path: str | Path, check: bool = True) -> Program:
        """Load `.nem` text, NEM IR as MLIR (`.mlir`), or NEM bytecode (`.nemb`,
        recognized by its magic number whatever the file is called).  The file
        is read capped and only if regular (D-LIMITS); text that is not UTF-8
        is an error at its first bad byte."""
        from nem.dialect.source_files import decode_source, read_source_bytes
        from nem.frontends.bytecode import MAGIC
        from nem.frontends.bytecode.container import is_nemb

        if not isinstance(path, (str, os.PathLike)):  # load(3) read a file named '3'
            raise TypeError(f"load: path must be a str or Path, not {type(path).__name__}")
        path = str(path)
        raw = read_source_bytes(path, "program", bytecode_magic=MAGIC)
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

    def load_string(
        self, text: str, file: str = "<string>", check: bool = True, syntax: str | None = None
    ) -> Program:
        """Parse `text` into NEM IR, apply the static and device rules (skipped with
        check=False, to exercise the runtime checks alone) and allocate its buffers.
        `syntax` is "nem" or "mlir" (NEM IR in MLIR syntax); default: by the
        extension of `file` (.mlir, else .nem)."""
        from xdsl.utils.exceptions import ParseError, VerifyException

        if syntax not in (None, "nem", "mlir"):
            raise ValueError(
                f"syntax must be 'nem' or 'mlir' (or None: by the file's extension), not {syntax!r}"
            )
        register_source(file, text)
        try:
            if (syntax or ("mlir" if file.endswith(".mlir") else "nem")) == "mlir":
                module = self._parse_mlir(text, file)
            else:
                from nem.frontends.nem_text.parser import parse_nem

                module = parse_nem(text, file)
        except ParseError as e:
            from nem.frontends.upstream_dialects import parse_error_message

            where = e.span.get_location()  # one-based
            raise NemDiagnosticError(
                [
                    Diagnostic(
                        "error", parse_error_message(e), SourceLoc(file, where.line, where.col)
                    )
                ]
            ) from None
        except VerifyException as e:
            raise NemDiagnosticError(
                [Diagnostic("error", str(e).splitlines()[0], SourceLoc(file, 1, 1))]
            ) from None
        progs = list(programs(module))
        if len(progs) != 1:
            raise NemDiagnosticError(
                [
                    Diagnostic(
                        "error",
                        f"expected one nem.program, found {len(progs)}",
                        SourceLoc(file, 1, 1),
                    )
                ]
            )
        return self._load_module(module, progs[0], file, check)

    def load_module(self, module: ModuleOp, file: str = "<module>", check: bool = True) -> Program:
        """Load NEM IR already parsed (one `nem.program` in `module`), as
        `load_string` does after parsing."""
        [prog] = programs(module)
        return self._load_module(module, prog, file, check)

    def _load_module(self, module: ModuleOp, prog: ProgramOp, file: str, check: bool) -> Program:
        """Check `prog` (static and device rules) and allocate its buffers."""
        diags = self._validate(prog, file) if check else []
        errors = [d for d in diags if d.severity == "error"]
        if errors:
            raise NemDiagnosticError(diags)
        device = self._device_for(prog, file)
        topo = topology_of(device)
        memory = Memory(
            topo["num_engines"],
            topo["l2"],
            topo["l1"],
            self.ddr_size,
            device.name if device is not None else None,
        )
        catalog = device.catalog if device is not None else None
        try:
            compiled = compile_program(prog, memory, catalog, self._accum_resolver(catalog))
        except RunError as e:
            raise NemDiagnosticError([diag_from(e, file)]) from None
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
                    d.fix = (
                        "nem-run runs NEM IR: lower the MLIR first, e.g. "
                        "nem-opt X.mlir -p 'lower-to-nem{device=D}' -t nem | nem-run -"
                    )
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

    def _device_for(self, prog: ProgramOp, file: str) -> Device | None:
        if self.device is not None:
            return self.device
        from nem.devices.program_device import program_device

        return program_device(prog, file, self.include_dirs, None)

    @staticmethod
    def _accum_resolver(catalog: Catalog | None) -> AccumResolver:
        from nem.dialect.operand_binding import match_families
        from nem.dialect.verifier import baseline_catalog

        cat = catalog or baseline_catalog()

        def resolve(op: ComputeOp) -> str | None:
            res = match_families(op, cat)
            if not res.matched:
                return None
            fam = cat.families.get(res.matched[0].family)
            return fam.accum if fam is not None else None

        return resolve

    def _prog(self, program: Program | None) -> Program:
        """The program a call is about: `program`, else the last one loaded.
        The one check of every method's `program=` (a file name there failed
        deep inside with an AttributeError)."""
        if program is not None and not isinstance(program, Program):
            hint = (
                f": load the file first, e.g. it.load({program!r})"
                if isinstance(program, str | Path)
                else ""
            )
            raise TypeError(
                "program must be a Program (what load() returns), not "
                f"{program!r} ({type(program).__name__}){hint}"
            )
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

    def prepare(self, program: Program | None = None) -> bool:
        """Plan the next functional run ahead, as TFLite's `allocate_tensors`
        prepares its operators before the first `invoke` (decision
        D-RT-PREPARE): schedule every task, check races and bind each task to
        its operands without reading or writing memory, so that the first
        `run()` with the same options only computes.  True when the plan is
        ready; False when runs with the current options are always scheduled
        (timed mode, random schedules, a task count that is not static or
        above 10,000) or when the walk stopped at a run-time error or a
        deadlock, which `run()` then reports.  Write inputs before or after:
        the plan does not depend on the data."""
        from nem.runtime import replay

        return replay.prepare(self.start(program).sched)

    def run(
        self, program: Program | None = None, progress: Callable[[int], object] | None = None
    ) -> RunResult:
        """Run to completion on the program's memory (results stay readable)."""
        s = self.start(program)
        return s.run_to_end(progress)

    def run_schedules(
        self,
        k: int,
        seed: int = 0,
        program: Program | None = None,
        jobs: int | None = 1,
        max_tasks: int | None = None,
    ) -> tuple[list[RunResult], tuple[int, int, str, int] | None]:
        """Run K seeded random schedules from the current memory image, on `jobs`
        processes (None: every core; results do not depend on it).

        Returns (results, difference) where difference is None when every final
        memory is identical, else (seed_a, seed_b, buffer, byte offset).  Only a
        digest of each schedule's memory is kept; afterwards the program's
        memory is the last schedule's final memory.  K schedules of the
        program's estimated task count are at most `max_tasks` (default
        `DEFAULT_MAX_TASKS`, `nem-run --max-tasks`, D-LIMITS): a ValueError
        before anything runs (`run_schedules(2**62)` was a MemoryError)."""
        from nem.dialect.limits import DEFAULT_MAX_TASKS
        from nem.runtime.budget import estimate_task_count
        from nem.runtime.hunt import random_schedules

        k, seed = check_count("k", k), check_seed(seed)
        limit = DEFAULT_MAX_TASKS if max_tasks is None else check_count("max_tasks", max_tasks)
        p = self._prog(program)
        tasks = max(1, estimate_task_count(p.op))
        if k * tasks > limit:
            raise ValueError(
                f"run_schedules: k={k} schedules of an estimated {tasks} tasks and "
                f"loop iterations each exceed the task budget of {limit} "
                "(D-LIMITS); give a smaller k or raise max_tasks"
            )
        results, diff, last = random_schedules(self, p, k, seed, jobs)
        p.memory = last
        return results, diff

    def explore(
        self, max_schedules: int = 1000, program: Program | None = None, jobs: int | None = 1
    ) -> Exploration:
        """Run one schedule of every distinct interleaving (`nem.runtime.hunt.explore`,
        decision D-SEM-EXPLORE), at most `max_schedules`; returns an `Exploration`."""
        from nem.runtime.hunt import explore

        max_schedules = check_count("max_schedules", max_schedules)
        return explore(self, self._prog(program), max_schedules, jobs)

    # -------------------------------------------------------------- memory I/O
    def _mem(self) -> Memory:
        return self._prog(None).memory

    def write_tensor(
        self,
        buffer: str | None = None,
        tensor: npt.ArrayLike | None = None,
        offset: int = 0,
        raw: bool = False,
    ) -> int:
        """Write an array into buffer or top-level region `buffer` (at byte
        `offset`), or its bytes into DDR at `offset` when `buffer` is None.
        Unless `raw`, the array's dtype must be the target's element type
        (and a region's shape); see `nem.runtime.tensor_io`.  Returns the
        number of bytes written: an array smaller than its buffer fills its
        start and leaves the rest as it was."""
        p = self._prog(None)
        written = tensor_io.write_tensor(p.memory, p.compiled, buffer, tensor, offset, raw)
        p.given.add(tensor_io.target(p.memory, p.compiled, buffer).buffer.name)
        return written

    def check_tensor(
        self, buffer: str, shape: tuple[int, ...], dtype: npt.DTypeLike, raw: bool = False
    ) -> None:
        """Raise what `write_tensor(buffer, array, raw=raw)` would raise
        for an array of `shape` and `dtype`, without one (a file's header is
        checked before its data is read)."""
        p = self._prog(None)
        tensor_io.check_write(p.memory, p.compiled, buffer, tuple(shape), np.dtype(dtype), 0, raw)

    def encode_tensor(self, name: str, tensor: npt.ArrayLike) -> tuple[str, int, bytes]:
        """(buffer, byte offset in it, bytes) that `write_tensor(name, tensor)`
        writes into buffer or top-level region `name`, after the same checks
        (on this program's memory)."""
        p = self._prog(None)
        return tensor_io.encode_tensor(p.memory, p.compiled, name, tensor)

    def write_bytes(
        self, buffer: str | None, data: bytes | Iterable[int] | np.ndarray, offset: int = 0
    ) -> None:
        """Write raw bytes at `offset` of a buffer or top-level region (of DDR
        when `buffer` is None); bounds checked (HAZ-04) before anything is
        copied: `data` is bytes-like or an array (its bytes in C order; a
        broadcast view is never materialized, D-RT-TENSOR-IO)."""
        if isinstance(data, np.ndarray):
            raw = data
        elif data is None or isinstance(data, int | str):  # bytes(2**42): 4 TiB of zeros
            raise TypeError(
                "data must be bytes, a sequence of byte values or a numpy "
                f"array, not {type(data).__name__}"
            )
        else:
            raw = np.frombuffer(bytes(data), np.uint8)
        p = self._prog(None)
        tensor_io.write_tensor(p.memory, p.compiled, buffer, raw, offset, raw=True)
        p.given.add(tensor_io.target(p.memory, p.compiled, buffer).buffer.name)

    def read_tensor(
        self,
        buffer: str | None = None,
        shape: Sequence[int] | None = None,
        dtype: npt.DTypeLike | None = None,
        offset: int = 0,
    ) -> np.ndarray:
        """A copy of buffer or top-level region `buffer`'s values: its element
        type and shape by default, else `dtype` (an element type or its numpy
        dtype) and `shape` (positive ints) from byte `offset`; DDR from
        `offset` when `buffer` is None (bytes unless `dtype`)."""
        p = self._prog(None)
        return tensor_io.read_tensor(p.memory, p.compiled, buffer, shape, dtype, offset)

    ddr_write_tensor = write_tensor

    def ddr_write(self, offset: int, data: bytes | Iterable[int] | np.ndarray) -> None:
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

    def ddr_info(self) -> dict[str, int]:
        lv = self._mem().levels["DDR"]
        size = lv.capacity if lv.capacity is not None else lv.size
        return {"size": size, "allocated": lv.top, "free": size - lv.top}

    def randomize_inputs(self, seed: int, levels: Container[str] = ("DDR", "L2")) -> list[str]:
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
            fill_random(rng, mem.buffers[b.name].elem_hint, data[: b.size])
            if b.instance == 0:
                filled.append(b.name)
        self._prog(None).given.update(filled)
        return filled

    def unset_inputs(self, program: Program | None = None) -> list[str]:
        """The DDR and L2 buffers that a task of the program reads, that no
        task writes and that were given no contents (`write_tensor`,
        `write_bytes`, `randomize_inputs`, a `.nemb`'s Data section): the
        run reads zeros there (D-RT-INITIAL), which is what a forgotten
        input or weights archive looks like (D-RT-UNSET).  In declaration
        order; DDR buffers count as given once bytes went into DDR by offset."""
        from nem.analysis.unwritten import read_never_written

        p = self._prog(program)
        out = []
        for b in read_never_written(p.op):
            level = b.result.type.level.data.split("[")[0]
            name = b.buffer_name.data
            if (
                level in ("DDR", "L2")
                and name not in p.given
                and not (level == "DDR" and "DDR" in p.given)
                and name not in out
            ):
                out.append(name)
        return out

    def get_device_info(self) -> dict[str, object]:
        dev = self.device or (self.program.device if self.program else None)
        topo = topology_of(dev)
        return {
            "name": dev.name if dev else None,
            "num_engines": topo["num_engines"],
            "per_engine": topo["per_engine"],
            "device_units": topo["device_units"],
            "l2_size": topo["l2"],
            "l1_size": topo["l1"],
            "ddr_size": self.ddr_size,
        }

    def __repr__(self) -> str:
        dev = self.device.name if self.device is not None else "from program"
        prog = self.program.name if self.program else "none"
        sched = self.policy + (f"(seed={self.seed})" if self.policy == "random" else "")
        return f"<NemInterpreter device={dev} mode={self.mode} schedule={sched} program={prog}>"


RANDOM_CHUNK = 1 << 20
"""Elements drawn per call when filling a buffer with random values: the
draws are float64/int64, so drawing a 1 GB buffer at once took 2 GB more
(issue 11)."""


def fill_random(rng: np.random.Generator, elem: str | None, out: np.ndarray) -> None:
    """Fill the bytes `out` with seeded random values of type `elem` (see
    `randomize_inputs`), drawing RANDOM_CHUNK elements at a time (the same
    values as one draw of the whole buffer)."""
    if elem in ("f16", "bf16", "f32", "i16", "i32", "u16", "u32"):
        dt = DTYPES[elem]
        n = out.size // dt.itemsize
        vals = out[: n * dt.itemsize].view(dt)
        out[n * dt.itemsize :] = 0
        low = 0 if elem.startswith("u") else -1000
        for k in range(0, n, RANDOM_CHUNK):
            m = min(RANDOM_CHUNK, n - k)
            vals[k : k + m] = (
                rng.uniform(-1, 1, m) if elem.startswith(("f", "b")) else rng.integers(low, 1001, m)
            )
        return
    if elem == "i4":
        lo = rng.integers(0, 16, out.size, dtype=np.uint8)
        out[:] = lo | (rng.integers(0, 16, out.size, dtype=np.uint8) << 4)
        return
    out[:] = rng.integers(0, 256, out.size, dtype=np.uint8)


def check_count(name: str, n: object) -> int:
    """`n` as an int >= 1 (`run_schedules(k)`, `explore(max_schedules)`:
    `run_schedules(-1)` returned ([], None) and ran nothing)."""
    if not tensor_io.int_like(n):
        raise TypeError(f"{name} must be an int, not {n!r} ({type(n).__name__})")
    if n < 1:
        raise ValueError(f"{name} must be >= 1, not {n}")
    return int(n)


def check_seed(seed: object) -> int:
    """`seed` as an int >= 0: Python's `random.Random(-s)` is `Random(s)`,
    so a negative seed would silently repeat a positive one (and `nem-run
    --seed` refuses them as `--random-inputs` does)."""
    if not tensor_io.int_like(seed):
        raise TypeError(f"seed must be an int, not {seed!r} ({type(seed).__name__})")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, not {seed} (Python's random takes -S as S)")
    return int(seed)


def profile_problem(profile: object) -> str | None:
    """Why `profile` is not a valid cost-model override, or None (issue 11:
    wrong types, a list, zero or negative bandwidths; session 66: rates and
    latencies out of `cost.MIN_RATE`..`MAX_RATE`, `MAX_LATENCY`)."""
    from nem.dialect.semantics.cost import DEFAULT_PROFILE, MAX_LATENCY, MAX_RATE, MIN_RATE

    if not isinstance(profile, dict):
        return f"expected an object of units, got {type(profile).__name__}"
    for unit, keys in profile.items():
        if unit not in DEFAULT_PROFILE:
            return f"unknown unit {unit!r} (units: {', '.join(DEFAULT_PROFILE)})"
        if not isinstance(keys, dict):
            return f"{unit}: expected an object of parameters, got {type(keys).__name__}"
        for key, value in keys.items():
            known = [*DEFAULT_PROFILE[unit], *(MAC_RATE_KEYS if unit == "NMU" else ())]
            if key not in known:
                return f"{unit}: unknown parameter {key!r} (parameters: {', '.join(known)})"
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or value != value
                or value in (float("inf"), float("-inf"))
            ):
                return f"{unit}.{key}: expected a number, got {value!r}"
            if value < 0 or (value == 0 and key != "latency"):
                need = ">= 0" if key == "latency" else "> 0"
                return f"{unit}.{key} is {value}, must be {need}"
            if key == "latency" and value != int(value):  # durations are whole cycles
                return f"{unit}.latency is {value}, must be a whole number of cycles"
            if key == "latency" and value > MAX_LATENCY:
                return f"{unit}.latency is {value}, must be at most {MAX_LATENCY:,} cycles"
            if key != "latency" and not MIN_RATE <= value <= MAX_RATE:
                return (
                    f"{unit}.{key} is {value}, must be from {MIN_RATE} to {MAX_RATE:,} "
                    "per cycle (D-RT-COST)"
                )
    return None
