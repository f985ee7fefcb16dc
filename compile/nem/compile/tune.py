"""`nem-compile --tune`: tile sizes chosen by the timed cost model
(D-COMPILE-TUNE, issue 35 item 3).

The tile stage sizes each op's tiles to the L1 budget (D-COMPILE-TILES),
whole inner rows first; nothing there asks what the tiles cost.  The tuner
asks the timed cost model (D-RT-COST) instead, op by op:

1. the model is imported as `nem-compile` imports it; each linalg op with
   loops becomes a program of its own (`extract`: the op, its operands as
   arguments, its constants cloned), each timed untuned, largest iteration
   space first (`_untuned`), then searched farthest above its own roofline
   bound first (its untuned cycles over the bound, summed over the ops
   alike: what its tiles can win back);
2. for that program, the candidates (`Choice`): the untuned op; the tile
   rules run on a share of L1 (`SHARES`, as the driver's re-tiling runs them
   on the whole program, D-COMPILE-L1, engine split included) where that
   tiles the op otherwise and tiles each reduction loop (and any split of
   one) alike (`same_sums`); tile sizes (`candidates`): each parallel loop
   takes its extent, the default size or the extent halved again and again,
   a reduction loop keeps the default size.  Either way every output element
   sums its terms in the same order as untuned: the tuned program's outputs
   are bit-identical to the untuned one's;
3. each candidate is compiled (`compile_mlir`, without nem-verify) and run
   once in timed mode: its score is the cycles; a candidate that does not
   compile scores nothing; the untuned op and its shares first, then all of
   a small space of sizes (at most `trials`), else optuna's TPE sampler,
   seeded, picks `trials` of it, the default first; the fewest cycles win
   (the earlier on a tie), compiled again with nem-verify and dropped for
   the untuned op if that fails; an op whose program is another's but for
   its locations takes that op's choice (`search_op`, once);
4. the whole model is compiled with the choices that beat the untuned op
   (`CompileOptions.op_tile_sizes`, `op_l1_scales`, keyed by
   `transform.op_keys`); should that compile fail, or its whole program
   not run in fewer timed cycles than the untuned one's, the untuned one is
   the result (`_faster`, session 34).

The search stops at `budget` seconds (checked between candidates): with the
same seed and a budget that is not reached, the result is the same.  Engine
splits are searched only as a share's tile rules choose them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from mlir import ir

from nem.compile.pipeline import CompileOptions, CompileResult, Progress

if TYPE_CHECKING:
    import onnx

    from nem.compile.plan import Plan
    from nem.dialect.device_model import Device


@dataclass(frozen=True)
class Choice:
    """How the tile stage tiles one op: by its rules on all of L1 (the
    untuned choice, `Choice()`), on `share` of it, or by `sizes`."""

    sizes: tuple[int, ...] | None = None
    share: float = 1.0

    def __str__(self) -> str:
        if self.sizes is not None:
            return f"tile sizes {list(self.sizes)}"
        return "the tile rules on all of L1" if self.share == 1.0 else f"{self.share:g} of L1"


SHARES = (0.9, 0.81, 0.5)
"""The L1 shares whose tiles are candidates: the budgets the driver's own
re-tiling steps through (D-COMPILE-L1: 0.9 of the last, 0.81 after two), and
half, one halving step of the tile rule (D-COMPILE-TUNE)."""


@dataclass
class NestResult:
    key: str
    extents: list[int]
    default: list[int]
    """The parallel search's first sizes (the tile rule's, unsplit)."""
    default_cycles: int | None
    """The untuned op's cycles alone (`Choice()`)."""
    best: Choice
    best_cycles: int | None
    tried: int

    @property
    def retiled(self) -> bool:
        return self.best != Choice()


@dataclass
class TuneReport:
    nests: list[NestResult] = field(default_factory=list)
    seconds: float = 0.0
    budget_reached: bool = False
    fallback: str | None = None
    """Why the tuned sizes were dropped (the whole model did not compile with
    them, or did not run faster with them)."""
    whole: tuple[int | None, int | None] | None = None
    """The whole program's timed cycles untuned and tuned, when both were
    compiled (None: it did not run to its end)."""

    def remarks(self, file: str) -> list[str]:
        out = []
        for n in self.nests:
            if n.retiled:
                out.append(
                    f"{file}: remark: --tune: {n.key}: {n.best} instead of the tile rules "
                    f"on all of L1: {n.best_cycles} cycles alone instead of "
                    f"{n.default_cycles} ({n.tried} candidates, D-COMPILE-TUNE)"
                )
        state = "budget reached" if self.budget_reached else "every op searched"
        out.append(
            f"{file}: remark: --tune: {len(self.nests)} ops searched in "
            f"{self.seconds:.1f} s ({state}); {sum(n.retiled for n in self.nests)} "
            "retiled"
        )
        if self.fallback:
            out.append(f"{file}: remark: --tune: the tuned sizes were dropped: {self.fallback}")
        return out


