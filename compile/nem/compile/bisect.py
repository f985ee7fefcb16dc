"""The stage bisector: which step of nem-compile first computes something
other than onnxruntime (issue 31).

    nem-compile model.onnx --bisect [--device D --route R --engines N --no-pipeline]
                [--input NAME=FILE.npy ...] [--seed S] [--save-temps]

The model is compiled as `nem-compile` compiles it, keeping the program each
step leaves: the import (linalg on tensors), bufferization, and in the tile
stage every step that reports a checkpoint (`nem.compile.checkpoints`: the
affine loops, the engine split, each nest once tiled, staged in L1 and
pipelined; on the transform route the partial-sum split), the tiled
program, and the NEM program.  Each MLIR program runs on the reference path
(`nem.compile.reference.execute`: upstream lowers it to LLVM and runs it;
DMAs, memory spaces and memref softmaxes made runnable by
`nem.compile.runnable`), the NEM program in `nem-run`'s interpreter (given
as `run_nem` by the caller, `nem.cli.bisect`: the compiler does not import
the runtime, docs/design.md), all on the same inputs, and the outputs are
compared with onnxruntime at D-COMPILE-TOL.  The stages are run first; inside the first stage that
differs, the steps are run in order up to the first that differs.  Then it
says where:

* a tile step: the loop nest (its location: the ONNX node it comes from),
  its engine, tile sizes and passes;
* the import or bufferization: the first ONNX node whose value differs
  (the model cut after each node in turn, run to that stage);
* the NEM program (every MLIR step right): the lowering or the runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nem.compile.pipeline import CompileOptions, CompileResult, StageResult

if TYPE_CHECKING:
    import onnx
    from mlir import ir


@dataclass
class Step:
    name: str
    stage: str
    text: str
    where: str = ""
    status: str = ""
    """'' (not run), 'ok', 'DIFFERS' or 'not run: why'."""
    error: float = 0.0
    ratio: float = 0.0
    detail: str = ""


@dataclass
class Bisection:
    label: str
    steps: list[Step]
    compile_error: str | None = None
    culprit: Step | None = None
    node: str | None = None
    """The first ONNX node whose value differs (import/bufferize)."""
    notes: list[str] = field(default_factory=list)

    @property
    def not_run(self) -> list[Step]:
        """The steps whose program could not be run (`not run: why`): a
        difference there goes unseen, so a bisection with one is not a
        clean bill (an outside user, session 52, read "no step differs"
        where the tile stage had not run)."""
        return [s for s in self.steps if s.status.startswith("not run")]

    def last_match(self) -> Step | None:
        """The last step run before the culprit that matched onnxruntime."""
        assert self.culprit is not None
        at = self.steps.index(self.culprit)
        return next((s for s in reversed(self.steps[:at]) if s.status == "ok"), None)

    def render(self) -> str:
        lines = [self.label, f"  {'step':<28} {'max |error|':>12} {'error/tol':>11}  result"]
        for s in self.steps:
            if not s.status:
                continue
            nums = (
                f"{s.error:>12.3g} {s.ratio:>11.3g}"
                if s.status in ("ok", "DIFFERS")
                else f"{'':>12} {'':>11}"
            )
            lines.append(
                f"  {s.name:<28} {nums}  {s.status}" + (f"  {s.detail}" if s.detail else "")
            )
        if self.compile_error:
            lines.append("the compile fails: " + self.compile_error.splitlines()[0])
        skipped = ", ".join(s.name for s in self.not_run)
        if self.culprit is None:
            ran = "no step that ran" if skipped else "no step"
            lines.append(
                f"{ran} differs from onnxruntime"
                if not self.compile_error
                else f"{ran} before the failure differs from onnxruntime"
            )
            if skipped:
                lines.append(f"not run: {skipped} (a difference there is not seen)")
        else:
            s = self.culprit
            lines.append(f"first difference: {s.name}" + (f" ({s.where})" if s.where else ""))
            if self.node:
                lines.append(f"first ONNX node whose value differs: {self.node}")
            before = [t.name for t in self.not_run if self.steps.index(t) < self.steps.index(s)]
            if before:
                lines.append(
                    f"not run before it: {', '.join(before)} (the difference may come from there)"
                )
        lines += self.notes
        return "\n".join(lines)


def count_wrong(got: np.ndarray, want: np.ndarray) -> int:
    """Elements out of D-COMPILE-TOL (NaN where the other is not: wrong)."""
    from nem.compile.check import TOLERANCES

    atol, rtol = TOLERANCES[np.dtype(want.dtype)]
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore"):  # (inf - inf: NaN, counted by the test after it)
        return int(np.sum((np.abs(g - w) > atol + rtol * np.abs(w)) | (np.isnan(g) != np.isnan(w))))


def nan_apart(got: np.ndarray, want: np.ndarray) -> str:
    """`; N NaN where onnxruntime has a number` (and the other way) when
    the two disagree on which elements are NaN, else ''.  An outside user
    (session 63) read a MaxPool's NaN, which NEM's max propagates, as
    'max |error| 0, error/tol inf' with numpy's warnings between."""
    g, w = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
    parts = []
    if n := int(np.sum(g & ~w)):
        parts.append(f"{n} NaN where onnxruntime has a number")
    if n := int(np.sum(w & ~g)):
        parts.append(f"{n} number where onnxruntime has NaN")
    return "".join(f"; {p}" for p in parts)


