"""`nem-jam-engine-loops` (D-NEM-JAM-ENGINES): the loops of a nest's engine
parts become one loop, so the engines run at the same time.  The jammed
program computes the same bits as the unjammed one under random schedules
and `nem-verify` accepts it once ordered; loops that conflict, share an
engine or hold an ordering of their own are left alone; a compiled
convolution split over 4 engines runs in far fewer timed cycles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nem.dialect.ops import LoopOp, programs
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem
from nem.passes.jam_engine_loops import JamEngineLoopsPass
from nem.passes.pass_context import pass_context
from nem.passes.pipeline import VerifyPipelinePass
from nem.passes.synthesize_deps import SynthesizeDepsPass
from nem.runtime.api import NemInterpreter

ROOT = Path(__file__).resolve().parents[2]
LIT = ROOT / "test" / "lit" / "deps" / "jam_engine_loops.nem"


def _ordered(text: str, jam: bool) -> str:
    """`text` (jammed when `jam`) after `nem-synthesize-deps`, checked by `nem-verify`."""
    module = parse_nem(text, str(LIT))
    ctx = pass_context(file=str(LIT))
    if jam:
        JamEngineLoopsPass().apply(ctx, module)
    SynthesizeDepsPass(device="npm_pro_x1").apply(ctx, module)
    VerifyPipelinePass().apply(ctx, module)
    return print_nem(module)


def _loops(text: str) -> list[str]:
    module = parse_nem(text, str(LIT))
    (prog,) = programs(module)
    return [op.iv_name.data for op in prog.block.ops if isinstance(op, LoopOp)]


def _outputs(text: str, seed: int | None) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    it = NemInterpreter(device="npm_pro_x1")
    it.load_string(text, file="jam.nem")
    it.write_tensor("X", rng.standard_normal(16384).astype(np.float32))
    it.write_tensor("W", rng.standard_normal(1024).astype(np.float32))
    if seed is not None:
        it.set_scheduling("random", seed)
    res = it.run()
    assert res.status == "completed" and res.race_count == 0, res.error
    return {b: it.read_buffer(b) for b in ("Y", "Z", "V")}


def test_parts_are_jammed_and_compute_the_same_bits():
    """i, j and k (three engines) become one loop and a tail; m (reads what
    they write) and n (m's engine) stay; p and q in o jam.  The same Y, Z
    and V bits as the program without the jam, under the source order and
    random schedules."""
    text = LIT.read_text()
    jammed = _ordered(text, jam=True)
    assert _loops(jammed) == ["k", "j_1", "m", "n", "o"]
    assert _loops(_ordered(text, jam=False)) == ["i", "j", "k", "m", "n", "o"]
    want = _outputs(_ordered(text, jam=False), None)
    for seed in (None, 1, 2, 3):
        got = _outputs(jammed, seed)
        for name in want:
            assert np.array_equal(got[name].view(np.uint8), want[name].view(np.uint8)), name


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        # j reads the rows of Y that i writes: i's iteration 3 would run after j's 0
        ("src=region(X, j * 4096 + 16384", "src=region(Y, j * 4096 + 12288", "conflict"),
        # j on i's engine: two loops of one engine are not jammed
        ("buffer a1 : L1[1]", "buffer a1 : L1[0]", "engine"),
        # an ordering of its own: the pass runs before the ordering
        ("  si = transfer.async(", "  wait(li)\n  si = transfer.async(", "wait"),
    ],
)
def test_loops_that_must_stay_apart_stay(old, new, why):
    text = LIT.read_text()
    assert old in text
    module = parse_nem(text.replace(old, new), str(LIT))
    JamEngineLoopsPass().apply(pass_context(file=str(LIT)), module)
    # i stays a loop of its own (j, free of it, may still jam into k)
    assert _loops(print_nem(module))[0] == "i", why


@pytest.mark.slow  # two compiles and three runs of a small conv
def test_a_split_conv_jammed_is_bit_identical_and_faster():
    """A 3x3 conv (56x56 pixels, 64 to 64 channels) split over npm_pro_x1's 4
    engines: jammed (the default) and with `--no-jam`, the same output bits
    under random schedules, race-free, `nem-verify` clean (compile_onnx
    verifies), and the jammed one in under 0.6x the timed cycles."""
    pytest.importorskip("mlir.ir")
    from compile_runs import conv3x3_model, only_output, timed_cycles

    from nem.compile import compile_onnx

    model = conv3x3_model(56, 64, 64)
    old = compile_onnx(model, device="npm_pro_x1", jam=False)
    new = compile_onnx(model, device="npm_pro_x1")
    assert len(_loops(new.nem)) < len(_loops(old.nem))
    assert np.array_equal(
        only_output(new, model, 2).view(np.uint32), only_output(old, model, 0).view(np.uint32)
    )
    assert timed_cycles(new.nem) < 0.6 * timed_cycles(old.nem)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a statement between the loops declares a name loop i's body declares
        ("lw = transfer.async(", "li = transfer.async("),
        # loop i's body declares the variable of loop k, which i and j jam into
        ("  si = transfer.async(", "  k = transfer.async("),
    ],
)
def test_a_name_the_moved_body_would_clash_with_is_not_moved_there(old, new):
    """NAME-02: loop i's body moves after `lw` and under the variable of the
    loop it jams into; were it moved where a name it declares is declared,
    nem-verify (run by `_ordered`) would reject the program (an outside
    user's reproducers).  The program
    jammed otherwise computes the same bits."""
    text = LIT.read_text()
    assert old in text
    text = text.replace(old, new)
    want = _outputs(_ordered(text, jam=False), None)
    got = _outputs(_ordered(text, jam=True), 1)
    for name in want:
        assert np.array_equal(got[name].view(np.uint8), want[name].view(np.uint8)), name


def test_a_longer_loop_declaring_a_buffer_gets_no_tail():
    """A tail would declare loop j's buffer a second time (DEV-16: twice its
    bytes): the loop holding it is not split."""
    head = "loop j in [0..3] @max_in_flight(2):\n"
    text = LIT.read_text()
    assert head in text
    out = _ordered(text.replace(head, head + "  buffer tb : L1[1] (size=64, align=64)\n"), jam=True)
    assert out.count("buffer tb :") == 1


ONE_ROUND_SHORT = """device "npm_pro_x1.nem"

program short:

buffer X : DDR (size=65536, align=64)
buffer V : DDR (size=65536, align=64)
buffer b0 : L1[0] (size=2048, align=64)
buffer b1 : L1[1] (size=2048, align=64)
buffer b3 : L1[3] (size=2048, align=64)

loop o in [0..1]:
  loop p in [0..3] @max_in_flight(2):
    lp = transfer.async(dst=region(b0, (p mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C, src=region(X, o * 4096 + p * 1024, 1024) elem=f32, shape=[256], layout=C)
    rp = relu.async in region(b0, (p mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C out region(b0, (p mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C
    sp = transfer.async(dst=region(V, o * 4096 + p * 1024, 1024) elem=f32, shape=[256], layout=C, src=region(b0, (p mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C)
  endloop
endloop
loop r in [0..1]:
  loop s in [0..3] @max_in_flight(2):
    ls = transfer.async(dst=region(b1, (s mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C, src=region(X, r * 4096 + s * 1024 + 8192, 1024) elem=f32, shape=[256], layout=C)
    ss = transfer.async(dst=region(V, r * 4096 + s * 1024 + 8192, 1024) elem=f32, shape=[256], layout=C, src=region(b1, (s mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C)
  endloop
endloop
loop q in [0..3] @max_in_flight(2):
  lq = transfer.async(dst=region(b3, (q mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C, src=region(X, q * 1024 + 16384, 1024) elem=f32, shape=[256], layout=C)
  rq = relu.async in region(b3, (q mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C out region(b3, (q mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C
  sq = transfer.async(dst=region(V, q * 1024 + 16384, 1024) elem=f32, shape=[256], layout=C, src=region(b3, (q mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C)
endloop
"""


def _short_outputs(text: str, seed: int | None) -> np.ndarray:
    it = NemInterpreter(device="npm_pro_x1")
    it.load_string(text, file="short.nem")
    it.write_tensor("X", np.random.default_rng(3).standard_normal(16384).astype(np.float32))
    if seed is not None:
        it.set_scheduling("random", seed)
    res = it.run()
    assert res.status == "completed" and res.race_count == 0, res.error
    return it.read_buffer("V")


def test_a_part_with_one_outer_iteration_jams_into_the_first():
    """Engine parts 0 and 1 (loops o and r) take two outer iterations of a
    channel loop each, part 3 one (its outer loop folded away: q alone, of
    another window): q is wrapped in a loop of one iteration and jammed with
    the parts' first, its channel loop with theirs, the parts' second
    iteration a tail after it; the same bits as without the jam, under
    random schedules (D-NEM-JAM-ENGINES)."""
    jammed = _ordered(ONE_ROUND_SHORT, jam=True)
    module = parse_nem(jammed, "short.nem")
    (prog,) = programs(module)
    top = [op for op in prog.block.ops if isinstance(op, LoopOp)]
    # the jammed first iteration (q's wrapper), the parts' tail
    assert [op.iv_name.data for op in top] == ["r_1", "r_2"]
    (inner,) = [op for op in top[0].block.ops if isinstance(op, LoopOp)]
    tasks = {o.token_name() for o in inner.block.ops if hasattr(o, "token_name")}
    assert {"lp", "ls", "lq"} <= tasks
    want = _short_outputs(_ordered(ONE_ROUND_SHORT, jam=False), None)
    for seed in (None, 1, 2, 3):
        got = _short_outputs(jammed, seed)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def _part(name: str, engine: int, last: int, at: int) -> str:
    """An engine part: rows `at`.. of X through engine `engine`'s L1 into V,
    `last + 1` iterations, two in flight."""
    b, o = f"b{engine}", f"{name} * 1024 + {at * 1024}"
    return f"""loop {name} in [0..{last}] @max_in_flight(2):
  l{name} = transfer.async(dst=region({b}, ({name} mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C, src=region(X, {o}, 1024) elem=f32, shape=[256], layout=C)
  r{name} = relu.async in region({b}, ({name} mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C out region({b}, ({name} mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C
  s{name} = transfer.async(dst=region(V, {o}, 1024) elem=f32, shape=[256], layout=C, src=region({b}, ({name} mod 2) * 1024, 1024) elem=f32, shape=[256], layout=C)
endloop
"""


def _parts(l1: int, body: str) -> str:
    """A program of engine parts reading X and writing V, with a buffer of
    `l1` bytes in each engine's L1 (`b0` .. `b3`)."""
    return (
        'device "npm_pro_x1.nem"\n\nprogram parts:\n\n'
        "buffer X : DDR (size=65536, align=64)\nbuffer V : DDR (size=65536, align=64)\n"
        + "".join(f"buffer b{k} : L1[{k}] (size={l1}, align=64)\n" for k in range(4))
        + "\n"
        + body
    )


TWO_LENGTHS = _parts(
    2048, _part("a", 0, 1, 0) + _part("b", 1, 1, 2) + _part("c", 2, 2, 4) + _part("d", 3, 2, 7)
)


def test_parts_of_two_lengths_all_jam_their_tails_after_them():
    """Engine parts of 2, 2, 3 and 3 iterations (10 rows over 4 engines
    in even parts): all four jam over their first two iterations, and
    the two longer parts' last iterations jam into one tail after them (the
    third part's tail used to stand between the third and the fourth part,
    which then ran after them all); the same bits as without the jam, under
    random schedules (D-NEM-JAM-ENGINES)."""
    jammed = _ordered(TWO_LENGTHS, jam=True)
    module = parse_nem(jammed, "parts.nem")
    (prog,) = programs(module)
    top = [op for op in prog.block.ops if isinstance(op, LoopOp)]
    assert len(top) == 2
    tasks = [{o.token_name() for o in lp.block.ops if hasattr(o, "token_name")} for lp in top]
    assert {"la", "lb", "lc", "ld"} <= tasks[0]
    assert {"lc", "ld"} <= tasks[1] and "la" not in tasks[1]
    want = _short_outputs(_ordered(TWO_LENGTHS, jam=False), None)
    for seed in (None, 1, 2, 3):
        got = _short_outputs(jammed, seed)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def _channel_part(name: str, engine: int, width: int = 16) -> str:
    """An engine part along the channels of an NHWC-like V (8 rows of 64
    f32): channels `16 * engine`.. of each tile of 2 rows, 4 tiles in a
    loop, two in flight; `width` channels (16: the parts' elements are
    disjoint, their byte spans interleave)."""
    b, at = f"b{engine}", f"{name} * 512 + {engine * 64}"
    box = f"elem=f32, shape=[2, {width}], strides=[64, 1]"
    one = f"elem=f32, shape=[2, {width}], layout=HW"
    size = (64 + width) * 4
    return f"""loop {name} in [0..3] @max_in_flight(2):
  l{name} = transfer.async(dst=region({b}, ({name} mod 2) * 256, {width * 8}) {one}, src=region(X, {at}, {size}) {box})
  r{name} = relu.async in region({b}, ({name} mod 2) * 256, {width * 8}) {one} out region({b}, ({name} mod 2) * 256, {width * 8}) {one}
  s{name} = transfer.async(dst=region(V, {at}, {size}) {box}, src=region({b}, ({name} mod 2) * 256, {width * 8}) {one})
endloop
"""


def _channel_parts(first_width: int) -> str:
    return _parts(
        1024,
        "".join(_channel_part(n, k, first_width if k == 0 else 16) for k, n in enumerate("abcd")),
    )


def test_channel_parts_whose_spans_interleave_jam_by_their_elements():
    """Four engine parts of a loop over row tiles, each writing its 16
    channels of every row of V: their byte spans interleave (a row's 64
    channels are 256 bytes apart) but no element of one is another's, so
    they jam into one loop (they ran one after another, compared by byte
    intervals: Inception v2's n482 at 4.9x its bound, session 57); the same
    bits as without the jam, under random schedules.  Part a widened to 17
    channels writes part b's first one: those two stay apart."""
    disjoint = _ordered(_channel_parts(16), jam=True)
    assert len(_loops(disjoint)) == 1
    want = _short_outputs(_ordered(_channel_parts(16), jam=False), None)
    for seed in (None, 1, 2, 3):
        got = _short_outputs(disjoint, seed)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    meeting = _ordered(_channel_parts(17), jam=True)
    module = parse_nem(meeting, "parts.nem")
    (prog,) = programs(module)
    top = [op for op in prog.block.ops if isinstance(op, LoopOp)]
    tasks = [{o.token_name() for o in lp.block.ops if hasattr(o, "token_name")} for lp in top]
    assert not any({"la", "lb"} <= t for t in tasks), tasks


def _lone(at: int) -> str:
    """Engine 3's part of one tile, straight-line code: rows `at` and
    `at + 1` of X through engine 3's L1 into V."""
    o, one = at * 1024, "elem=f32, shape=[512], layout=C"
    return (
        f"ld = transfer.async(dst=region(b3, 0, 2048) {one}, src=region(X, {o}, 2048) {one})\n"
        f"rd = relu.async in region(b3, 0, 2048) {one} out region(b3, 0, 2048) {one}\n"
        f"sd = transfer.async(dst=region(V, {o}, 2048) {one}, src=region(b3, 0, 2048) {one})\n"
    )


def _lone_after(at: int) -> str:
    return _parts(2048, "".join(_part(n, k, 1, 2 * k) for k, n in enumerate("abc")) + _lone(at))


def test_a_lone_part_after_the_others_loop_moves_before_it(monkeypatch):
    """Rows of V over 4 engines, 2, 2, 2 and the last part's 2 in one tile:
    the three loops jam, and engine 3's straight-line part, which the
    stream issued once the jammed loop's iterations had all ended (its
    stores waited for in each), moves before the loop and runs beside it
    (DenseNet-121's elementwise chains, 14 rows as 4, 4, 4, 2, session 58):
    the same bits as without the jam under random schedules, race-free,
    and fewer timed cycles than left after it.  A part writing a row the
    loop writes (rows 5 and 6) keeps its store after it (its load and Relu,
    which touch nothing the loop touches, go before), the same bits."""
    from compile_runs import timed_cycles

    from nem.passes import jam_engine_loops

    moved = _ordered(_lone_after(6), jam=True)
    assert moved.index("ld = transfer.async") < moved.index("loop ")
    want = _short_outputs(_ordered(_lone_after(6), jam=False), None)
    for seed in (None, 1, 2, 3):
        got = _short_outputs(moved, seed)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    with monkeypatch.context() as m:
        m.setattr(jam_engine_loops.LonePartsFirst, "match_and_rewrite", lambda *args: None)
        after = _ordered(_lone_after(6), jam=True)
    assert after.index("ld = transfer.async") > after.index("endloop")
    assert timed_cycles(moved) < 0.9 * timed_cycles(after)
    meeting = _ordered(_lone_after(5), jam=True)
    assert meeting.index("ld = transfer.async") < meeting.index("loop ")
    assert meeting.index("sd = transfer.async") > meeting.index("endloop")
    want = _short_outputs(_ordered(_lone_after(5), jam=False), None)
    for seed in (None, 1, 2):
        got = _short_outputs(meeting, seed)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