def extract(op: ir.Operation, located: bool = True) -> str:
    """A module whose one function computes `op` alone: the values it uses
    from outside are arguments (constants are cloned), its results returned;
    without its locations (`located=False`), alike for ops alike."""
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
    return str(module.operation.get_asm(enable_debug_info=located, use_local_scope=True))


@dataclass
class Space:
    """One op's search space: per loop, the sizes tried (the default first);
    the L1 shares whose tiles differ from the untuned ones and keep its
    reduction tiles (`shares`); the op's key in its own program (`key`)."""

    extents: list[int]
    default: list[int]
    choices: list[list[int]]
    shares: list[float] = field(default_factory=list)
    key: str = ""

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


def space_of(text: str, device: Device, options: CompileOptions, engines: int = 1) -> Space | None:
    """The search space of the one op of `text` (an `extract`), as the tile
    stage would see it after bufferization (its shares planned over
    `engines`, as the compile plans them); None: nothing to tile."""
    from mlir.passmanager import PassManager

    from nem.compile import transform
    from nem.compile.pipeline import BUFFERIZE

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        PassManager.parse(f"builtin.module({BUFFERIZE},canonicalize,cse)").run(module.operation)
        fn = next(o.operation for o in module.body.operations if o.operation.name == "func.func")
        plans = transform.plan_ops(fn, device, options)
        ops = transform.linalg_ops(fn)
        found = [(op, p, k) for op, p, k in zip(ops, plans, transform.op_keys(ops)) if p]
        if len(found) != 1:
            return None
        op, plan, key = found[0]
        at = next(i for i, p in enumerate(plans) if p)

        def planned(share: float) -> Plan:
            given = replace(options, op_l1_scales=((key, share),) if share != 1.0 else ())
            tiled = transform.plan_ops(fn, device, given, engines)[at]
            assert tiled is not None, "the op has loops"
            return tiled

        untuned = planned(1.0)
        tiled = {share: planned(share) for share in SHARES}
        PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(
            module.operation
        )
        generic = [o for o in transform.linalg_ops(fn) if o.name == "linalg.generic"]
        if len(generic) != 1 or "iterator_types" not in generic[0].attributes:
            return None
        kinds = [str(a) for a in ir.ArrayAttr(generic[0].attributes["iterator_types"])]
        if len(kinds) != len(plan.extents):
            return None
        parallel = ["parallel" in k for k in kinds]
        space = candidates(plan.extents, plan.sizes, parallel)
        space.key = key
        space.shares = [
            share
            for share, other in tiled.items()
            if other != untuned and same_sums(untuned, other, parallel)
        ]
        return space


def same_sums(a: Plan, b: Plan, parallel: list[bool]) -> bool:
    """Whether plans `a` and `b` sum every output element's terms in the same
    order: each reduction loop tiled alike, and any engine split of a
    reduction loop (partial sums, D-COMPILE-TRANSFORM-PARTIALS) the same."""
    if any(x != y for x, y, par in zip(a.sizes, b.sizes, parallel) if not par):
        return False
    split = [
        (len(p.engines), p.split_dim, p.chunk, p.partials)
        for p in (a, b)
        if p.partials or (len(p.engines) > 1 and not parallel[p.split_dim])
    ]
    return not split or (len(split) == 2 and split[0] == split[1])


class Timing(NamedTuple):
    """A timed run's cycles and its roofline bound (D-RT-ROOFLINE)."""

    cycles: int
    bound: float


Timer = Callable[[str, str], "Timing | None"]
"""(a `.nem` program, the device) -> its timed cycles and bound, None if it
does not run to its end: the runtime's, given by the caller
(`nem.cli.roofline_cli.timed_score`; the compiler imports no runtime)."""