class _Stop(Exception):
    """Stops a compile after the stage a sub-model is run to."""


def capture(
    model: str | Path | onnx.ModelProto, options: CompileOptions, until: str | None = None
) -> tuple[list[Step], CompileResult | None, str | None]:
    """Compile `model`, keeping every step's program: (steps in order, the
    CompileResult or None, the compile's error or None).  With `until`, stop
    after that stage."""
    from nem.compile import CompileError, compile_onnx
    from nem.compile.checkpoints import observing

    steps: list[Step] = []

    def progress(stage: str, result: StageResult | None) -> None:
        if result is None:
            return
        steps.append(Step("nem-run" if stage == "lower" else stage, stage, result.text))
        if stage == until:
            raise _Stop

    def hook(name: str, module: ir.Module, where: str) -> None:
        steps.append(Step(f"tile: {name}", "tile-step", str(module), _onnx_node(where)))

    try:
        with observing(hook):
            result = compile_onnx(model, options, progress=progress, stem="model")
    except _Stop:
        return steps, None, None
    except CompileError as e:
        return steps, None, str(e)
    return steps, result, None


RunNem = Callable[[CompileResult, dict[str, np.ndarray], CompileOptions], dict[str, np.ndarray]]
"""(CompileResult, inputs by ONNX name, options) -> outputs by ONNX name:
the NEM program run (`nem.cli.bisect.run_nem`)."""


