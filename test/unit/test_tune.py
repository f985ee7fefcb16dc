"""`nem-compile --tune` (D-COMPILE-TUNE, issue 35 item 3): the search space
keeps reduction loops, the search is deterministic under its seed and
exhaustive for a small space, tuned sizes reach the ops they name, and a
retiled program computes bit-identically the untuned program's outputs."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")


from nem.compile import compile_onnx  # noqa: E402
from nem.compile.plan import Plan  # noqa: E402
from nem.compile.tune import (  # noqa: E402
    Choice,
    Space,
    Timing,
    by_gap,
    candidates,
    same_sums,
    search,
)
from nem.frontends.onnx import samples  # noqa: E402
from nem.runtime import NemInterpreter  # noqa: E402

DEVICE = "npm_pro_x1"
FAR = float("inf")


def test_reduction_loops_keep_their_default_size():
    space = candidates(
        [1, 16, 16, 8, 3, 3, 8],
        [1, 16, 8, 8, 3, 3, 4],
        [True, True, True, True, False, False, False],
    )
    assert space.choices[4:] == [[3], [3], [4]]
    assert space.choices[2] == [8, 16, 4, 2, 1]  # the default first, then halvings
    assert space.choices[0] == [1]
    assert space.size == 5 * 5 * 4


def test_a_small_space_is_searched_exhaustively():
    space = Space([8, 8], [8, 8], [[8, 4, 2], [8, 4]])
    seen = []

    def score(sizes):
        seen.append(tuple(sizes))
        return abs(sizes[0] - 2) * 10 + sizes[1]

    best, cycles, tried = search(space, score, trials=12, seed=0, deadline=FAR)
    assert (best, cycles, tried) == ([2, 4], 4, 6)
    assert seen[0] == (8, 8) and sorted(set(seen)) == sorted(seen)  # default first, no repeat


def test_a_large_space_is_sampled_the_same_under_a_seed():
    space = Space([64] * 4, [64] * 4, [[64, 32, 16, 8, 4, 2]] * 4)

    def run(seed):
        seen = []

        def score(sizes):
            seen.append(tuple(sizes))
            return sum(abs(s - 8) for s in sizes)

        return search(space, score, trials=8, seed=seed, deadline=FAR), seen

    first, again = run(3), run(3)
    assert first == again
    (best, cycles, tried), seen = first
    assert tried == len(seen) <= 8 and seen[0] == (64,) * 4
    assert cycles == min(sum(abs(s - 8) for s in x) for x in seen)


def test_a_large_space_without_optuna_is_a_compile_error(monkeypatch):
    """An outside user's venv without optuna got 'internal error:
    ModuleNotFoundError'; the search says what to install instead."""
    from nem.compile import CompileError

    monkeypatch.setitem(sys.modules, "optuna", None)  # `import optuna` raises ImportError
    space = Space([64] * 4, [64] * 4, [[64, 32, 16, 8, 4, 2]] * 4)
    with pytest.raises(CompileError, match="pip install optuna"):
        search(space, lambda s: sum(s), trials=8, seed=0, deadline=FAR)


def test_a_failed_candidate_scores_nothing():
    space = Space([4], [4], [[4, 2, 1]])
    best, cycles, _ = search(space, lambda s: None if s[0] == 1 else s[0], 12, 0, FAR)
    assert (best, cycles) == ([2], 2)


def test_the_search_goes_to_the_ops_farthest_above_their_bound_first():
    """The largest op first in `todo`, but `b` (two ops alike, 300 + 300
    cycles over their bound) before `a` (500 over) and `c` (none: at its
    bound); an op not timed (the budget ran out first) or that did not run
    counts nothing and keeps its place among those."""
    space = Space([4], [4], [[4, 2, 1]])
    todo = [
        (-64, 0, "a#1", "", "a", space),
        (-32, 1, "b#1", "", "b", space),
        (-32, 2, "c#1", "", "c", space),
        (-16, 3, "b#2", "", "b", space),
        (-8, 4, "d#1", "", "d", space),
        (-4, 5, "e#1", "", "e", space),
    ]
    untuned = {"a": Timing(1500, 1000.0), "b": Timing(400, 100.0), "c": Timing(90, 90.0)}
    untuned["d"] = None
    assert [op[2] for op in by_gap(todo, untuned)] == ["b#1", "b#2", "a#1", "c#1", "d#1", "e#1"]


# a [1, 8, 8, 16, 3, 3, 8] convolution's loops: four parallel, three reduction
PARALLEL = [True] * 4 + [False] * 3


