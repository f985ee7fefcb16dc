"""`nem-split-transfers` (D-NEM-SPLIT-TRANSFERS): large L1 transfers of an
ordered program split over the engine's DMAs, every consumer of the
original token taking all the slices' tokens.  The split program computes
the same bits as the unsplit one under random schedules, `nem-verify`
accepts it, and it runs in fewer timed cycles; a consumer left naming one
slice is a race that `nem-verify` reports; the live tokens stay within the
device's limit."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from nem.analysis.token_liveness import max_live_tokens
from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.ops import TransferOp, programs
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem
from nem.passes import split_transfers
from nem.passes.pass_context import pass_context
from nem.passes.pipeline import VerifyPipelinePass
from nem.passes.split_rule import even_parts
from nem.passes.split_transfers import SplitTransfersPass, plan_split

ROOT = Path(__file__).resolve().parents[2]
LIT = ROOT / "test" / "lit" / "deps" / "split_transfers.nem"


def _split(text: str, **options) -> str:
    """`text` after `nem-split-transfers{options}`, checked by `nem-verify`."""
    module = parse_nem(text, str(LIT))
    SplitTransfersPass(**options).apply(pass_context(file=str(LIT)), module)
    VerifyPipelinePass().apply(pass_context(file=str(LIT)), module)
    return print_nem(module)


def test_even_parts():
    assert even_parts(7, 4) == [(0, 2), (2, 2), (4, 2), (6, 1)]
    assert even_parts(4, 4) == [(0, 1), (1, 1), (2, 1), (3, 1)]


def test_each_slice_keeps_the_deps_and_every_consumer_takes_all():
    out = _split(LIT.read_text(), min_moved=0, min_once=0)
    # pre, ld, st; tr whole (a transposed destination); cp (L1 to L1), dd
    assert out.count("transfer.async") == 4 + 4 + 4 + 1 + 4 + 4
    assert "transfer.sync" not in out
    assert "wait(pre_1, pre_2, pre_3, pre_4)" in out and "wait(dd_1, dd_2, dd_3, dd_4)" in out
    assert "deps=[ld_1, ld_2, ld_3, ld_4]" in out
    assert out.count("deps=[r]") == 4
    assert "wait(st_1, st_2, st_3, st_4)" in out


@pytest.mark.parametrize("tokens", [None, 6])
def test_a_second_run_changes_nothing(tokens):
    """The slices of a split (the same buffers, deps and consumers) are not
    split again, with the token limit the first run had or none."""
    once = _split(LIT.read_text(), min_moved=0, min_once=0, max_tokens=tokens)
    assert "ld_2 = transfer.async" in once and "dd_2 = transfer.async" in once
    assert _split(once, min_moved=0, min_once=0) == once


def test_small_or_rarely_run_transfers_stay_whole():
    """64 KiB moved 4 times is 256 KiB: under a 1 MiB `min-moved` no transfer
    touching L1 splits (the copy between DDR buffers does: `min-bytes` only).
    `few-runs=1` throughout: 4 runs are few by default (session 32)."""
    text = LIT.read_text()
    out = _split(text, min_moved=1 << 20, min_once=1 << 20, min_single=1 << 20, few_runs=1)
    assert "ld_1" not in out and "st_1" not in out and "pre_1" not in out
    assert out.count("transfer.async") == 2 + 2 + 4 and "dd_4" in out  # ld, st; tr, cp; dd_k
    # ld and st split, pre (64 KiB once) whole: 4 + 4 + 2 + 4
    once = _split(text, min_moved=1 << 18, min_once=1 << 20, min_single=1 << 20, few_runs=1)
    assert once.count("transfer.async") == 14


def test_a_transfer_run_once_splits_from_min_single():
    """`pre` runs once (in no loop): it splits from `min-single` (by default
    `min-bytes`, 16 KiB) whatever `min-moved` and `min-once` say; so it
    does by default, 64 KiB (it stayed whole under the 256 KiB `min-once`,
    on one DMA), while the loop's 64 KiB copies, 256 KiB over their runs,
    stay whole under a 1 MiB `min-moved` (`few-runs=1`: by default their
    loop's 4 runs are few, and they split from `min-few`, session 32)."""
    default = _split(LIT.read_text(), min_moved=1 << 20, few_runs=1)
    assert "wait(pre_1, pre_2, pre_3, pre_4)" in default
    assert "ld_1" not in default and "st_1" not in default
    assert "pre_1" not in _split(LIT.read_text(), min_moved=1 << 20, min_single=1 << 17, few_runs=1)


def test_a_transfer_in_a_loop_spanning_min_once_splits():
    """A transfer spanning `min-once` splits in a loop too, however few its
    runs: the loop's 64 KiB copies, 256 KiB over their runs, split under a
    1 GiB `min-moved` when `min-once` is 64 KiB (they stayed whole when
    `min-once` applied only to transfers in no loop; `few-runs=1`: 4 runs
    are few by default, session 32)."""
    out = _split(LIT.read_text(), min_moved=1 << 30, min_once=1 << 16, few_runs=1)
    assert "deps=[ld_1, ld_2, ld_3, ld_4]" in out and "wait(st_1, st_2, st_3, st_4)" in out
    assert "ld_1" not in _split(LIT.read_text(), min_moved=1 << 30, min_once=1 << 17, few_runs=1)


WEIGHTS_AND_LOOP = """device "npm_pro_x1.nem"

program held:

buffer X : DDR (size=262144, align=64)
buffer Y : DDR (size=262144, align=64)
buffer T : DDR (size=65536, align=64)
buffer x : L1[0] (size=131072, align=64)
buffer y : L1[0] (size=131072, align=64)
buffer z : L1[0] (size=65536, align=64)

w = transfer.async(dst=region(z, 0, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, src=region(T, 0, 65536) elem=f32, shape=[8, 16, 128], layout=HWC)
loop i in [0..3] @max_in_flight(2):
  ld = transfer.async(dst=region(x, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, src=region(X, i * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC)
  r = add.async in region(x, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, region(z, 0, 65536) elem=f32, shape=[8, 16, 128], layout=HWC out region(y, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC deps=[ld, w]
  st = transfer.async(dst=region(Y, i * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, src=region(y, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, deps=[r])
  wait(st)
endloop
"""


def test_a_transfer_made_once_keeps_its_tokens_from_the_loop_after_it():
    """`w` (made once, read by every iteration) held live across the loop
    (`retire-below` under its bytes; by default it is waited for before the
    loop, `test_a_large_transfer_a_loop_consumes_is_waited_for`): its 4
    slices' tokens are held before the loop's body is budgeted, so under 8
    tokens `w` takes 4 slices and the body's copies stay whole (the loop's
    body took the tokens first, leaving `w` 2 slices)."""
    out = _split(
        WEIGHTS_AND_LOOP, max_tokens=8, min_moved=0, min_once=1 << 16, retire_below=1 << 16
    )
    assert "deps=[ld, w_1, w_2, w_3, w_4]" in out
    assert "ld_1" not in out and "st_1" not in out
    module = parse_nem(out, str(LIT))
    (prog,) = programs(module)
    assert max_live_tokens(prog) <= 8


def test_a_transfer_made_once_under_min_once_leaves_the_loop_its_tokens():
    """`w` under `min-once` splits as made once (`min-single`) but holds no
    tokens before the loop's body is budgeted.  Held across the loop (a
    `retire-below` under its bytes: the rule before session 25) the body's
    copies take 2 slices each and `w` the 2 left (reserved, it took 4 and
    left the body's copies whole: ResNet-50's layers whose tile copies lost
    their slices to the small copies staged before them, 6 fewer Conv layers
    within 2x).  Waited for before the loop (the default `retire-below`:
    every size), it holds no token there: it takes 4 slices and the body's
    copies 3."""
    held = _split(
        WEIGHTS_AND_LOOP, max_tokens=8, min_moved=0, min_once=1 << 20, retire_below=1 << 14
    )
    assert "deps=[ld_1, ld_2, w_1, w_2]" in held and "wait(st_1, st_2)" in held
    out = _split(WEIGHTS_AND_LOOP, max_tokens=8, min_moved=0, min_once=1 << 20)
    assert "wait(w_1, w_2, w_3, w_4)\n\nloop i" in out
    assert "deps=[ld_1, ld_2, ld_3]" in out and "wait(st_1, st_2, st_3)" in out


FILLS = """device "npm_pro_x1.nem"

program fills:

buffer X : DDR (size=262144, align=64)
buffer Y : DDR (size=262144, align=64)
buffer x : L1[0] (size=131072, align=64)
buffer y : L1[0] (size=131072, align=64)
buffer z : L1[0] (size=8192, align=64)

f1 = transfer.async(dst=region(X, 0, 4096) elem=f32, shape=[1, 8, 128], layout=HWC, src=region(z, 0, 4096) elem=f32, shape=[1, 8, 128], layout=HWC)
f2 = transfer.async(dst=region(X, 258048, 4096) elem=f32, shape=[1, 8, 128], layout=HWC, src=region(z, 4096, 4096) elem=f32, shape=[1, 8, 128], layout=HWC)
loop i in [0..3] @max_in_flight(2):
  ld = transfer.async(dst=region(x, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, src=region(X, i * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, deps=[f1, f2])
  r = relu.async in region(x, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC out region(y, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC deps=[ld]
  st = transfer.async(dst=region(Y, i * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, src=region(y, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, deps=[r])
  wait(st)
endloop
"""
"""Two 4 KiB border fills of `X` (a padded input's, D-COMPILE-PAD-IN-PLACE)
before the tile loop that reads `X`: the first load of every iteration
consumes their tokens."""


def _run_seeded(text: str, **sizes: int) -> tuple[np.ndarray, int]:
    """`Y` after a run of `text` from its buffers `sizes` (name: f32
    elements) seeded (the same under 3 random schedules), and the program's
    timed cycles."""
    from nem.runtime.api import NemInterpreter

    rng = np.random.default_rng(0)

    def start(mode: str = "functional") -> NemInterpreter:
        it = NemInterpreter(device="npm_pro_x1")
        it.set_mode(mode)
        it.load_string(text, file=str(LIT))
        for name, n in sizes.items():
            it.write_tensor(name, rng.standard_normal(n).astype(np.float32))
        return it

    it = start()
    _, diff = it.run_schedules(3, seed=1)
    assert diff is None
    timed = start("timed").start()
    timed.run_to_end()
    return it.read_tensor("Y").view(np.uint32), timed.roofline().total.cycles


def _run_fills(text: str) -> tuple[np.ndarray, int]:
    """A FILLS program run from seeded `X` and `z` (`_run_seeded`)."""
    return _run_seeded(text, X=65536, z=2048)


def test_small_transfers_a_loop_consumes_are_waited_for_before_it():
    """Held across the loop, the fills' 2 tokens leave its two iterations in
    flight (6 - 2) // 2 = 2 tokens each: the load and the store stay whole,
    on one DMA each.  Waited for before the loop (`retire-below`, by default
    16 KiB), they leave 3 each: both take 2 slices (VGG-19's 14x14 layers:
    16 border fills held across the tile loop left its weight copies on one
    DMA).  The same bits under random schedules, race-free (`nem-verify`),
    about half the cycles, within the limit, and a second run changes
    nothing."""
    held = _split(FILLS, max_tokens=6, min_moved=0, retire_below=0)
    assert "deps=[f1, f2]" in held and "ld_1" not in held and "wait(st)" in held
    out = _split(FILLS, max_tokens=6, min_moved=0)
    assert "wait(f1, f2)\n\nloop i" in out and "deps=[f1" not in out
    assert "deps=[ld_1, ld_2]" in out and "wait(st_1, st_2)" in out
    (prog,) = programs(parse_nem(out, str(LIT)))
    assert max_live_tokens(prog) <= 6
    (y_held, cycles_held), (y_out, cycles_out) = _run_fills(held), _run_fills(out)
    assert np.array_equal(y_out, y_held) and y_out.any()
    assert cycles_out < 0.6 * cycles_held
    assert _split(out, max_tokens=6, min_moved=0) == out


def test_a_wait_in_the_loop_left_with_no_token_is_dropped():
    """A loop body that waits for the fills itself: the wait before the loop
    takes them, and the body's wait, left with none, goes."""
    text = FILLS.replace(", deps=[f1, f2])", ")").replace(
        "loop i in [0..3] @max_in_flight(2):\n",
        "loop i in [0..3] @max_in_flight(2):\n  wait(f1, f2)\n",
    )
    out = _split(text, max_tokens=6, min_moved=0)
    assert out.count("wait(f1, f2)") == 1 and "wait(f1, f2)\n\nloop i" in out


def _run_weights(text: str) -> tuple[np.ndarray, int]:
    """A WEIGHTS_AND_LOOP program run from seeded `X` and `T` (`_run_seeded`)."""
    return _run_seeded(text, X=65536, T=16384)


def test_weights_staged_before_a_loop_are_waited_for_with_all_their_slices():
    """Session 25 (DenseNet-121's 64-245 KB weights staged before their tile
    loops, whole on one DMA): a 64 KiB `w` under `min-once` that the loop
    reads, held across it (`retire-below` 16 KiB, the rule before), gets the
    tokens the loop's two iterations in flight leave under 6: 2 slices, and
    the body's copies stay whole.  Waited for before the loop (the default
    `retire-below` = `min-once`), it holds none there: 4 slices, and the
    body's load and store 2 each.  The same bits under random schedules,
    race-free (`nem-verify`), fewer cycles, within the limit, and a second
    run changes nothing."""
    held = _split(WEIGHTS_AND_LOOP, max_tokens=6, min_moved=0, retire_below=1 << 14)
    assert "deps=[ld, w_1, w_2]" in held and "w_3" not in held
    out = _split(WEIGHTS_AND_LOOP, max_tokens=6, min_moved=0)
    assert "wait(w_1, w_2, w_3, w_4)\n\nloop i" in out
    assert "deps=[ld_1, ld_2]\n" in out and "wait(st_1, st_2)" in out
    (prog,) = programs(parse_nem(out, str(LIT)))
    assert max_live_tokens(prog) <= 6
    (y_held, cycles_held), (y_out, cycles_out) = _run_weights(held), _run_weights(out)
    assert np.array_equal(y_out, y_held) and y_out.any()
    assert cycles_out < cycles_held
    assert _split(out, max_tokens=6, min_moved=0) == out


def test_a_large_transfer_a_loop_consumes_is_waited_for():
    """Session 56: a copy spanning `min-once` that a loop reads (a layer's
    weights) is waited for before it, as smaller ones are: held (the rule
    before), 2 slices under 6 tokens; waited for, 4 (DenseNet-121's 14x14 1x1
    parts' weights got 3, 3, 2, 2).  The same bits, race-free, fewer cycles."""
    held = _split(
        WEIGHTS_AND_LOOP, max_tokens=6, min_moved=0, min_once=1 << 16, retire_below=1 << 16
    )
    assert "wait(w" not in held and "w_3" not in held
    out = _split(WEIGHTS_AND_LOOP, max_tokens=6, min_moved=0, min_once=1 << 16)
    assert "wait(w_1, w_2, w_3, w_4)\n\nloop i" in out
    (y_held, cycles_held), (y_out, cycles_out) = _run_weights(held), _run_weights(out)
    assert np.array_equal(y_out, y_held) and y_out.any() and cycles_out < cycles_held


TWO_ONCE = """device "npm_pro_x1.nem"

program two:

buffer A : DDR (size=262144, align=64)
buffer a : L1[0] (size=262144, align=64)

s1 = transfer.async(dst=region(a, 0, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, src=region(A, 0, 65536) elem=f32, shape=[8, 16, 128], layout=HWC)
s2 = transfer.async(dst=region(a, 65536, 131072) elem=f32, shape=[16, 16, 128], layout=HWC, src=region(A, 65536, 131072) elem=f32, shape=[16, 16, 128], layout=HWC)
wait(s1, s2)
"""


def test_the_tokens_left_go_one_at_a_time_to_the_largest_slices():
    """Two transfers live together and 5 tokens: 3 slices' worth between them.
    The later one moves twice the bytes and takes the first; then both
    have 64 KiB slices and the earlier takes one, then the later (43 KiB
    slices against 32 KiB): 2 and 3 slices.  (Given all to the larger one,
    the other stayed whole, on one DMA, as long as the larger in 2.)"""
    out = _split(TWO_ONCE, max_tokens=5, min_moved=0, min_once=1 << 16)
    assert "wait(s1_1, s1_2, s2_1, s2_2, s2_3)" in out


def test_a_consumer_left_with_one_slice_is_a_race(monkeypatch):
    """Were a consumer given only the first slice's token, the relu would read
    what the other slices are still writing: `nem-verify` says so."""
    keep_first = split_transfers.retoken

    def retoken(user, old, new):
        keep_first(user, old, new[:1])

    monkeypatch.setattr(split_transfers, "retoken", retoken)
    with pytest.raises(NemDiagnosticError) as e:
        _split(LIT.read_text(), min_moved=0, min_once=0)
    assert any(d.rule and d.rule.startswith("HAZ") for d in e.value.diagnostics)


@pytest.mark.parametrize("limit", [2, 3, 4, 6, 8, 32])
def test_live_tokens_stay_within_the_limit(limit):
    """Two pipelined iterations of up to three live tokens each: each
    transfer gets as many slices as the tokens `limit` leaves allow (none
    below 6), and the program never holds more than the limit."""
    module = parse_nem(LIT.read_text(), str(LIT))
    (prog,) = programs(module)
    before = max_live_tokens(prog)
    SplitTransfersPass(min_moved=0, min_once=0, max_tokens=limit).apply(
        pass_context(file=str(LIT)), module
    )
    after = max_live_tokens(prog)
    assert after <= max(limit, before)
    if limit >= 16:
        assert after > before  # room for every slice: all split
    VerifyPipelinePass().apply(pass_context(file=str(LIT)), module)


def _plans(text: str) -> dict[str, object]:
    module = parse_nem(text, str(LIT))
    (prog,) = programs(module)
    return {
        op.token_name(): plan_split(op, 4, 0, 4096)
        for op in prog.walk()
        if isinstance(op, TransferOp)
    }


def test_transposed_destinations_are_not_planned_l1_copies_are():
    names = _plans(LIT.read_text())
    assert names["pre"] is not None and len(names["pre"].parts) == 4  # .sync: slices, a wait
    assert names["tr"] is None  # its destination's rows interleave
    assert names["cp"] is not None  # L1 to L1, over the engine's DMAs (session 24)
    assert names["ld"] is not None and names["ld"].dim == 1
    assert names["st"] is not None and names["st"].dim == 0


L1_COPIES = """device "npm_pro_x1.nem"

program l1:

buffer a : L1[0] (size=393216, align=64)

tr = transfer.async(dst=region(a, 196608, 65536) elem=f32, shape=[16, 8, 128], layout=HWC, src=region(a, 0, 65536) elem=f32, shape=[16, 8, 128], strides=[128, 2048, 1])
ov = transfer.async(dst=region(a, 32768, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, src=region(a, 0, 65536) elem=f32, shape=[8, 16, 128], layout=HWC)
wait(tr, ov)
loop i in [0..1]:
  dy = transfer.async(dst=region(a, i * 65536 + 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, src=region(a, 0, 65536) elem=f32, shape=[8, 16, 128], layout=HWC)
  wait(dy)
endloop
"""


def test_an_l1_copy_within_one_buffer_splits_only_where_its_sides_are_apart():
    """An L1-to-L1 copy in one engine's arena (the stem's transpose of its
    input rows, ResNet-50's n0: 4,708 cycles on one DMA) splits when its
    literal byte ranges do not meet, even with a transposed source (the
    slices only read it); one whose ranges meet or are not literal stays
    whole, since a slice could read what another writes."""
    names = _plans(L1_COPIES)
    assert names["tr"] is not None and len(names["tr"].parts) == 4
    assert names["ov"] is None
    assert names["dy"] is None


@pytest.mark.slow  # one compile and three runs of a small conv
def test_split_program_is_bit_identical_race_free_and_faster():
    """A 3x3 conv (16x16, 64 to 64 channels, one engine, tiles of 4x8 pixels
    and 16 output channels: a 36 KiB weight slice per tile), compiled with
    one transfer per copy, then split: the same output bits under random
    schedules, race-free, `nem-verify` clean, fewer timed cycles."""
    pytest.importorskip("mlir.ir")
    from compile_runs import conv3x3_model, only_output, timed_cycles

    from nem.compile import compile_onnx

    model = conv3x3_model(16, 64, 64)
    opts = {"device": "npm_pro_x1", "engines": 1, "tile_sizes": (1, 4, 8, 16)}
    old = compile_onnx(model, split_transfers=False, **opts)
    new = dataclasses.replace(old, nem=_split(old.nem, min_moved=0))
    assert new.nem.count("transfer.async") > old.nem.count("transfer.async")
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < 0.9 * timed_cycles(old.nem)


def test_a_densenet_layers_weights_split_before_its_tile_loop(monkeypatch):
    """DenseNet-121's 1x1 layer pattern (session 25): BatchNormalization's
    per-channel scale and shift and a Relu before a 1x1 conv of 256 to 128
    channels over 28x28 pixels, on four engines.  Each engine part stages its
    128 KiB weights before its tile loop; held across the loop (the rule
    before: `retire-below` 16 KiB) they stayed whole on one DMA, the loop's
    tile copies having taken every token.  Waited for before the loop, they
    split: the same output bits under random schedules, fewer cycles.  The
    tile loop is kept at two iterations in flight, the program this rule was
    measured on: its 4 trips all in flight (D-COMPILE-TILE-TIME, session 37)
    is another program, whose held weights split as well.  (224 input
    channels until session 65, whose smaller scratch tiles made that layer
    one of tiles of 32 output channels, each staging its weights' slice.)"""
    pytest.importorskip("mlir.ir")
    from compile_runs import graph_model, only_output, timed_cycles
    from onnx import helper, numpy_helper

    from nem.compile import compile_onnx
    from nem.passes.lowering import structure

    monkeypatch.setattr(structure, "ALL_IN_FLIGHT", 2)

    rng = np.random.default_rng(0)
    c, f = 256, 128
    inits = [
        numpy_helper.from_array(rng.standard_normal((1, c, 1, 1)).astype(np.float32), "s"),
        numpy_helper.from_array(rng.standard_normal((1, c, 1, 1)).astype(np.float32), "b"),
        numpy_helper.from_array(rng.uniform(-0.1, 0.1, (f, c, 1, 1)).astype(np.float32), "w"),
    ]
    nodes = [
        helper.make_node("Mul", ["x", "s"], ["m"], name="mul"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "w"], ["y"], name="conv", kernel_shape=[1, 1]),
    ]
    model = graph_model(nodes, (1, c, 28, 28), inits)
    base = compile_onnx(model, device="npm_pro_x1", split_transfers=False)
    whole = "shape=[1, 1, 256, 128], layout=NHWC, src=region(w,"
    assert base.nem.count(whole) == 4  # one weight copy per engine part
    held = dataclasses.replace(base, nem=_split(base.nem, retire_below=1 << 14))
    new = dataclasses.replace(base, nem=_split(base.nem))
    assert held.nem.count(whole) == 4 and new.nem.count(whole) == 0
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(held, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < 0.95 * timed_cycles(held.nem)


def test_a_densenet_3x3_kernels_weights_split_over_every_dma(monkeypatch):
    """DenseNet-121's straight-line 3x3 layers at 7x7 (session 26): a 1x1
    conv of 256 to 128 channels, BatchNormalization's scale and shift and a
    Relu, then a 3x3 conv of 128 to 32 channels, on four engines.  Each
    engine part stages the 3x3 kernel's 144 KiB of weights, `[3, 3, 128,
    32]`, once (here on one engine): cut along its outermost dimension (kh = 3) it made 3 slices
    of 48 KiB, the fourth DMA idle.  Its dimensions are contiguous on both
    sides, so merged (`merge_rows`) it makes 4 slices of 36 KiB: the same
    output bits under random schedules, no more cycles (here the load runs
    beside the 1x1 conv: as many; in a cut of DenseNet's block 4, where it
    waits for the padded input's fills, 1.7% fewer over the cut)."""
    pytest.importorskip("mlir.ir")
    from compile_runs import graph_model, only_output, timed_cycles
    from onnx import helper, numpy_helper

    from nem.compile import compile_onnx, tile_cost

    rng = np.random.default_rng(0)
    c, f = 128, 32
    inits = [
        numpy_helper.from_array(rng.uniform(-0.1, 0.1, (c, 256, 1, 1)).astype(np.float32), "v"),
        numpy_helper.from_array(rng.standard_normal((1, c, 1, 1)).astype(np.float32), "s"),
        numpy_helper.from_array(rng.standard_normal((1, c, 1, 1)).astype(np.float32), "b"),
        numpy_helper.from_array(rng.uniform(-0.1, 0.1, (f, c, 3, 3)).astype(np.float32), "w"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "v"], ["x1"], name="conv1", kernel_shape=[1, 1]),
        helper.make_node("Mul", ["x1", "s"], ["m"], name="mul"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node(
            "Conv", ["r", "w"], ["y"], name="conv3", kernel_shape=[3, 3], pads=[1] * 4
        ),
    ]
    model = graph_model(nodes, (1, 256, 7, 7), inits)
    # on one engine: the engine split may cut the 3x3 conv along its
    # output channels since session 29 (D-COMPILE-ENGINES), and so may
    # `channel_cut` its one tile since session 59 (`CUT_WEIGHTS`); the
    # kernel staged whole is what this test is about
    monkeypatch.setattr(tile_cost, "CUT_WEIGHTS", float("inf"))
    base = compile_onnx(model, device="npm_pro_x1", split_transfers=False, engines=1)
    assert base.nem.count("shape=[3, 3, 128, 32], layout=NHWC, src=region(w,") == 1
    new = dataclasses.replace(base, nem=_split(base.nem))
    with monkeypatch.context() as m:  # the rule before: slices along kh only
        m.setattr(split_transfers, "merge_rows", lambda shape, dim, *s: (shape, *s), raising=False)
        old = dataclasses.replace(base, nem=_split(base.nem))
    assert old.nem.count("shape=[1, 3, 128, 32], layout=NHWC, src=region(w,") == 3
    assert new.nem.count("shape=[9216], strides=[1], src=region(w,") == 4
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) <= timed_cycles(old.nem)
    assert _split(new.nem) == new.nem


