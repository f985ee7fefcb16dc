"""`nem-compile --tune`: tile sizes chosen by the timed cost model
(D-COMPILE-TUNE, issue 35 item 3).

The tile stage sizes each op's tiles to the L1 budget (D-COMPILE-TILES),
whole inner rows first; nothing there asks what the tiles cost.  The tuner
asks the timed cost model (D-RT-COST) instead, op by op:

1. the model is imported as `nem-compile` imports it; each linalg op with
   loops becomes a program of its own (`extract`: the op, its operands as
   arguments, its constants cloned), searched largest iteration space first;
2. for that program, candidate tile sizes (`candidates`): each parallel loop
   takes its extent, the default size or the extent halved again and again;
   a reduction loop keeps the default size, so every output element sums
   its terms in the same order as untuned (the tuned program's outputs are
   bit-identical to the untuned one's);
3. each candidate is compiled with `--tile-sizes` (`compile_mlir`, without
   nem-verify) and run once in timed mode: its score is the cycles; a
   candidate that does not compile scores nothing; all of a small space is
   tried (at most `trials`), else optuna's TPE sampler, seeded, picks `trials`
   of it, the default first; the best is compiled again with nem-verify and
   dropped for the default if that fails;
4. the whole model is compiled with the sizes that beat the default
   (`CompileOptions.op_tile_sizes`, keyed by `transform.op_keys`); should
   that compile fail, the untuned one is the result.

The search stops at `budget` seconds (checked between candidates): with the
same seed and a budget that is not reached, the result is the same.  Engine
splits are not searched (the tile stage's `choose_split` stays).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from mlir import ir

from nem.compile.pipeline import CompileOptions, CompileResult, Progress

if TYPE_CHECKING:
    import onnx

    from nem.dialect.device_model import Device


@dataclass
class NestResult:
    key: str
    extents: list[int]
    default: list[int]
    default_cycles: int | None
    best: list[int]
    best_cycles: int | None
    tried: int


@dataclass
class TuneReport:
    nests: list[NestResult] = field(default_factory=list)
    seconds: float = 0.0
    budget_reached: bool = False
    fallback: str | None = None
    """Why the tuned sizes were dropped (the whole model did not compile with them)."""

    def remarks(self, file: str) -> list[str]:
        out = []
        for n in self.nests:
            if n.best != n.default:
                out.append(
                    f"{file}: remark: --tune: {n.key}: tile sizes {n.best} instead of "
                    f"{n.default}: {n.best_cycles} cycles alone instead of "
                    f"{n.default_cycles} ({n.tried} candidates, D-COMPILE-TUNE)"
                )
        state = "budget reached" if self.budget_reached else "every op searched"
        out.append(
            f"{file}: remark: --tune: {len(self.nests)} ops searched in "
            f"{self.seconds:.1f} s ({state}); {sum(n.best != n.default for n in self.nests)} "
            "retiled"
        )
        if self.fallback:
            out.append(f"{file}: remark: --tune: the tuned sizes were dropped: {self.fallback}")
        return out


def extract(op: ir.Operation) -> str:
    """A module whose one function computes `op` alone: the values it uses
    from outside are arguments (constants are cloned), its results returned."""
    from mlir.dialects import func

    from nem.compile.nest_ir import outside_values, owner_op, replace_in

    external, constants = outside_values(op)
    with ir.Location.unknown(op.context):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("nest", ([v.type for v in external], [r.type for r in op.results]))
            entry = fn.add_entry_block()
        with ir.InsertionPoint(entry):
            mapping = list(zip(external, entry.arguments))
            for c in constants:
                owner = owner_op(c)
                assert owner is not None, "a constant has a defining op"
                mapping.append((c, owner.clone().results[0]))
            copy = op.clone()
            replace_in(copy, mapping)
            func.ReturnOp(list(copy.results))
    return str(module.operation.get_asm(enable_debug_info=True, use_local_scope=True))


@dataclass
class Space:
    """One op's search space: per loop, the sizes tried (the default first)."""

    extents: list[int]
    default: list[int]
    choices: list[list[int]]

    @property
    def size(self) -> int:
        return math.prod(len(c) for c in self.choices)