@pytest.mark.parametrize(
    "other, same",
    [
        (Plan([1, 8, 8, 16, 3, 3, 8], [1, 2, 8, 8, 3, 3, 4], [0]), True),  # parallel tiles
        (Plan([1, 8, 8, 16, 3, 3, 8], [1, 4, 8, 16, 3, 3, 2], [0]), False),  # channel sum cut
        (Plan([1, 8, 8, 16, 3, 3, 8], [1, 4, 8, 16, 3, 3, 4], [0, 1], 1, 4), True),
        # a split of the channel sum, partial sums added after: another order
        (Plan([1, 8, 8, 16, 3, 3, 8], [1, 4, 8, 16, 3, 3, 4], [0, 1], 6, 4, True), False),
    ],
)
def test_an_l1_share_is_a_candidate_only_where_it_sums_alike(other, same):
    untuned = Plan([1, 8, 8, 16, 3, 3, 8], [1, 4, 8, 16, 3, 3, 4], [0])
    assert same_sums(untuned, other, PARALLEL) is same
    assert same_sums(other, untuned, PARALLEL) is same


@pytest.mark.slow  # ~25 s alone (five compiles of a 1x1 convolution, two of the model, runs)
def test_an_l1_share_is_searched_chosen_and_keeps_the_outputs_bit_identical():
    """SqueezeNet's conv10 (n62: 13x13 pixels, 512 to 1000 channels): its
    tiles planned for a smaller share of L1 run in fewer cycles alone than
    the untuned ones (0.81 of it, 0.9 since the tile loops' convolutions
    run over both NMUs, session 48: 33,893 cycles against 33,945; split
    along its output channels in tiles since session 57, 0.9 tiles it as
    the untuned share does and is not offered); the
    search offers the shares that tile it otherwise, keeps the fastest, and
    the model compiled with it gives the untuned output's bits under random
    schedules."""
    from compile_runs import conv1x1_relu_model, only_output

    from nem.cli.roofline_cli import timed_score
    from nem.compile import CompileOptions
    from nem.compile.pipeline import Driver
    from nem.compile.tune import op_programs, search_op, space_of

    model = conv1x1_relu_model(13, 512, 1000)
    options = CompileOptions(device=DEVICE)
    driver = Driver(options)
    key, text, _ = next(p for p in op_programs(model, options, driver.device) if "conv_2d" in p[0])
    space = space_of(text, driver.device, options, driver.engines)
    assert space is not None and space.shares == [0.81, 0.5]
    best, cycles, tried = search_op(text, space, options, timed_score, 1, 0, FAR)
    timed = {c: n for c, n in tried.items() if n is not None}
    assert best == min(timed, key=lambda c: timed[c]) and best.share in space.shares, tried
    assert cycles is not None and Choice() in timed and cycles < timed[Choice()]
    plain = compile_onnx(model, device=DEVICE)
    tuned = compile_onnx(model, device=DEVICE, op_l1_scales=((key, best.share),))
    assert tuned.nem != plain.nem
    a, b = only_output(plain, model, 2), only_output(tuned, model, 2)
    assert a.tobytes() == b.tobytes()


def _run(result, inputs):
    it = NemInterpreter(device=DEVICE, trace=False)
    it.load_string(result.nem, file="m.nem")
    for name, arr in result.interface.weights.items():
        it.write_tensor(name, arr)
    for name, arr in inputs.items():
        it.write_tensor(name, arr)
    run = it.run()
    assert run.status == "completed"
    return [it.read_tensor(n, s, d) for n, s, d in result.interface.outputs], run.tasks_run


@pytest.mark.slow  # ~15 s alone (two compiles of the cnn sample, two runs)
def test_tuned_sizes_retile_their_op_and_keep_the_outputs_bit_identical():
    """conv2 of the cnn sample is tiled whole by default; given halved
    parallel tiles (what --tune keeps when they score better), the program
    runs more tasks and gives the same output bits."""
    model = samples.cnn("f32")
    inputs = samples.random_inputs(model, seed=0)
    plain = compile_onnx(model, device=DEVICE)
    key = 'linalg.conv_2d_nhwc_hwcf loc("conv2"("Conv"("<model>":5:1))) #1'
    tuned = compile_onnx(model, device=DEVICE, op_tile_sizes=((key, (1, 4, 4, 16, 3, 3, 8)),))
    a, tasks = _run(plain, inputs)
    b, more = _run(tuned, inputs)
    assert more > tasks, (more, tasks)
    for x, y in zip(a, b):
        assert x.tobytes() == y.tobytes()