@pytest.mark.slow  # one compile and three runs of a conv
def test_weights_staged_per_tile_split_however_few_the_tiles():
    """A 3x3 conv of 256 to 64 channels over 8x8 pixels, tiles of 32 output
    channels on one engine: its tile loop of 2 iterations stages a 288 KiB
    weight slice each, 576 KiB over its runs, under a `min-moved` of 8 MiB
    (the default until session 23; now 256 KiB, which splits it too).
    Spanning `min-once` it splits (it stayed whole when `min-once` applied
    only to transfers in no loop; since session 26 in 4 slices, its kh, kw
    and input channels merged): the same output bits under random
    schedules, in under 0.9x the cycles.  (A loop of two trips splits its
    copies from `min-single` since session 30: `few-runs=1` leaves that
    rule out here.)"""
    pytest.importorskip("mlir.ir")
    from compile_runs import conv3x3_model, only_output, timed_cycles

    from nem.compile import compile_onnx

    model = conv3x3_model(8, 256, 64)
    opts = {"device": "npm_pro_x1", "engines": 1, "tile_sizes": (1, 8, 8, 32)}
    whole = compile_onnx(model, split_transfers=False, **opts)
    rule = {"min_moved": 8 << 20, "few_runs": 1}
    old = dataclasses.replace(whole, nem=_split(whole.nem, min_once=1 << 30, **rule))
    new = dataclasses.replace(whole, nem=_split(whole.nem, **rule))
    # kh, kw and the input channels merged (`merge_rows`, session 26): 4 slices
    staged = re.compile(r"^\s+copy\d+_4 = transfer.async\(.*shape=\[576, 32\]", re.M)
    assert staged.search(new.nem) and not staged.search(old.nem)
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < 0.9 * timed_cycles(old.nem)


