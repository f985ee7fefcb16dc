"""The nem-compile pipeline, declared as data: named stages run in order.

    import     ONNX -> linalg on tensors                (nem.frontends.onnx)
    bufferize  one-shot bufferization, results -> out-parameters (upstream)
    tile       device-aware tiling, tiles staged in L1, pipelined  (upstream,
               per loop nest: nem.compile.tiling)
    lower      lower-to-nem (xDSL), then nem-verify on the printed program

`--dump-after=STAGE` and `--save-temps` read the text each stage leaves
(`StageResult.text`): MLIR for the first three, `.nem` for `lower`.  The
upstream stages run in-process on one `mlir.ir.Module` with the bindings'
`PassManager`; the lowering parses the tiled MLIR with xDSL.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from nem.compile.bufferize import BUFFERIZE as BUFFERIZE  # the stage's passes, here too
from nem.compile.errors import CompileError
from nem.compile.options import CompileOptions as CompileOptions  # its home; here too
from nem.compile.target import FAST_SPACE

if TYPE_CHECKING:  # nem.compile.flops needs the mlir extra
    from mlir import ir

    from nem.compile.flops import FlopShare
    from nem.compile.lower import Verified

T = TypeVar("T")


ROUTES = ("affine", "transform")


@dataclass(frozen=True)
class Stage:
    name: str
    description: str
    suffix: str
    """File suffix of the text the stage leaves (`--save-temps`)."""


STAGES = (
    Stage("import", "ONNX -> linalg on tensors", ".import.mlir"),
    Stage("bufferize", "bufferization, results as out-parameters", ".bufferize.mlir"),
    Stage("tile", "tiles sized to L1, staged by DMA, pipelined", ".tile.mlir"),
    Stage("lower", "lower-to-nem and nem-verify", ".nem"),
)
STAGE_NAMES = tuple(s.name for s in STAGES)
MAX_RETILES = 3
"""Tile stages run again for a smaller L1 when the lowered program overflows one."""


@dataclass
class StageResult:
    name: str
    text: str
    seconds: float
    """Wall-clock time of the stage."""
    cpu_seconds: float = 0.0
    """CPU time of the process during the stage (`time.process_time`: every
    thread's, upstream's passes may run several)."""
    located: str | None = None
    """With `CompileOptions.located_temps`, an MLIR stage's text with each
    op's location inline, on the line and column where `text` has the op
    (`nem.compile.located`, D-COMPILE-TEMPS-LOC); None otherwise and for
    the user's own `.mlir` text."""


@dataclass
class Interface:
    """The program's buffers: inputs, weights (with their contents) and
    outputs, in argument order, with the model's names, shapes and dtypes."""

    inputs: list[tuple[str, tuple[int, ...], np.dtype]]
    weights: dict[str, np.ndarray]
    outputs: list[tuple[str, tuple[int, ...], np.dtype]]
    onnx_names: dict[str, str] = field(default_factory=dict)
    """NEM buffer name -> ONNX value name (ONNX inputs and outputs)."""
    onnx_dtypes: dict[str, np.dtype] = field(default_factory=dict)
    """NEM buffer name -> the model's element type, where the program holds
    another (an int64 input as int32, D-COMPILE-I64)."""

    @property
    def arg_names(self) -> list[str]:
        return [n for n, _, _ in self.inputs] + list(self.weights) + [n for n, _, _ in self.outputs]