@pytest.mark.slow  # ~30 s alone (each op of the mlp compiled 2-3 times)
def test_compile_tuned_reports_each_op_and_never_loses_cycles():
    from nem.cli.roofline_cli import timed_score
    from nem.compile import CompileOptions
    from nem.compile.tune import compile_tuned

    model = samples.mlp("f32")
    result, report = compile_tuned(
        model, CompileOptions(device=DEVICE), timed_score, budget=1e9, seed=0, trials=2
    )
    assert report.nests and not report.budget_reached
    for n in report.nests:
        assert n.best_cycles is not None and n.default_cycles is not None
        assert n.best_cycles <= n.default_cycles
        assert n.best == Choice() or n.best_cycles < n.default_cycles
    assert any("--tune:" in r for r in result.remarks)
    if any(n.retiled for n in report.nests):  # the whole programs compared too
        assert report.whole is not None
        before, after = report.whole
        assert before is not None and after is not None
        assert (report.fallback is None) == (after < before)
    inputs = samples.random_inputs(model, seed=1)
    a, _ = _run(compile_onnx(model, device=DEVICE), inputs)
    b, _ = _run(result, inputs)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


@pytest.mark.slow  # ~30 s alone, as the test above
def test_compile_tuned_keeps_the_untuned_program_when_the_whole_is_not_faster(monkeypatch):
    """The ops alone and the program disagree (session 34: ResNet-50's ops,
    each faster alone, made the program slower): a timer that scores the
    one-op programs upside down retiles ops with their slowest tiles; the
    whole program, timed as it is, runs slower with them, so the untuned
    program is the result, and the report says why."""
    from nem.cli.roofline_cli import timed_score
    from nem.compile import CompileOptions
    from nem.compile import tune as tuner

    searching = [True]
    real = tuner.tune

    def tune(*args, **kwargs):
        out = real(*args, **kwargs)
        searching[0] = False
        return out

    def timer(nem: str, device: str) -> Timing | None:
        t = timed_score(nem, device)
        if t is None or not searching[0]:
            return t
        return Timing(10**9 - t.cycles, t.bound)  # alone: the slowest tiles look best

    monkeypatch.setattr(tuner, "tune", tune)
    model = samples.mlp("f32")
    result, report = tuner.compile_tuned(
        model, CompileOptions(device=DEVICE), timer, budget=1e9, seed=0, trials=2
    )
    assert any(n.retiled for n in report.nests)
    assert report.whole is not None and report.whole[0] is not None
    assert report.whole[1] is not None and report.whole[1] > report.whole[0]
    assert result.nem == compile_onnx(model, device=DEVICE).nem
    assert report.fallback is not None and "whole tuned program" in report.fallback
    assert any("the tuned sizes were dropped: the whole" in r for r in result.remarks)


@pytest.mark.parametrize(
    "value, error",
    [
        ("x", TypeError),
        ((("k", (0, 2)),), ValueError),
        ((("k", ()),), ValueError),
        (((1, (2,)),), ValueError),
    ],
)
def test_op_tile_sizes_are_checked(value, error):
    with pytest.raises(error, match="op_tile_sizes"):
        compile_onnx(samples.mlp("f32"), device=DEVICE, op_tile_sizes=value)


@pytest.mark.parametrize(
    "value, error",
    [
        ("x", TypeError),
        ((("k", 0.0),), ValueError),
        ((("k", 1.5),), ValueError),
        ((("k", 1),), ValueError),
        (((1, 0.5),), ValueError),
    ],
)
def test_op_l1_scales_are_checked(value, error):
    with pytest.raises(error, match="op_l1_scales"):
        compile_onnx(samples.mlp("f32"), device=DEVICE, op_l1_scales=value)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--tune-budget", "5"], "options of --tune"),
        (["--tune", "--tune-trials", "0"], "--tune-trials N >= 1"),
        (["--tune", "--bisect"], "--tune takes a .onnx model"),
    ],
)
def test_tune_usage_errors(flags, message, tmp_path, capsys):
    import onnx

    from nem.cli.nem_compile import run

    model = tmp_path / "m.onnx"
    onnx.save(samples.mlp("f32"), str(model))
    assert run([str(model), *flags]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow  # ~15 s alone (the mlp's ops compiled alone, a few candidates each)
def test_tune_searches_the_ops_farthest_above_their_bound_first(monkeypatch):
    """The mlp's Relu ops are its smallest, but a timer that puts them 1,000
    cycles above their bound (the others 10) has them searched first; the
    clock advances one second per timed program, so the budget's third
    (7 of 21 s) times seven of the eight ops before any search (not the
    smallest, fc3's bias), and the budget then stops the search before
    every op is reached."""
    import nem.compile.tune as tune_module
    from nem.compile import CompileOptions

    clock = [0.0]
    monkeypatch.setattr(tune_module.time, "monotonic", lambda: clock[0])

    def timer(nem: str, device: str) -> Timing:
        clock[0] += 1
        return Timing(1100 if "relu.async" in nem else 110, 100.0)

    model = samples.mlp("f32")
    _, report = tune_module.tune(model, CompileOptions(device=DEVICE), timer, 21.0, 0, 2)
    keys = [n.key for n in report.nests]
    assert [k.split('"')[1] for k in keys[:2]] == ["fc1_relu", "fc2_relu"], keys
    assert report.budget_reached and 2 < len(keys) < 8, keys