def timing_of(
    text: str, choice: Choice, key: str, options: CompileOptions, timer: Timer
) -> Timing | None:
    """Timed cycles and bound of the one-op program `text` (its op `key`)
    tiled as `choice` says, None if it does not compile (or does not run to
    its end)."""
    from nem.compile import CompileError, compile_mlir

    alone = replace(options, origins=False, op_tile_sizes=(), op_l1_scales=())
    if choice.sizes is not None:
        alone = replace(alone, tile_sizes=choice.sizes)
    elif choice.share != 1.0:
        alone = replace(alone, op_l1_scales=((key, choice.share),))
    try:
        result = compile_mlir(text, alone)
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


UNTUNED_SHARE = 1 / 3
"""The share of the budget spent timing ops untuned before any search, to
order the search by their gaps (`by_gap`); ops left untimed are searched
after, largest first.  Timing every op first took the whole of a 300 s
budget on Inception v2 on a loaded machine (one op searched; session 33)."""

Op = tuple[int, int, str, str, str, Space]
"""An op to tune: (its negated iteration space, its ordinal, key, program,
program without locations, search space)."""


def tune(
    model: str | Path | onnx.ModelProto,
    options: CompileOptions,
    timer: Timer,
    budget: float = 60.0,
    seed: int = 0,
    trials: int = 12,
    progress: Callable[[str], None] | None = None,
) -> tuple[CompileOptions, TuneReport]:
    """`options` with the tiles the search found for the ONNX `model`
    (`op_tile_sizes`, `op_l1_scales`), and what it did."""
    from nem.compile.pipeline import Driver

    t0 = time.monotonic()
    deadline = t0 + budget
    report = TuneReport()
    driver = Driver(options)
    device, engines = driver.device, driver.engines
    todo: list[Op] = []
    for key, text, alike in op_programs(model, options, device):
        space = space_of(text, device, options, engines)
        if space is not None and (space.size > 1 or space.shares):
            todo.append((-math.prod(space.extents), len(todo), key, text, alike, space))
    todo.sort()  # the largest iteration spaces first
    untuned = _untuned(todo, options, timer, t0 + budget * UNTUNED_SHARE)
    todo = by_gap(todo, untuned)
    sizes_found: list[tuple[str, tuple[int, ...]]] = []
    shares_found: list[tuple[str, float]] = []
    searched: dict[str, tuple[Choice, int | None, dict[Choice, int | None]]] = {}
    for *_, key, text, alike, space in todo:
        if time.monotonic() >= deadline:
            report.budget_reached = True
            break
        if alike not in searched:  # an op like one searched (same program but its locations)
            if progress is not None:
                progress(f"--tune: {key}: {1 + len(space.shares) + space.size} candidates")
            t = untuned.get(alike)
            known = {Choice(): None if t is None else t.cycles} if alike in untuned else {}
            searched[alike] = search_op(text, space, options, timer, trials, seed, deadline, known)
        best, best_cycles, tried = searched[alike]
        report.nests.append(
            NestResult(
                key, space.extents, space.default, tried[Choice()], best, best_cycles, len(tried)
            )
        )
        if best.sizes is not None:
            sizes_found.append((key, best.sizes))
        elif best.share != 1.0:
            shares_found.append((key, best.share))
    report.budget_reached = report.budget_reached or time.monotonic() >= deadline
    report.seconds = time.monotonic() - t0
    tuned = replace(options, op_tile_sizes=tuple(sizes_found), op_l1_scales=tuple(shares_found))
    return tuned, report


def _untuned(
    todo: list[Op],
    options: CompileOptions,
    timer: Timer,
    deadline: float,
) -> dict[str, Timing | None]:
    """Each distinct op of `todo` timed untuned (None: it did not run), in
    `todo`'s order, until `deadline`: the search then spends the budget on
    the ops whose untuned cycles stand farthest above their own bound,
    summed over the ops alike (what tiles can win back), not on the largest
    first (D-COMPILE-TUNE, session 33: largest first, Inception v2's budget
    ran out before its n51 and n88, which take 1.8-2.2x the cycles in the
    program that they take on their tuned sizes)."""
    out: dict[str, Timing | None] = {}
    for *_, text, alike, space in todo:
        if alike in out:
            continue
        if time.monotonic() >= deadline:
            break
        out[alike] = timing_of(text, Choice(), space.key, replace(options, verify=False), timer)
    return out


def by_gap(todo: list[Op], untuned: dict[str, Timing | None]) -> list[Op]:
    """`todo` ordered by the cycles its untuned programs (`untuned`, by
    program without locations) take above their bounds, summed over the ops
    alike (they share one search), the largest first; an op not timed or
    that did not run counts 0; on a tie, `todo`'s order (sorting is stable)."""
    gaps: dict[str, float] = {}
    for *_, alike, _space in todo:
        t = untuned.get(alike)
        gaps[alike] = gaps.get(alike, 0.0) + (0.0 if t is None else max(0.0, t.cycles - t.bound))
    return sorted(todo, key=lambda op: -gaps[op[4]])