@dataclass
class CompileResult:
    nem: str
    """The verified `.nem` program."""
    interface: Interface
    func_name: str
    stages: list[StageResult]
    remarks: list[str]
    memory_spaces: str
    flops: FlopShare | None = None
    """FLOPs raised to NEM opcodes vs run by escape-hatch kernels (nem.compile.flops)."""
    origins: list[str | None] = field(default_factory=list)
    """The ONNX node (its MLIR location, `loc("conv1"("Conv"("m.onnx":3:1)))`)
    each statement of `nem` was lowered from, in `printed_statements` order,
    None for none: what `nem-compile -o FILE.nemb` writes in the Debug
    section (D-BC-NODES)."""
    warnings: list[str] = field(default_factory=list)
    """What `nem-compile` prints without -v (`remarks` are -v's): one line
    when less than half of the FLOPs were raised to NEM opcodes
    (D-COMPILE-LOW-SHARE), one when weights of zeros make nodes ignore their
    inputs (D-COMPILE-ZERO-WEIGHTS)."""
    located: Callable[[str], str] = str
    """Lines of the lower stage (remarks, joined by newlines) with each one
    located in the tiled program, which only --save-temps writes, led by its
    ONNX node(s) instead, or the model file for a function's remark
    (D-COMPILE-LOC; `nem-compile -v` without --save-temps).  Prints the tiled
    module when called: the compile itself does not pay for it."""
    verified: Verified | None = None
    """`nem` as nem-verify read it back and accepted (None without
    verification), which the first `nem.cli.nem_compile.nemb_bytes` takes
    (None after): it adds the ONNX nodes to its locations."""

    def stage(self, name: str) -> StageResult:
        """The stage's last run (the tile and lower stages run again when the
        lowered program overflowed L1, D-COMPILE-L1)."""
        return next(s for s in reversed(self.stages) if s.name == name)

    def save_weights(self, path: str) -> None:
        """The weights sidecar: one array per weight buffer, keyed by buffer
        name (`nem-run prog.nem --input FILE.npz`)."""
        arrays: dict[str, Any] = dict(self.interface.weights)  # names only, no flags
        np.savez(path, **arrays)


Progress = Callable[[str, "StageResult | None"], None]
"""Called with (stage name, None) when a stage starts and (stage name, its
result) when it is done (the CLI's progress display, --dump-after, --save-temps).
The object may also have `step(stage, what, done, total)`, told how far a
stage is (ONNX nodes imported, ops tiled, top-level ops lowered), and
`substage(stage, name, seconds, cpu_seconds)`, told of each part of a stage
as it ends (the lowering's passes, the verification), with its wall and CPU
time."""