class _Run:
    """Inputs, weights and onnxruntime's outputs of one model."""

    def __init__(
        self,
        model: onnx.ModelProto,
        options: CompileOptions,
        inputs: dict[str, np.ndarray],
        run_nem: RunNem | None = None,
    ):
        from nem.compile.check import holds_float16, onnxruntime_run
        from nem.compile.target import softmax_types
        from nem.devices.device_lookup import find_device
        from nem.frontends.onnx import import_onnx

        device = find_device(options.device, options.include_dirs)
        self.im = import_onnx(model, softmax_types=softmax_types(device))
        self.inputs = inputs
        self.want = onnxruntime_run(model, inputs)
        self.model = model
        self.f16 = holds_float16(model)
        self._reference: dict[str, np.ndarray] | None = None
        self.by_reference: set[str] = set()
        """The outputs judged by the reference evaluator (`judge`)."""
        self.options = options
        self.run_nem = run_nem

    def args(self) -> list[np.ndarray]:
        return [self.inputs[p.onnx_name] for p in self.im.inputs] + [
            np.ascontiguousarray(w) for w in self.im.weights.values()
        ]

    def reference(self) -> dict[str, np.ndarray]:
        """onnx's reference evaluator's outputs, computed on first need."""
        from nem.compile.check import reference_run

        if self._reference is None:
            self._reference = reference_run(self.model, self.inputs)
        return self._reference

    def judge(self, step: Step, got: dict[str, np.ndarray]) -> None:
        """Each output against onnxruntime at D-COMPILE-TOL; a float output
        out of it, of a model holding float16 tensors, against onnx's
        reference evaluator too, as `nem.compile.check` judges it (an
        outside user, session 62: Cast to f16, Mul, Cast to f32 bisected to
        'first difference: import', onnxruntime's f32 arithmetic)."""
        from nem.compile.check import max_violation, reference_violation

        step.status, step.ratio, step.error = "ok", 0.0, 0.0
        for port in self.im.outputs:
            ref = self.want[port.onnx_name]
            g = got[port.onnx_name].reshape(ref.shape)
            v = max_violation(g, ref)
            if v > 1.0 and self.f16 and ref.dtype.kind == "f":
                v = min(v, reference_violation(g, self.reference()[port.onnx_name], ref))
                if v <= 1.0:
                    self.by_reference.add(port.onnx_name)
            with np.errstate(invalid="ignore"):  # (inf - inf)
                err = float(np.nanmax(np.abs(g.astype(np.float64) - ref), initial=0.0))
            step.error = max(step.error, err)
            step.ratio = max(step.ratio, v)
            if v > 1.0:
                step.status = "DIFFERS"
                step.detail = (
                    f"{port.onnx_name}: {count_wrong(g, ref)} of {ref.size} elements differ"
                    + nan_apart(g, ref)
                )

    def run(self, step: Step, result: CompileResult | None = None) -> None:
        """Run the step's program and judge its outputs (sets step.status)."""
        if step.stage == "lower" and self.run_nem is None:
            step.status = "not run: no runtime given (run_nem)"
            return
        try:
            if step.stage == "lower":
                assert self.run_nem is not None and result is not None
                got = self.run_nem(result, self.inputs, self.options)
            else:
                got = self._mlir(step.text)
        except Exception as e:  # the reference path cannot run this program: say why
            step.status = "not run: " + (str(e).strip().splitlines() or [type(e).__name__])[0]
            return
        self.judge(step, got)

    def _mlir(self, text: str) -> dict[str, np.ndarray]:
        from nem.compile.reference import execute
        from nem.compile.runnable import runnable

        outs = execute(
            runnable(text),
            self.im.func_name,
            self.args(),
            [(p.shape, p.dtype) for p in self.im.outputs],
        )
        return {p.onnx_name: o for p, o in zip(self.im.outputs, outs)}


def _onnx_node(where: str) -> str:
    """A nest's MLIR location as the ONNX node it comes from: the importer
    locates each node's ops at the node (D-COMPILE-LOC:
    `loc("conv"("Conv"("m.onnx":1:1)))`); the copies it adds itself (model
    outputs in logical order, layout changes) carry the model file's
    location."""
    import re

    from nem.dialect.diagnostics import NODE_LOC
    from nem.frontends.onnx.locations import node_of

    m = re.match(r"loc\((" + NODE_LOC.pattern + r")\)(.*)", where)
    found = node_of(m.group(1)) if m else None
    if m and found is not None:
        return f"ONNX node '{found[1][1]}'{m.group(m.lastindex or 0)}"
    m = re.match(r'loc\("[^"]*":\d+:\d+\)(.*)', where)
    if m:
        return f"a copy the importer adds (a model output's or a layout's){m.group(1)}"
    return where