def candidates(extents: list[int], default: list[int], parallel: list[bool]) -> Space:
    """Each parallel loop: its default size, its extent and the extent halved
    (rounding up) down to 1, at most 6 sizes; a reduction loop: the default."""
    choices = []
    for e, d, par in zip(extents, default, parallel):
        if not par:
            choices.append([d])
            continue
        sizes = [d]
        s = e
        while len(sizes) < 6:
            if s not in sizes:
                sizes.append(s)
            if s == 1:
                break
            s = -(-s // 2)
        choices.append(sizes)
    return Space(extents, default, choices)


def space_of(text: str, device: Device, options: CompileOptions) -> Space | None:
    """The search space of the one op of `text` (an `extract`), as the tile
    stage would see it after bufferization; None: nothing to tile."""
    from mlir.passmanager import PassManager

    from nem.compile import transform
    from nem.compile.pipeline import BUFFERIZE

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        PassManager.parse(f"builtin.module({BUFFERIZE},canonicalize,cse)").run(module.operation)
        fn = next(o.operation for o in module.body.operations if o.operation.name == "func.func")
        plans = transform.plan_ops(fn, device, options)
        ops = transform.linalg_ops(fn)
        found = [(op, p) for op, p in zip(ops, plans) if p is not None]
        if len(found) != 1:
            return None
        op, plan = found[0]
        PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(
            module.operation
        )
        generic = [o for o in transform.linalg_ops(fn) if o.name == "linalg.generic"]
        if len(generic) != 1 or "iterator_types" not in generic[0].attributes:
            return None
        kinds = [str(a) for a in ir.ArrayAttr(generic[0].attributes["iterator_types"])]
        if len(kinds) != len(plan.extents):
            return None
        return candidates(plan.extents, plan.sizes, ["parallel" in k for k in kinds])


Timer = Callable[[str, str], "int | None"]
"""(a `.nem` program, the device) -> its timed cycles, None if it does not
run to its end: the runtime's, given by the caller (`nem.cli.roofline_cli.
timed_cycles`; the compiler imports no runtime)."""


def cycles_of(text: str, sizes: list[int], options: CompileOptions, timer: Timer) -> int | None:
    """Timed cycles of the one-op program `text` tiled by `sizes`, None if it
    does not compile (or does not run to its end)."""
    from nem.compile import CompileError, compile_mlir

    try:
        result = compile_mlir(
            text, replace(options, tile_sizes=tuple(sizes), origins=False, op_tile_sizes=())
        )
    except CompileError:
        return None
    return timer(result.nem, options.device)


def search(
    space: Space, score: Callable[[list[int]], int | None], trials: int, seed: int, deadline: float
) -> tuple[list[int], int | None, int]:
    """(best sizes, their score, candidates tried): every candidate of a space
    of at most `trials`, else `trials` of optuna's seeded TPE sampler; the
    default first either way; none after `deadline`."""
    import itertools

    best, best_score = space.default, score(space.default)
    tried = 1

    def consider(sizes: list[int]) -> int | None:
        nonlocal best, best_score, tried
        tried += 1
        s = score(sizes)
        if s is not None and (best_score is None or s < best_score):
            best, best_score = sizes, s
        return s

    if space.size <= trials:
        for combo in itertools.product(*space.choices):
            if time.monotonic() >= deadline:
                break
            if list(combo) != space.default:
                consider(list(combo))
        return best, best_score, tried
    try:
        import optuna
    except ImportError:
        from nem.compile import CompileError

        raise CompileError(
            "tune",
            f"--tune: the {space.size} tile shapes of this nest are more "
            f"than {trials} trials, a search that needs the optuna package, "
            "which is not installed: pip install optuna (it comes with the "
            "mlir extra: pip install -e '.[mlir]')",
        ) from None

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    seen = {tuple(space.default)}
    for _ in range(trials - 1):
        if time.monotonic() >= deadline:
            break
        trial = study.ask()
        sizes = [
            trial.suggest_categorical(f"d{i}", c) if len(c) > 1 else c[0]
            for i, c in enumerate(space.choices)
        ]
        if tuple(sizes) in seen:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        seen.add(tuple(sizes))
        s = consider(sizes)
        study.tell(trial, float(s) if s is not None else float("inf"))
    return best, best_score, tried


def tune(
    model: str | Path | onnx.ModelProto,
    options: CompileOptions,
    timer: Timer,
    budget: float = 60.0,
    seed: int = 0,
    trials: int = 12,
    progress: Callable[[str], None] | None = None,
) -> tuple[CompileOptions, TuneReport]:
    """`options` with the tile sizes the search found for the ONNX `model`
    (`op_tile_sizes`), and what it did."""
    from nem.compile import import_model
    from nem.compile.pipeline import Driver
    from nem.compile.transform import has_loops, linalg_ops, op_keys

    t0 = time.monotonic()
    deadline = t0 + budget
    report = TuneReport()
    device = Driver(options).device
    im = import_model(model, options, device)
    with im.context:
        fn = next(
            o.operation
            for o in im.module.body.operations
            if o.operation.name == "func.func"
            and ir.StringAttr(o.operation.attributes["sym_name"]).value == im.func_name
        )
        ops = linalg_ops(fn)
        texts = [
            (key, extract(op)) for op, key in zip(ops, op_keys(ops)) if has_loops(op) and op.results
        ]
    todo: list[tuple[int, int, str, str, Space]] = []
    for key, text in texts:  # the spaces first: the largest iteration spaces go first
        space = space_of(text, device, options)
        if space is not None and space.size > 1:
            todo.append((-math.prod(space.extents), len(todo), key, text, space))
    todo.sort()
    found: list[tuple[str, tuple[int, ...]]] = []
    for *_, key, text, space in todo:
        if time.monotonic() >= deadline:
            report.budget_reached = True
            break
        if progress is not None:
            progress(f"--tune: {key}: {space.size} candidates")
        scores: dict[tuple[int, ...], int | None] = {}

        def score(
            sizes: list[int], text: str = text, scores: dict[tuple[int, ...], int | None] = scores
        ) -> int | None:
            # candidates are compiled unverified; the one kept is verified below
            scores[tuple(sizes)] = cycles_of(text, sizes, replace(options, verify=False), timer)
            return scores[tuple(sizes)]

        best, best_cycles, tried = search(space, score, trials, seed, deadline)
        if best != space.default and cycles_of(text, best, options, timer) is None:
            best, best_cycles = space.default, scores[tuple(space.default)]  # fails nem-verify
        report.nests.append(
            NestResult(
                key,
                space.extents,
                space.default,
                scores[tuple(space.default)],
                best,
                best_cycles,
                tried,
            )
        )
        if best != space.default:
            found.append((key, tuple(best)))
    report.budget_reached = report.budget_reached or time.monotonic() >= deadline
    report.seconds = time.monotonic() - t0
    return replace(options, op_tile_sizes=tuple(found)), report


def compile_tuned(
    model: str | Path | onnx.ModelProto,
    options: CompileOptions,
    timer: Timer,
    budget: float = 60.0,
    seed: int = 0,
    trials: int = 12,
    progress: Progress | None = None,
    stem: str | None = None,
) -> tuple[CompileResult, TuneReport]:
    """`compile_onnx(model)` with tuned tile sizes (falling back to the
    untuned compile should the tuned one fail), and the tuner's report."""
    from nem.compile import CompileError, compile_onnx

    tuned, report = tune(model, options, timer, budget, seed, trials)
    file = str(model) if isinstance(model, str) else "<model>"
    if tuned.op_tile_sizes:
        try:
            result = compile_onnx(model, tuned, progress=progress, stem=stem)
        except CompileError as e:
            report.fallback = str(e).splitlines()[0]
            result = compile_onnx(model, options, progress=progress, stem=stem)
    else:
        result = compile_onnx(model, options, progress=progress, stem=stem)
    result.remarks.extend(report.remarks(file))
    return result, report