class Driver:
    """Runs the stages after `import` on one upstream module."""

    def __init__(self, options: CompileOptions, progress: Progress | None = None):
        self.options = options
        self.progress = progress or (lambda stage, result: None)
        self.results: list[StageResult] = []
        from nem.devices.device_lookup import find_device

        try:
            self.device = find_device(options.device, options.include_dirs)
        except Exception as e:  # NemDiagnosticError: unknown device
            raise CompileError("device", str(e)) from e
        if options.route not in ROUTES:
            raise CompileError(
                "tile", f"unknown route '{options.route}' (routes: {', '.join(ROUTES)})"
            )
        engines = options.engines or self.device.topology.num_engines
        if not 1 <= engines <= self.device.topology.num_engines:
            raise CompileError(
                "tile",
                f"--engines {engines}: {self.device.name} has "
                f"{self.device.topology.num_engines} engine(s)",
            )
        self.engines = engines
        self.flops: FlopShare | None = None
        self.constants: dict[str, np.ndarray] = {}
        """The initial contents of the lowered `memref.global`s (D-COMPILE-CONSTS)."""
        self.l1_scale = 1.0
        """The share of each L1 the tile stage plans for (D-COMPILE-L1)."""
        self.tiled: Any = None
        """The module the tile stage left (`ir.Module`), with its locations."""
        self._tiled_located: str | None = None
        """`tiled_located`'s text, printed at most once per tiling."""
        self._bufferized: Any = None
        """A copy of the bufferized module, tiled again on a re-tiling with
        its locations (the stage text has none)."""
        self.origins: list[str | None] = []
        """`CompileResult.origins` of the lowered program."""
        self.verified: Verified | None = None
        """`CompileResult.verified`."""
        self.stage = "import"

    def advance(self, what: str, done: int, total: int) -> None:
        """Tell the progress display how far the current stage is."""
        tell = getattr(self.progress, "step", None)
        if tell is not None:
            tell(self.stage, what, done, total)

    def substep(self, name: str, work: Callable[[], T]) -> T:
        """Run one part of the current stage, timed, told to the progress
        display when it ends (`nem-compile -v` prints it then)."""
        t0, c0 = time.perf_counter(), time.process_time()
        out = work()
        tell = getattr(self.progress, "substage", None)
        if tell is not None:
            tell(self.stage, name, time.perf_counter() - t0, time.process_time() - c0)
        return out

    def timed(
        self, name: str, fn: Callable[[], str], module: Callable[[], Any] | None = None
    ) -> str:
        """Run stage `name`, without the cyclic garbage collector: a stage
        builds and rewrites an IR of millions of objects, each of which every
        full collection would scan again (18% of SqueezeNet's compile, for
        9% more memory); the collector runs again after the stage.
        `module()`: the `ir.Module` the stage leaves, printed with its
        locations when `located_temps` asks for them (not timed)."""
        from nem.dialect.gc_pause import gc_paused

        self.stage = name  # the stage a failure belongs to
        self.progress(name, None)
        t0, c0 = time.perf_counter(), time.process_time()
        with gc_paused():
            text = fn()
        self.results.append(
            StageResult(name, text, time.perf_counter() - t0, time.process_time() - c0)
        )
        if self.options.located_temps and module is not None:
            from nem.compile.located import located_text

            self.results[-1].located = located_text(module())
        self.progress(name, self.results[-1])
        return text

    # ------------------------------------------------------------------
    def memory_spaces(self) -> str:
        """The lowering's map: memref space 2 + k is engine k's L1."""
        l1 = ",".join(f"{FAST_SPACE + k}:L1[{k}]" for k in range(self.engines))
        return f"0:DDR,1:L2,{l1}"

    def upstream(self, module: ir.Module, func_name: str) -> None:
        """bufferize and tile, in place."""

        def bufferize() -> str:
            from nem.compile import bufferize
            from nem.compile.softmax import decompose_unsupported

            decompose_unsupported(module, self.device)  # on tensors (D-COMPILE-SOFTMAX)
            bufferize.run(module, self.options)  # D-COMPILE-BUFFERIZE-ARGS
            return str(module)

        self.timed("bufferize", bufferize, lambda: module)
        self._bufferized = module.operation.clone()
        self.tile(module, func_name)

    def tile(self, module: ir.Module, func_name: str) -> None:
        """The tile stage on the bufferized `module`, in place, for an L1 of
        `l1_scale` times the device's (D-COMPILE-L1)."""
        from dataclasses import replace

        topo = self.device.topology
        device = replace(
            self.device,
            topology=replace(topo, l1_size_bytes=int(topo.l1_size_bytes * self.l1_scale)),
        )

        def tile() -> str:
            from nem.compile import softmax, tiling

            entry = _entry(module, func_name)
            if self.options.route == "transform":
                from nem.compile import transform

                transform.tile_module(
                    module, entry, device, self.options, self.engines, self.advance
                )
            else:
                tiling.tile_module(module, entry, device, self.options, self.engines, self.advance)
            softmax.stage(entry, device, self.options, self.engines)
            return str(module)

        self.timed("tile", tile, lambda: module)
        self.tiled = module
        self._tiled_located = None

    def tiled_located(self) -> str:
        """The tiled module printed with its locations, once: the ONNX nodes
        of the lowered statements are read from it, and those of the lower
        stage's diagnostics and remarks (D-COMPILE-LOC; DenseNet-121's takes
        1.8 s to print, which `nem-compile -v` paid twice)."""
        if self._tiled_located is None:
            self._tiled_located = self.tiled.operation.get_asm(
                enable_debug_info=True, use_local_scope=True
            )
        return self._tiled_located

    def lower(self, func_name: str, arg_names: list[str], file: str) -> tuple[str, list[str]]:
        """The lower stage on the tile stage's text.  Each op's tiles fit L1
        as measured (D-COMPILE-L1); should the lowered program still exceed
        an L1 (DEV-16), the bufferized program is tiled again for a smaller
        L1, up to `MAX_RETILES` times: the compiler does not emit a program
        its own checks reject."""
        from mlir import ir

        from nem.compile.lower import OverCapacity, lower_and_verify

        remarks: list[str] = []

        def run() -> str:
            from nem.compile.flops import flop_share
            from nem.frontends.onnx.locations import statement_nodes

            tiled = self.stage_text("tile")
            assert tiled is not None
            at: list[tuple[int, int] | None] = []
            nem, notes, escaped, self.constants, self.verified = lower_and_verify(
                tiled,
                func_name,
                arg_names,
                self.device.name,
                self.memory_spaces(),
                file,
                self.options,
                self.substep,
                self.advance,
                at,
            )
            if self.options.origins:
                self.origins = self.substep(
                    "ONNX nodes",
                    lambda: statement_nodes(tiled, self.tiled_located(), at),
                )
            remarks.extend(notes)
            self.flops = self.substep("FLOP count", lambda: flop_share(tiled, escaped, self.tiled))
            remarks.append(f"{file}: remark: {self.flops.remark()}")
            return nem

        for attempt in range(MAX_RETILES + 1):
            try:
                return self.timed("lower", run), remarks
            except OverCapacity as e:
                if self.options.tile_sizes:  # the user's sizes: tiling again shrinks none
                    sizes = ",".join(map(str, self.options.tile_sizes))
                    raise CompileError(
                        "lower",
                        f"{file}: error: not supported: with --tile-sizes {sizes} each op's "
                        "tiles fit L1 alone, but the lowered program's do not once packed "
                        f"(D-LOW-SHARE) [DEV-16]:\n{e}\nfix: pass smaller --tile-sizes, or "
                        "leave them out to let the compiler choose (decision D-COMPILE-L1)",
                    ) from None
                if attempt == MAX_RETILES or self._bufferized is None:
                    raise CompileError(
                        "lower",
                        f"internal: the tiles do not fit L1 after "
                        f"{attempt} re-tilings (D-COMPILE-L1):\n{e}",
                    ) from None
                self.l1_scale *= min(0.9 / e.ratio, 0.9)
                remarks.append(
                    f"{file}: remark: the lowered program exceeded L1 "
                    f"({e.ratio:.2f}x); tiled again for {self.l1_scale:.0%} of it "
                    "(D-COMPILE-L1)"
                )
                module = ir.Module.parse(self._bufferized.get_asm(enable_debug_info=True))
                self.tile(module, func_name)
        raise AssertionError("unreachable")

    def stage_text(self, name: str) -> str | None:
        """The text the last run of stage `name` left (None: it did not run)."""
        return next((r.text for r in reversed(self.results) if r.name == name), None)


def _entry(module: ir.Module, func_name: str) -> ir.Operation:
    from mlir import ir

    for op in module.body.operations:
        if (
            op.operation.name == "func.func"
            and ir.StringAttr(op.attributes["sym_name"]).value == func_name
        ):
            return op.operation
    raise CompileError("tile", f"no function @{func_name}")


_SIG = re.compile(r"func\.func\s+(?:public\s+)?@([\w$.-]+)\s*\(([^)]*)\)")


def mlir_arg_names(text: str, func_name: str) -> list[str] | None:
    """The argument names of `@func_name` as written (`%x: tensor<..>` -> `x`)."""
    for m in _SIG.finditer(text):
        if m.group(1) == func_name:
            return re.findall(r"%([\w$.-]+)\s*:", m.group(2))
    return None