def bisect(
    model: str | Path | onnx.ModelProto,
    options: CompileOptions,
    inputs: dict[str, np.ndarray] | None = None,
    seed: int = 0,
    run_nem: RunNem | None = None,
    localize: bool = True,
) -> Bisection:
    """Compile `model` (a path or `onnx.ModelProto`) with `options`, run its
    steps on `inputs` (by ONNX name; default: uniform in [-1, 1), `seed`) and
    find the first that differs from onnxruntime; without `run_nem`, the NEM
    program is not run."""
    import onnx

    from nem.frontends.onnx import OnnxImportError
    from nem.frontends.onnx.bind import bind_inputs
    from nem.frontends.onnx.samples import random_inputs

    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    if options.bind:  # onnxruntime runs the bound model too (D-COMPILE-BIND)
        where = "<model>" if isinstance(model, onnx.ModelProto) else str(model)
        try:
            proto = bind_inputs(proto, dict(options.bind), where)
        except OnnxImportError as e:
            return Bisection("bisect", [], e.render())
        options = replace(options, bind=())
    inputs = inputs if inputs is not None else random_inputs(proto, seed)
    engines = f"{options.engines} engine(s)" if options.engines else "all engines"
    label = (
        f"bisect: {options.device}, route {options.route}, {engines}, "
        f"{'pipelined' if options.pipeline else 'not pipelined'}; inputs: "
        + ", ".join(f"{k}{list(v.shape)}" for k, v in inputs.items())
    )
    try:
        runner = _Run(proto, options, inputs, run_nem)
    except OnnxImportError as e:  # nothing to run: the import fails
        return Bisection(label, [], e.render())
    steps, result, error = capture(proto, options)
    b = Bisection(label, steps, error)
    stages = [s for s in steps if s.stage != "tile-step"]
    for s in stages:
        runner.run(s, result)
        if s.status == "DIFFERS":
            break
    if runner.by_reference:
        b.notes.append(
            ", ".join(sorted(runner.by_reference))
            + ": out of tolerance of onnxruntime's result where a step matches onnx's "
            "reference evaluator, which computes each op in its declared type "
            "(onnxruntime computes some float16 ops in float32): judged by it"
        )
    bad = next((s for s in stages if s.status == "DIFFERS"), None)
    if bad is None:
        return b
    b.culprit = bad
    if bad.stage == "tile":
        for s in [s for s in steps if s.stage == "tile-step"]:
            runner.run(s)
            if s.status == "DIFFERS":
                b.culprit = s
                break
        if b.culprit is bad:
            b.notes.append(
                "every checkpoint of the tile stage matches: the difference "
                "comes from its last steps (canonicalize, cse, softmax staging)"
            )
    elif bad.stage == "lower":
        b.notes.append(
            "every MLIR step matches onnxruntime: the difference comes from "
            "lower-to-nem (or nem-run); compare the tile stage's program "
            "(--save-temps: STEM.tile.mlir) with the .nem"
        )
    else:
        if localize:
            b.node = first_wrong_node(proto, options, inputs, bad.stage)
        _judge_program(b, stages, runner, result)
    return b


def _judge_program(
    b: Bisection, stages: list[Step], runner: _Run, result: CompileResult | None
) -> None:
    """After an MLIR step that differs, run the NEM program too: when it
    matches onnxruntime, the step computes what its IR says, not what the
    compiled program does, and the verdict says so instead of blaming a
    stage of a right compile.  The case met: an f16 reduction, which linalg
    accumulates in f16 at each step while the program (its `accum_type`)
    and onnxruntime accumulate in f32."""
    final = next((s for s in stages if s.stage == "lower"), None)
    if final is None or result is None or runner.run_nem is None:
        return
    runner.run(final, result)
    if final.status != "ok":
        return
    f16 = any(p.dtype == np.dtype(np.float16) for p in runner.im.outputs)
    b.notes.append(
        "the compiled program (nem-run) matches onnxruntime: no miscompile; the steps "
        "from the first difference on compute what their MLIR says"
        + (
            ", and linalg accumulates an f16 reduction in f16 where the program and "
            "onnxruntime accumulate in f32"
            if f16
            else ""
        )
        + " (the reference path's rounding, not the compiler's)"
    )


def first_wrong_node(
    model: onnx.ModelProto, options: CompileOptions, inputs: dict[str, np.ndarray], stage: str
) -> str | None:
    """The first node whose outputs, made the model's outputs, differ from
    onnxruntime's at `stage` ('import' or 'bufferize')."""
    import copy

    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    for k, node in enumerate(model.graph.node):
        if node.op_type == "Constant" or not all(o in types for o in node.output if o):
            continue
        sub = copy.deepcopy(model)
        del sub.graph.node[k + 1 :]
        del sub.graph.output[:]
        sub.graph.output.extend(types[o] for o in node.output if o)
        used = {i for n in sub.graph.node for i in n.input}
        ins = {n: a for n, a in inputs.items() if n in used}
        kept = [
            vi
            for vi in sub.graph.input
            if vi.name in used or vi.name in {i.name for i in sub.graph.initializer}
        ]
        del sub.graph.input[:]
        sub.graph.input.extend(kept)
        try:
            runner = _Run(sub, options, ins)
            steps, _, _ = capture(sub, options, until=stage)
        except Exception:  # a cut the importer or onnxruntime refuses: try the next node
            continue
        step = next((s for s in steps if s.stage == stage), None)
        if step is None:
            continue
        runner.run(step)
        if step.status == "DIFFERS":
            name = node.name or f"{node.op_type}_{k}"  # as the importer names it
            return f"node {k} '{name}' ({node.op_type}): {step.detail}"
    return None