def op_programs(
    model: str | Path | onnx.ModelProto, options: CompileOptions, device: Device
) -> list[tuple[str, str, str]]:
    """(key, `extract`, `extract` without locations) of each linalg op with
    loops and results of the ONNX `model` as `nem-compile` imports it."""
    from nem.compile import import_model
    from nem.compile.transform import has_loops, linalg_ops, op_keys

    im = import_model(model, options, device)
    with im.context:
        fn = next(
            o.operation
            for o in im.module.body.operations
            if o.operation.name == "func.func"
            and ir.StringAttr(o.operation.attributes["sym_name"]).value == im.func_name
        )
        ops = linalg_ops(fn)
        return [
            (key, extract(op), extract(op, located=False))
            for op, key in zip(ops, op_keys(ops))
            if has_loops(op) and op.results
        ]


def search_op(
    text: str,
    space: Space,
    options: CompileOptions,
    timer: Timer,
    trials: int,
    seed: int,
    deadline: float,
    known: dict[Choice, int | None] | None = None,
) -> tuple[Choice, int | None, dict[Choice, int | None]]:
    """(best choice, its cycles, every choice tried with its cycles) for the
    one-op program `text`: the untuned op first (unless `known`, the
    choices the caller has scored, has it), then its L1 shares, then
    `search` over its parallel tile sizes; the fewest cycles win, the
    earlier on a tie (the untuned op before any other)."""
    scores: dict[Choice, int | None] = dict(known or {})

    def score(choice: Choice) -> int | None:
        # candidates are compiled unverified; the one kept is verified below
        t = timing_of(text, choice, space.key, replace(options, verify=False), timer)
        scores[choice] = None if t is None else t.cycles
        return scores[choice]

    if Choice() not in scores:
        score(Choice())
    for share in space.shares:
        if time.monotonic() >= deadline:
            break
        score(Choice(share=share))
    if space.size > 1 and time.monotonic() < deadline:
        search(space, lambda sizes: score(Choice(sizes=tuple(sizes))), trials, seed, deadline)
    ranked = [(c, s) for c, s in scores.items() if s is not None]
    best, best_cycles = min(ranked, key=lambda cs: cs[1], default=(Choice(), None))
    if best != Choice() and timing_of(text, best, space.key, options, timer) is None:
        best, best_cycles = Choice(), scores[Choice()]  # fails nem-verify
    return best, best_cycles, scores


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
    """`compile_onnx(model)` with tuned tile sizes, and the tuner's report.

    The untuned compile is the result should the tuned one fail, or should
    the whole tuned program not run in fewer timed cycles than the whole
    untuned one (`timer` on both): an op searched alone is not the op in the
    program, whose DMAs and engines its neighbours share (session 34:
    ResNet-50's 19 ops retiled alone, each faster, made the program 2,101
    cycles slower)."""
    from nem.compile import CompileError, compile_onnx

    tuned, report = tune(model, options, timer, budget, seed, trials)
    file = str(model) if isinstance(model, str) else "<model>"
    result = compile_onnx(model, options, progress=progress, stem=stem)
    if tuned.op_tile_sizes or tuned.op_l1_scales:
        try:
            candidate = compile_onnx(model, tuned, progress=progress, stem=stem)
        except CompileError as e:
            report.fallback = str(e).splitlines()[0]
        else:
            result = _faster(candidate, result, timer, options.device, report)
    result.remarks.extend(report.remarks(file))
    return result, report


def _faster(
    tuned: CompileResult, untuned: CompileResult, timer: Timer, device: str, report: TuneReport
) -> CompileResult:
    """`tuned` if its whole program runs in fewer timed cycles than
    `untuned`'s, else `untuned` (the reason in `report.fallback`); both
    figures in `report.whole`."""
    before, after = timer(untuned.nem, device), timer(tuned.nem, device)
    cycles = (None if before is None else before.cycles, None if after is None else after.cycles)
    report.whole = cycles
    if after is not None and (before is None or after.cycles < before.cycles):
        return tuned
    report.fallback = (
        f"the whole tuned program runs in {cycles[1]} timed cycles, the untuned one in {cycles[0]}"
    )
    return untuned