def test_copies_in_a_loop_of_two_trips_split_from_min_single():
    """A 3x3 conv of 64 to 64 channels over 16x16 pixels in two row tiles on
    one engine (ShuffleNet's 14x14 depthwise row tiles, two per engine part,
    session 30): each tile's 45 KiB input copy moves 90 KiB over the loop's
    two trips, under `min-moved`, and stayed whole on one DMA.  Run at most
    `few-runs` (2) times, it splits from `min-single`, as a copy made once:
    the same output bits under random schedules, in under 0.9x the cycles
    (the rule before: `few-runs=1`)."""
    pytest.importorskip("mlir.ir")
    from compile_runs import conv3x3_model, only_output, timed_cycles

    from nem.compile import compile_onnx

    model = conv3x3_model(16, 64, 64)
    opts = {"device": "npm_pro_x1", "engines": 1, "tile_sizes": (1, 8, 16, 64)}
    whole = compile_onnx(model, split_transfers=False, **opts)
    old = dataclasses.replace(whole, nem=_split(whole.nem, few_runs=1))
    new = dataclasses.replace(whole, nem=_split(whole.nem))
    tile = "shape=[1, 10, 18, 64], layout=NHWC, src="  # a row tile's input, padded
    assert tile in old.nem and tile not in new.nem
    assert new.nem.count("transfer.async") > old.nem.count("transfer.async")
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < 0.9 * timed_cycles(old.nem)
    assert _split(new.nem) == new.nem


def _grouped_1x1_relu_model(hw: int, c: int, groups: int):
    """A grouped 1x1 convolution with bias and a Relu, `c` to `c` channels in
    `groups` groups over `hw` x `hw` pixels, seeded random weights."""
    from compile_runs import typed_model
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.uniform(-1, 1, (c, c // groups, 1, 1)).astype(np.float32)
    b = rng.uniform(-1, 1, (c,)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", group=groups),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    shape = [1, c, hw, hw]
    return typed_model(
        nodes,
        [("x", TensorProto.FLOAT, shape)],
        [("y", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )


@pytest.mark.slow  # a compile and three runs of a grouped conv
def test_row_tiles_in_a_loop_of_few_trips_split_from_min_few():
    """ShuffleNet's grouped 1x1 convolution of 136 channels (4 groups) at
    28x28 (session 32): each engine part is a loop of 7 one-row tiles whose
    input and output copies span 15,232 bytes, under `min-bytes` (16 KiB)
    and 106,624 over the loop's runs, under `min-moved`: each stayed whole
    on one DMA of four.  Run at most `few-runs` (8) times, they split from
    `min-few` (8 KiB): the same output bits under random schedules, in
    under 0.85x the cycles (the rule before: `few-runs=2`, `min-few` =
    `min-single`)."""
    pytest.importorskip("mlir.ir")
    from compile_runs import only_output, timed_cycles

    from nem.compile import compile_onnx

    model = _grouped_1x1_relu_model(28, 136, 4)
    whole = compile_onnx(model, device="npm_pro_x1", split_transfers=False)
    tile = "(arg4_v3 mod 2) * 15232, 15232) elem=f32, shape=[1, 1, 28, 4, 34]"
    assert "loop arg4_v3 in [0..6]" in whole.nem and tile in whole.nem
    old = dataclasses.replace(whole, nem=_split(whole.nem, few_runs=2, min_few=16384))
    new = dataclasses.replace(whole, nem=_split(whole.nem))
    assert tile in old.nem and tile not in new.nem
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < 0.85 * timed_cycles(old.nem)
    assert _split(new.nem) == new.nem


@pytest.mark.slow  # two compiles and three runs of a conv
def test_a_padded_copy_between_ddr_buffers_runs_on_every_sdma():
    """A padded 3x3 conv copies its input into a padded DDR buffer with one
    `.sync` transfer, which one sDMA ran while npm_pro_x1's other three
    idled: split, it is 4 async slices and a wait, the same output bits
    under random schedules, in fewer timed cycles.  (By default the input's
    transpose now writes the padded buffer in place, D-COMPILE-PAD-IN-PLACE,
    and there is no such copy: `pad_in_place=False` keeps it.)"""
    pytest.importorskip("mlir.ir")
    from compile_runs import conv3x3_model, only_output, timed_cycles

    from nem.compile import compile_onnx

    model = conv3x3_model(56, 64, 64)
    opts = {"device": "npm_pro_x1", "pad_in_place": False}
    old = compile_onnx(model, **opts, split_transfers=False)
    new = compile_onnx(model, **opts)
    assert old.nem.count("transfer.sync") > new.nem.count("transfer.sync")
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < 0.9 * timed_cycles(old.nem)


def _l1_to_l1_slices(nem: str) -> list[str]:
    """The program's slices (`NAME_k = transfer`) of copies between L1 buffers."""
    l1 = set(re.findall(r"^buffer (\w+) : L1\[", nem, re.M))
    pairs = re.findall(
        r"^\s*\w+_\d+ = transfer\.async\(dst=region\((\w+),.*src=region\((\w+),", nem, re.M
    )
    return [f"{d}<-{s}" for d, s in pairs if d in l1 and s in l1]


@pytest.mark.slow  # one compile and four runs of a 7x7 stem
def test_the_stems_input_transpose_in_l1_splits_over_the_dmas(monkeypatch):
    """A 7x7 stride-2 stem on 3 input channels (ResNet-50's n0 at half
    size): the program stages the NCHW input rows in L1 and transposes them
    to NHWC by an L1-to-L1 copy whose source rows interleave.  Before
    session 24 such a copy stayed whole on one DMA (ResNet-50's n0: 4,708
    cycles of its 31,839 on each engine); now it splits over the engine's
    DMAs: the same bits under random schedules, fewer timed cycles than the
    program whose L1-to-L1 copies stay whole.  The transpose stages its
    input too (`transform.UNSTAGED` empty): since session 60 its tiles read
    the permuted rows from DDR and make no L1-to-L1 copy."""
    pytest.importorskip("mlir.ir")
    from compile_runs import graph_model, only_output, timed_cycles
    from onnx import helper, numpy_helper

    from nem.compile import compile_onnx, transform

    monkeypatch.setattr(transform, "UNSTAGED", ())

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (16, 3, 7, 7)).astype(np.float32), "w")
    conv = helper.make_node(
        "Conv", ["x", "w"], ["y"], name="conv", pads=[3] * 4, strides=[2, 2], kernel_shape=[7, 7]
    )
    model = graph_model([conv], [1, 3, 112, 112], [w])
    old = compile_onnx(model, device="npm_pro_x1", split_transfers=False)
    new = dataclasses.replace(old, nem=_split(old.nem))
    monkeypatch.setattr(split_transfers, "_apart", lambda op: False, raising=False)
    whole = dataclasses.replace(old, nem=_split(old.nem))
    assert _l1_to_l1_slices(new.nem) and not _l1_to_l1_slices(whole.nem)
    a = only_output(new, model, 2)
    assert np.array_equal(a.view(np.uint32), only_output(old, model, 0).view(np.uint32))
    assert timed_cycles(new.nem) < 0.95 * timed_cycles(whole.nem)


STRIDED_STORE = """device "npm_pro_x1.nem"

program strided:

buffer X : DDR (size=262144, align=64)
buffer Y : DDR (size=262144, align=64)
buffer C : DDR (size=131072, align=64)
buffer x : L1[0] (size=131072, align=64)
buffer y : L1[0] (size=131072, align=64)
buffer z : L1[0] (size=16384, align=64)

s = transfer.async(dst=region(C, 0, 116736) elem=f32, shape=[8, 4, 128], strides=[4096, 128, 1], src=region(z, 0, 16384) elem=f32, shape=[8, 4, 128], layout=HWC)
loop i in [0..3] @max_in_flight(2):
  ld = transfer.async(dst=region(x, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, src=region(X, i * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, deps=[s])
  r = relu.async in region(x, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC out region(y, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC deps=[ld]
  st = transfer.async(dst=region(Y, i * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, src=region(y, (i mod 2) * 65536, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, deps=[r])
  wait(st)
endloop
o = transfer.async(dst=region(C, 2048, 116736) elem=f32, shape=[8, 4, 128], strides=[4096, 128, 1], src=region(z, 0, 16384) elem=f32, shape=[8, 4, 128], layout=HWC, deps=[s])
wait(o)
"""
"""A 16 KiB store `s` into a channel slice of a wider tensor `C` (a
concatenation's, D-COMPILE-CONCAT-IN-PLACE: 114 KiB spanned) made before a
tile loop whose loads and a statement after the loop consume its token."""


def test_a_strided_store_spanning_min_once_leaves_the_loop_its_tokens():
    """Session 34 (SqueezeNet's fire8 expand1x1 stores into the fire8
    concatenation, 344 KB spanned and 43 KB moved each, held 12 of 32
    tokens across the fire8 expand3x3 tile loop, whose 147 KB weight copies
    then ran whole on one DMA): only a transfer *moving* `min-once` keeps
    its slices' tokens from the loops (`reserved`).  Under 8 tokens and a
    64 KiB `min-once`, `s` spans it but moves 16 KiB: the loop's two
    iterations in flight get (8 - 1) // 2 = 3 tokens, so its load and store
    take 2 slices each and `s` what is left; reserved (as when it moves
    `min-once`: 16 KiB here), `s` took 4 slices and the body's copies stayed
    whole (the rule before session 34, on spans).  The same bits under
    random schedules, race-free (`nem-verify`), fewer cycles, within the
    limit, and a second run changes nothing."""
    held = _split(STRIDED_STORE, max_tokens=8, min_moved=0, min_once=1 << 14)
    assert "deps=[s_1, s_2, s_3, s_4]" in held and "ld_1" not in held and "wait(st)" in held
    out = _split(STRIDED_STORE, max_tokens=8, min_moved=0, min_once=1 << 16)
    assert "s_4" not in out
    assert "deps=[ld_1, ld_2]" in out and "wait(st_1, st_2)" in out
    (prog,) = programs(parse_nem(out, str(LIT)))
    assert max_live_tokens(prog) <= 8
    (y_held, cycles_held), (y_out, cycles_out) = (
        _run_seeded(held, X=65536, z=4096),
        _run_seeded(out, X=65536, z=4096),
    )
    assert np.array_equal(y_out, y_held) and y_out.any()
    assert cycles_out < cycles_held
    assert _split(out, max_tokens=8, min_moved=0, min_once=1 << 16) == out
