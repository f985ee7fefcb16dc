"""`nem-split-transfers`' live tokens: small transfers several statements
consume, waited for before the first of them (D-NEM-SPLIT-TRANSFERS,
sessions 37-38), and after the split where it took the last tokens
(session 40); a transfer's deps that another of its deps reaches, dropped
(session 43); a transfer's bands taken as their join (sessions 43c and
44); a store left whole, waited for where the estimate has it done (session
44); a copy made once split from `min-few`, with the tokens the others leave
(session 50); engine parts' weights staged before a loop, waited for before
it (session 56); small transfers first consumed after a copy left short,
waited for before it (session 58)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nem.analysis.token_liveness import max_live_tokens
from nem.dialect.ops import programs
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem
from nem.passes import split_transfers
from nem.passes.pass_context import pass_context
from nem.passes.pipeline import VerifyPipelinePass
from nem.passes.split_transfers import SplitTransfersPass

LIT = Path(__file__).resolve().parents[2] / "test" / "lit" / "deps" / "split_transfers.nem"

_ROWS = "elem=f32, shape=[8, 16, 128], layout=HWC"
_STRIP = "elem=f32, shape=[1, 4, 128], layout=HWC"
_ZERO = "elem=i8, shape=[2048], layout=C"


def _buffers(*decls: str) -> str:
    """`buffer` statements, one per `NAME LEVEL SIZE`, 64-byte aligned."""
    return "".join(
        f"buffer {n} : {level} (size={size}, align=64)\n"
        for n, level, size in (d.split() for d in decls)
    )


_IO = ("X DDR 65536", "W DDR 65536", "Y DDR 65536")
PADDED = f"""device "npm_pro_x1.nem"

{_buffers(*_IO, "z L1[0] 4096", "a L1[0] 65536", "b L1[1] 65536", "w L1[0] 65536")}
c1 = clamp.async in region(z, 0, 2048) {_ZERO} out region(z, 0, 2048) {_ZERO} min=0 max=0
f1 = transfer.async(dst=region(X, 0, 2048) {_STRIP}, src=region(z, 0, 2048) {_STRIP}, deps=[c1])
c2 = clamp.async in region(z, 2048, 2048) {_ZERO} out region(z, 2048, 2048) {_ZERO} min=0 max=0
f2 = transfer.async(dst=region(X, 63488, 2048) {_STRIP}, src=region(z, 2048, 2048) {_STRIP}, deps=[c2])
la = transfer.async(dst=region(a, 0, 65536) {_ROWS}, src=region(X, 0, 65536) {_ROWS}, deps=[f1, f2])
cw = transfer.async(dst=region(w, 0, 65536) {_ROWS}, src=region(W, 0, 65536) {_ROWS})
r = add.async in region(a, 0, 65536) {_ROWS}, region(w, 0, 65536) {_ROWS} out region(a, 0, 65536) {_ROWS} deps=[la, cw]
lb = transfer.async(dst=region(b, 0, 65536) {_ROWS}, src=region(X, 0, 65536) {_ROWS}, deps=[f1, f2])
sa = transfer.async(dst=region(Y, 0, 65536) {_ROWS}, src=region(a, 0, 65536) {_ROWS}, deps=[r])
wait(sa, lb)
"""
"""Two 2 KiB border strips of a padded input `X`, each zeroed in L1 and
stored (D-COMPILE-PAD-IN-PLACE), that two engine parts' loads read whole (SqueezeNet's n37: 16 strips, four
output-channel parts): the strips' tokens are live until the second
load, across the first part's weight copy `cw`."""

SPACED = PADDED.replace("la = ", "wait(c1, c2)\nla = ", 1)
"""`PADDED` with a wait between the strips and the first load (the fills'
clamps): the strips had a stretch of the stream to run in."""


def _split(text: str, **options: int) -> str:
    """`text` after `nem-split-transfers{options}`, checked by `nem-verify`."""
    module = parse_nem(text, str(LIT))
    SplitTransfersPass(**options).apply(pass_context(file=str(LIT)), module)
    VerifyPipelinePass().apply(pass_context(file=str(LIT)), module)
    return print_nem(module)


def _run(text: str, read: tuple[str, ...] = ("Y",)) -> tuple[np.ndarray, int]:
    """`Y` (the buffers `read`) after a run of `text` from seeded `X` and `W`
    (the same under 3 random schedules), and the program's timed cycles."""
    from nem.runtime.api import NemInterpreter

    rng = np.random.default_rng(0)

    def start(mode: str = "functional") -> NemInterpreter:
        it = NemInterpreter(device="npm_pro_x1")
        it.set_mode(mode)
        it.load_string(text, file=str(LIT))
        for name, n in (("X", 16384), ("W", 16384)):
            it.write_tensor(name, rng.standard_normal(n).astype(np.float32))
        return it

    it = start()
    _, diff = it.run_schedules(3, seed=1)
    assert diff is None
    timed = start("timed").start()
    timed.run_to_end()
    out = np.concatenate([it.read_tensor(name).view(np.uint32) for name in read])
    return out, timed.roofline().total.cycles


def _exact_and_faster(out: str, ref: str, limit: int, factor: float) -> np.ndarray:
    """Check `out`, split with `max_tokens=limit`: within the limit, the
    same bits as `ref` under random schedules, under `factor` times its
    cycles, and a second run of the pass changes nothing; its `Y`."""
    (prog,) = programs(parse_nem(out, str(LIT)))
    assert max_live_tokens(prog) <= limit
    (y_ref, cycles_ref), (y_out, cycles_out) = _run(ref), _run(out)
    assert np.array_equal(y_out, y_ref) and y_out.any()
    assert cycles_out < factor * cycles_ref
    assert _split(out, max_tokens=limit) == out
    return y_out


def _retired(text: str, limit: int, held: str, wait: str, split: str, factor: float) -> None:
    """`text` split under `limit` tokens: without the retire rules
    (`retire-below=0`) a task names `held`; with them the strips are waited
    for where `wait` shows (the wait and the statement after it), no task
    names them, a task names `split`, and `_exact_and_faster` holds
    against the program without the rules."""
    before = _split(text, max_tokens=limit, retire_below=0)
    assert f"deps=[{held}]" in before
    out = _split(text, max_tokens=limit)
    assert wait in out and "deps=[f1" not in out
    assert f"deps=[{split}]" in out
    _exact_and_faster(out, before, limit, factor)


def _same_bits(out: str, *refs: str) -> None:
    """`out`'s `Y` and `Z` the same bits as each of `refs`' under random
    schedules (`_run`)."""
    y_out = _run(out, ("Y", "Z"))[0]
    for ref in refs:
        assert np.array_equal(_run(ref, ("Y", "Z"))[0], y_out)


def test_small_transfers_two_statements_consume_are_waited_for_before_the_first():
    """At 5 live tokens, the strips held to the second load leave the first
    part's load and weight copy no token (5 live at the add): both whole on
    one DMA.  Waited for before the first load, and dropped from both loads'
    deps, they leave 2: each takes 2 slices.  The same bits under random
    schedules, race-free (`nem-verify`), fewer cycles, within the limit, and
    a second run changes nothing."""
    held = _split(SPACED, max_tokens=5, retire_below=0)
    assert "deps=[la, cw]" in held and "deps=[f1, f2]" in held
    out = _split(SPACED, max_tokens=5)
    assert "wait(c1, c2)\nwait(f1, f2)\nla_1 = " in out and "deps=[f1" not in out
    assert "deps=[la_1, la_2, cw_1, cw_2]" in out
    y_out = _exact_and_faster(out, held, 5, 0.8)
    assert np.array_equal(_run(SPACED)[0], y_out)


def test_a_wait_that_consumes_them_first_takes_them():
    """Where the first statement consuming the strips is a wait, that wait
    is the one before the first consumer: the later load drops them, and
    no other wait is added."""
    text = SPACED.replace("la = transfer.async(", "wait(f1, f2)\nla = transfer.async(", 1)
    text = text.replace(", deps=[f1, f2])", ")", 1)
    out = _split(text, max_tokens=5)
    assert out.count("wait(f1, f2)") == 1 and "deps=[f1" not in out
    assert "wait(f1, f2)\nla_1 = " in out


def test_strips_issued_right_before_the_first_load_are_retired_only_when_short():
    """Issued right before their first consumer (`PADDED`), the strips are
    waited for only where the block's tokens reach the limit in their live
    interval: a wait there holds the stream until they, queued behind the
    copies issued just before, have run (test_hoist's staged bias copies,
    session 38).  With 32 tokens they stay in both loads' deps, as without
    the rule; with a wait between them and the load (`SPACED`), they had the
    stream's time to run, and are waited for before it whatever the tokens."""
    assert _split(PADDED, max_tokens=32) == _split(PADDED, max_tokens=32, retire_below=0)
    assert "deps=[f1" not in _split(PADDED, max_tokens=5)
    spaced = _split(SPACED, max_tokens=32)
    assert "wait(c1, c2)\nwait(f1, f2)\nla_1 = " in spaced and "deps=[f1" not in spaced


def test_strips_the_split_leaves_at_the_limit_are_waited_for_after_it():
    """At 6 tokens the strips of `PADDED` peak at 5 before the split, so
    `retire_shared` leaves them (issued right before their first load, the
    block short of the limit); the split then takes the sixth token for
    `la`'s second slice and the weight copy `cw` stays whole on one DMA
    (Inception v1's n75, session 39).  Asked again after the split, with
    `cw` whole in the strips' interval and the tokens at the limit there,
    they are waited for before `la`: `la` and `cw` take 3 and 2 slices.
    The same bits under random schedules, race-free, fewer cycles, within
    the limit, and a second run changes nothing."""
    _retired(
        PADDED, 6, "la_1, la_2, cw", "wait(f1, f2)\nla_1 = ", "la_1, la_2, la_3, cw_1, cw_2", 0.9
    )


LATE = (
    PADDED.replace("buffer Y : DDR", "buffer V : DDR (size=65536, align=64)\nbuffer Y : DDR", 1)
    .replace(
        "c1 = ",
        f"sv = transfer.async(dst=region(V, 0, 65536) {_ROWS}, src=region(b, 0, 65536) {_ROWS})\n"
        "c1 = ",
        1,
    )
    .replace("in region(z, 2048, 2048)", "in region(b, 0, 2048)", 1)
    .replace(
        f"out region(z, 2048, 2048) {_ZERO} min=0 max=0",
        f"out region(b, 0, 2048) {_ZERO} min=0 max=0 deps=[sv]",
        1,
    )
    .replace("src=region(z, 2048, 2048)", "src=region(b, 0, 2048)", 1)
    .replace(f"src=region(W, 0, 65536) {_ROWS})", f"src=region(W, 0, 65536) {_ROWS}, deps=[f1])")
)
"""`PADDED` with the second strip's fill chain on the other engine, after
a 64 KiB store `sv` out of the buffer the strip is zeroed in (the
previous layer's last engine part, nothing waiting for it), and the
weight copy `cw` after the first strip only (its engine's fill buffer):
DenseNet-121's n337, whose engine 3 strips end after the other engines'
weight copies could start (session 40)."""


def test_a_strip_that_ends_after_a_copy_behind_its_wait_could_start_stays(monkeypatch):
    """In `LATE` at 6 tokens, the second strip `f2` ends (by the static
    estimate) after `cw` could start: waited for before `la`, it would hold
    the weight copy behind `sv` (3,230 cycles, slower than the rule before,
    which left `cw` whole).  So only `f1` is waited for after the split; `f2`
    stays in the loads' deps, and `la` and `cw` take 2 slices each: the
    same bits, fewer cycles than both, and a second run changes nothing
    (session 41: it waited for `f2` too, `wait(f1)` standing between `f2`
    and `la`, and the slices' tokens at the limit in `f2`'s interval)."""
    out = _split(LATE, max_tokens=6)
    assert "wait(f1)\nla_1 = " in out and "wait(f1, f2)" not in out
    assert "la_2 = transfer.async" in out and "la_3 = " not in out
    assert "deps=[f2]" in out and "deps=[la_1, la_2, cw_1, cw_2]" in out
    before = _split(LATE, max_tokens=6, retire_below=0)
    with monkeypatch.context() as m:
        m.setattr(split_transfers, "stalls", lambda *args: lambda op, first, last: False)
        held = _split(LATE, max_tokens=6)
    assert "wait(f1, f2)\nla_1 = " in held
    y_out = _exact_and_faster(out, held, 6, 0.9)
    assert np.array_equal(_exact_and_faster(out, before, 6, 0.9), y_out)


@pytest.mark.parametrize("limit", [5, 6, 8, 32])
@pytest.mark.parametrize("name", ["PADDED", "SPACED", "LATE"])
def test_a_second_run_leaves_the_strips_as_the_first_did(name, limit):
    """Run on its own output, the pass changes nothing (session 41).  It
    did where the slices of the first run brought the tokens to the limit
    in a strip's interval (`PADDED` and `LATE` at 7-10 tokens: the first
    run asked the counts before the split, now `unsplit_counts`), and where
    a wait the retire rules added for one strip stood between another strip
    and its first consumer (`LATE` at 6, the two together: the session 38
    rule took it for a stretch of the stream, now not, `stops_stream`)."""
    once = _split(globals()[name], max_tokens=limit)
    assert _split(once, max_tokens=limit) == once


_T16 = "elem=f32, shape=[4, 1024], layout=MN"
_T8 = "elem=f32, shape=[2, 1024], layout=MN"
_TW = "elem=f32, shape=[16, 1024], layout=MN"
STAGED = f"""device "npm_pro_x1.nem"

{_buffers(*_IO, "Z DDR 65536", "a L1[0] 16384", "q L1[0] 16384", "w L1[0] 65536")}
ld = transfer.async(dst=region(a, 0, 16384) {_T16}, src=region(X, 0, 16384) {_T16})
r = relu.async in region(a, 0, 16384) {_T16} out region(q, 0, 16384) {_T16} deps=[ld]
sr = transfer.async(dst=region(Y, 0, 16384) {_T16}, src=region(q, 0, 16384) {_T16}, deps=[r])
cw = transfer.async(dst=region(w, 0, 65536) {_TW}, src=region(W, 0, 65536) {_TW})
loop i in [0..1] @max_in_flight(2):
  t = transfer.async(dst=region(q, i * 8192, 8192) {_T8}, src=region(X, i * 8192 + 16384, 8192) {_T8}, deps=[sr])
  u = add.async in region(q, i * 8192, 8192) {_T8}, region(w, i * 8192, 8192) {_T8} out region(q, i * 8192, 8192) {_T8} deps=[t, cw]
  s = transfer.async(dst=region(Y, i * 8192 + 16384, 8192) {_T8}, src=region(q, i * 8192, 8192) {_T8}, deps=[u])
  wait(s)
endloop
loop j in [0..1] @max_in_flight(2):
  v = transfer.async(dst=region(Z, j * 8192, 8192) {_T8}, src=region(a, j * 8192, 8192) {_T8}, deps=[ld])
  wait(v)
endloop
"""
"""A staged input `a` that a later loop reads again (Inception v2's n315
input rows, read by n336's tile loop), and a tile loop in between whose
tiles reuse the bytes the first result was stored from (`t` after `sr`,
as `nem-share-buffers` orders packed L1): that loop's closing wait covers
`sr`, `r` and `ld`, so `v`'s dep on `ld` orders nothing, yet it kept
`ld`'s token live across loop `i`."""


def test_a_dep_a_loop_already_covers_holds_no_token_across_it(monkeypatch):
    """At 6 live tokens, `ld` live to loop `j` (waited for right before it)
    left loop `i`'s iterations 2 tokens each: its tile copies whole, and
    `ld` whole.  Its dep in loop `j` dropped (loop `i` covers it), `ld`
    dies at `r`: `ld` takes 4 slices and loop `i`'s copies 2 each.  The
    same bits under random schedules, race-free (`nem-verify`), fewer
    cycles, within the limit, and a second run changes nothing."""
    out = _split(STAGED, max_tokens=6)
    assert "deps=[ld" not in out.split("loop j")[1] and "wait(ld" not in out
    assert "ld_4 = " in out and "t_2 = " in out and "s_2 = " in out
    (prog,) = programs(parse_nem(out, str(LIT)))
    assert max_live_tokens(prog) <= 6
    monkeypatch.setattr(split_transfers, "drop_covered_loop_deps", lambda program: 0)
    held = _split(STAGED, max_tokens=6)
    assert "wait(ld)" in held and "ld_1 = " not in held and "t_1 = " not in held
    (y_held, cycles_held), (y_out, cycles_out) = _run(held, ("Y", "Z")), _run(out, ("Y", "Z"))
    assert np.array_equal(y_out, y_held) and y_out.any()
    assert np.array_equal(_run(STAGED, ("Y", "Z"))[0], y_out)
    assert cycles_out < 0.8 * cycles_held
    monkeypatch.undo()
    assert _split(out, max_tokens=6) == out


_B8 = "elem=f32, shape=[8, 1024], layout=MN"
BANDS = f"""device "npm_pro_x1.nem"

{_buffers(*_IO, "a L1[0] 16384", "q L1[0] 16384", "p L1[0] 16384", "w L1[0] 65536")}
la = transfer.async(dst=region(a, 0, 16384) {_T16}, src=region(X, 0, 16384) {_T16})
b1 = relu.async in region(a, 0, 8192) {_T8} out region(q, 0, 8192) {_T8} deps=[la]
b2 = relu.async in region(a, 8192, 8192) {_T8} out region(q, 8192, 8192) {_T8} deps=[la]
j = add.async in region(q, 0, 16384) {_T16}, region(q, 0, 16384) {_T16} out region(p, 0, 16384) {_T16} deps=[b1, b2]
sj = transfer.async(dst=region(Y, 0, 16384) {_T16}, src=region(p, 0, 16384) {_T16}, deps=[j])
loop i in [0..1] @max_in_flight(2):
  t = transfer.async(dst=region(w, i * 32768, 32768) {_B8}, src=region(W, i * 32768, 32768) {_B8})
  u = relu.async in region(w, i * 32768, 8192) {_T8} out region(a, i * 8192, 8192) {_T8} deps=[t, b1, b2]
  s = transfer.async(dst=region(Y, i * 8192 + 16384, 8192) {_T8}, src=region(a, i * 8192, 8192) {_T8}, deps=[u])
  wait(s)
endloop
wait(sj)
"""
"""Two bands `b1` and `b2` of one op (a convolution's two NMU bands,
D-COMPILE-NMU-SPLIT) and their join `j` (its bias add), then a tile loop
whose tiles overwrite the bytes the bands read (`u` after both, as
`nem-share-buffers` orders packed L1: SqueezeNet's fire4 expand3x3 over
its expand1x1's bands once the even engine parts re-laid L1, session
42b): both tokens live across the loop."""


def test_a_loop_holding_two_bands_takes_their_join_instead(monkeypatch):
    """At 8 live tokens, `b1` and `b2` held across the loop (with `sj`) left
    its iterations 2 tokens each: the tile copy `t` and the store `s`
    whole.  The body's `u` takes the join `j` instead (it completes after
    both), one token across the loop: `t` and `s` take 2 slices each.  The
    same bits as without the rule and as the program before the pass under
    random schedules, race-free (`nem-verify`), fewer cycles, within the
    limit, and a second run changes nothing."""
    out = _split(BANDS, max_tokens=8)
    body = out.split("loop i")[1]
    assert "deps=[t_1, t_2, j]" in body and "b1" not in body and "b2" not in body
    assert "s_2 = " in body
    monkeypatch.setattr(split_transfers, "join_held", lambda live: False)
    held = _split(BANDS, max_tokens=8)
    monkeypatch.undo()
    assert "deps=[t, b1, b2]" in held.split("loop i")[1]
    y_out = _exact_and_faster(out, held, 8, 0.95)
    assert np.array_equal(_run(BANDS)[0], y_out)


REACHED = f"""device "npm_pro_x1.nem"

{_buffers(*_IO, "Z DDR 65536", "a L1[0] 16384", "b L1[1] 32768", "w L1[0] 65536")}
la = transfer.async(dst=region(a, 0, 16384) {_T16}, src=region(X, 0, 16384) {_T16})
s1 = transfer.async(dst=region(Y, 0, 16384) {_T16}, src=region(a, 0, 16384) {_T16}, deps=[la])
r = relu.async in region(a, 0, 16384) {_T16} out region(a, 0, 16384) {_T16} deps=[s1]
s2 = transfer.async(dst=region(Y, 16384, 16384) {_T16}, src=region(a, 0, 16384) {_T16}, deps=[r])
cw = transfer.async(dst=region(w, 0, 65536) {_TW}, src=region(W, 0, 65536) {_TW})
u = relu.async in region(w, 0, 65536) {_TW} out region(w, 0, 65536) {_TW} deps=[cw]
su = transfer.async(dst=region(Z, 0, 65536) {_TW}, src=region(w, 0, 65536) {_TW}, deps=[u])
ld = transfer.async(dst=region(b, 0, 32768) {_B8}, src=region(Y, 0, 32768) {_B8}, deps=[s1, s2])
wait(ld, su)
"""
"""Two stores `s1` and `s2` of one engine's L1 bytes (`s2` after `r`, which
overwrites what `s1` read), and a later load `ld` of both (the next
layer's input rows, RAW through DDR: Inception v1's inception_4b parts
after block 4a's stores, session 43), with a weight copy `cw` and its
store `su` issued in between: `ld`'s dep on `s1` holds `s1`'s token
across them, though `s2`, a dep of `ld` too, completes only after `s1`
(through `r`)."""


def test_a_dep_another_dep_reaches_holds_no_token(monkeypatch):
    """At 4 live tokens, `s1` held to `ld` left `cw` and `su` no token: both
    whole.  `ld`'s dep on `s1` dropped (`s2` reaches it through deps, so
    `ld` is ordered after `s1` all the same), `s1` dies at `r`: `cw` and
    `su` take 2 slices each.  The same bits as without the rule and as the
    program before the pass under random schedules, race-free
    (`nem-verify`), fewer cycles, within the limit, and a second run
    changes nothing.  (Without `retire_done`, which would wait for `s2`
    before `u`, whose copy `cw` ends after it by the estimate.)"""
    monkeypatch.setattr(split_transfers, "retire_done", lambda *args: False)
    out = _split(REACHED, max_tokens=4)
    assert "deps=[s2])" in out and "cw_2 = " in out and "su_2 = " in out
    monkeypatch.setattr(split_transfers, "drop_reached_deps", lambda program: 0)
    held = _split(REACHED, max_tokens=4)
    monkeypatch.undo()
    monkeypatch.setattr(split_transfers, "retire_done", lambda *args: False)
    assert "deps=[s1, s2])" in held and "cw_1 = " not in held and "su_1 = " not in held
    _exact_and_faster(out, held, 4, 0.95)
    _same_bits(out, held, REACHED)


NAMED = f"""device "npm_pro_x1.nem"

{_buffers(*_IO, "Z DDR 65536", "a L1[0] 16384", "q L1[0] 16384", "p L1[0] 16384", "w L1[0] 65536")}
la = transfer.async(dst=region(a, 0, 16384) {_T16}, src=region(X, 0, 16384) {_T16})
b1 = relu.async in region(a, 0, 8192) {_T8} out region(q, 0, 8192) {_T8} deps=[la]
b2 = relu.async in region(a, 8192, 8192) {_T8} out region(q, 8192, 8192) {_T8} deps=[la]
j = add.async in region(q, 0, 16384) {_T16}, region(q, 0, 16384) {_T16} out region(p, 0, 16384) {_T16} deps=[b1, b2]
sj = transfer.async(dst=region(Y, 0, 16384) {_T16}, src=region(p, 0, 16384) {_T16}, deps=[j])
cw = transfer.async(dst=region(w, 0, 65536) {_TW}, src=region(W, 0, 65536) {_TW})
u = relu.async in region(w, 0, 65536) {_TW} out region(w, 0, 65536) {_TW} deps=[cw]
su = transfer.async(dst=region(Z, 0, 65536) {_TW}, src=region(w, 0, 65536) {_TW}, deps=[u])
ld = transfer.async(dst=region(a, 0, 16384) {_T16}, src=region(X, 16384, 16384) {_T16}, deps=[b1, b2, su])
wait(ld, sj)
"""
"""Two bands `b1` and `b2` of one op and their join `j` (its bias add),
then a load `ld` that overwrites the bytes the bands read and also waits
for a later store `su` (Inception v1's n67 loads after block 4b's bands
and block 4a's stores, session 43c): both band tokens live across the
weight copy `cw` and its store `su`."""


def test_a_transfer_naming_two_bands_takes_their_join_where_it_waits_longer(monkeypatch):
    """At 5 live tokens, `b1` and `b2` held to `ld` left `cw` and `su` whole.
    `ld` takes their join `j` instead (it completes after both, and by the
    static estimate before `su`, another dep of `ld`): one token across
    them, `cw` and `su` take 2 slices each.  The same bits as without the
    rule and as the program before the pass under random schedules,
    race-free (`nem-verify`), fewer cycles, within the limit, and a second
    run changes nothing.  (Without `retire_done`, which would wait for `sj`
    before `u`.)"""
    monkeypatch.setattr(split_transfers, "retire_done", lambda *args: False)
    out = _split(NAMED, max_tokens=5)
    assert "deps=[j, su_1, su_2])" in out and "cw_2 = " in out and "su_2 = " in out
    monkeypatch.setattr(split_transfers, "join_named", lambda *args: False)
    held = _split(NAMED, max_tokens=5)
    monkeypatch.undo()
    monkeypatch.setattr(split_transfers, "retire_done", lambda *args: False)
    assert "deps=[b1, b2, su])" in held and "cw_1 = " not in held
    _exact_and_faster(out, held, 5, 0.95)
    _same_bits(out, held, NAMED)


ALONE = NAMED.replace("deps=[b1, b2, su])", "deps=[b1, b2])").replace(
    "wait(ld, sj)", "wait(ld, sj, su)"
)
"""`NAMED` with the bands `ld`'s only deps (ShuffleNet's weight loads after
their layer's bands, session 44): by the static estimate, their join `j`
ends after `ld` could start, and no other dep of `ld` ends later."""

_E = "elem=f32, shape=[128], layout=C"
LOOPED = ALONE.replace(
    "buffer w : L1[0] (size=65536, align=64)\n",
    "buffer w : L1[0] (size=65536, align=64)\nbuffer e : L1[1] (size=1024, align=64)\n",
).replace(
    "cw = ",
    f"loop i in [0..1]:\n  e1 = relu.async in region(e, 0, 512) {_E} out region(e, 512, 512) {_E}\n"
    "  wait(e1)\nendloop\ncw = ",
)
"""`ALONE` with a loop between `j` and `ld` (SqueezeNet's `copy658` across
n22's tile loop, session 44)."""


def test_a_transfer_naming_only_its_bands_takes_their_join_where_it_frees_a_token(monkeypatch):
    """At 5 live tokens, `b1` and `b2` held to `ld`, their last use, left
    `cw` and `su` whole.  `ld` takes their join `j` instead, though `j`
    ends after `ld` could start (no other dep of `ld` ends later): one token
    across them, `cw` and `su` take 2 slices each.  The same bits as without
    the rule and as the program before the pass under random schedules,
    race-free (`nem-verify`), fewer cycles, within the limit, and a second
    run changes nothing.  `ld` keeps the bands where a later statement
    names one of them (the join would free no token, only add its own:
    SqueezeNet's fire9 copies) or a loop stands between `j` and `ld`
    (SqueezeNet's `copy658`)."""
    out = _split(ALONE, max_tokens=5)
    assert "deps=[j])" in out and "cw_2 = " in out and "su_2 = " in out
    monkeypatch.setattr(split_transfers, "join_named", lambda *args: False)
    held = _split(ALONE, max_tokens=5)
    monkeypatch.undo()
    assert "deps=[b1, b2])" in held and "cw_1 = " not in held and "su_1 = " not in held
    _exact_and_faster(out, held, 5, 0.95)
    _same_bits(out, held, ALONE)
    later = ALONE.replace("wait(ld, sj, su)", "wait(ld, sj, su, b1)")
    assert "deps=[b1, b2])" in _split(later, max_tokens=5)
    assert "deps=[b1, b2])" in _split(LOOPED, max_tokens=5)


OVER = (
    NAMED.replace(
        "buffer w : L1[0] (size=65536, align=64)\n",
        "buffer w : L1[0] (size=65536, align=64)\nbuffer e : L1[1] (size=4096, align=64)\n",
    )
    .replace(
        "cw = ",
        "wait(sj)\nloop i in [0..1] @max_in_flight(1):\n"
        + "".join(
            f"  e{n} = relu.async in region(e, {n * 1024}, 512) {_E}"
            f" out region(e, {n * 1024 + 512}, 512) {_E}\n"
            for n in range(3)
        )
        + "  wait(e0, e1, e2)\nendloop\ncw = ",
    )
    .replace("wait(ld, sj)", "wait(ld, b1, b2)")
)
"""`NAMED` with the join `j` done (waited for) before a loop of three
tokens, and the bands named after `ld` too (Inception v1's n49 border
fills at `HOISTED_SHARE` 0.5, session 47): `j`'s token held to `ld` would
be one more across the loop, the bands living on all the same."""


def test_a_transfer_keeps_its_bands_where_their_join_would_pass_the_limit():
    """At 5 live tokens (the bands and the loop's three), `ld` keeps `b1`
    and `b2`: their join's token, taken instead (it ends before `su` by the
    estimate), would live across the loop, 6 tokens there (the rule did so
    before session 47: a program over the limit, which `nem-verify`
    rejects as DEV-17 on the device's own limit).  At 6 it takes the join.
    Within the limit, the same bits as the program before the pass."""
    out = _split(OVER, max_tokens=5)
    (prog,) = programs(parse_nem(out, str(LIT)))
    assert max_live_tokens(prog) <= 5
    assert "deps=[b1, b2, su_1, su_2])" in out
    _same_bits(out, OVER)
    assert "deps=[j, su_1, su_2])" in _split(OVER, max_tokens=6)


_STRIP8 = "elem=f32, shape=[2, 256], layout=MN"
DONE = f"""device "npm_pro_x1.nem"

{_buffers(*_IO, "a L1[0] 65536", "w L1[0] 16384", "z L1[0] 8192", "b L1[1] 65536")}
la = transfer.async(dst=region(a, 0, 65536) {_TW}, src=region(X, 0, 65536) {_TW})
r = relu.async in region(a, 0, 65536) {_TW} out region(a, 0, 65536) {_TW} deps=[la]
s = transfer.async(dst=region(Y, 0, 65536) {_TW}, src=region(a, 0, 65536) {_TW}, deps=[r])
loop i in [0..1] @max_in_flight(1):
  t = transfer.async(dst=region(w, i * 8192, 8192) {_T8}, src=region(W, i * 8192, 8192) {_T8})
  u = relu.async in region(w, i * 8192, 8192) {_T8} out region(w, i * 8192, 8192) {_T8} deps=[t]
  wait(u)
endloop
c1 = transfer.async(dst=region(z, 0, 2048) {_STRIP8}, src=region(W, 16384, 2048) {_STRIP8})
c2 = transfer.async(dst=region(z, 2048, 2048) {_STRIP8}, src=region(W, 18432, 2048) {_STRIP8})
c3 = transfer.async(dst=region(z, 4096, 2048) {_STRIP8}, src=region(W, 20480, 2048) {_STRIP8})
ld = transfer.async(dst=region(b, 0, 65536) {_TW}, src=region(Y, 0, 65536) {_TW}, deps=[s])
wait(ld, c1, c2, c3)
"""
"""A layer's store `s` whose bytes a far load `ld` reads (the next
block's input rows: Inception v1's stores into a concatenation, held
across the layers of the block), with a loop (a layer's tile loop) and
small copies live with it before `ld`: the tokens reach the limit only
after the loop, by when `s` has ended by the static estimate."""


def test_a_store_left_whole_is_waited_for_where_it_is_done(monkeypatch):
    """At 5 live tokens, `s` held to `ld` across `c1`-`c3` had no token to
    split: one DMA moved its 64 KiB.  Waited for right after the loop
    (every task issued after it starts after `s` ends by the estimate),
    and dropped from `ld`'s deps, `s`'s token dies there: it takes 2
    slices (the loop's copy takes 2 too), and `ld` 2.  The same bits as without the rule and as the
    program before the pass under random schedules, race-free
    (`nem-verify`), fewer cycles, within the limit, and a second run
    changes nothing."""
    out = _split(DONE, max_tokens=5)
    assert "s_2 = " in out and "wait(s_1, s_2)" in out.split("endloop")[1]
    assert "deps=[s" not in out.split("endloop")[1] and "ld_2 = " in out
    monkeypatch.setattr(split_transfers, "retire_done", lambda *args: False)
    held = _split(DONE, max_tokens=5)
    monkeypatch.undo()
    assert "s_1 = " not in held and "deps=[s])" in held
    _exact_and_faster(out, held, 5, 0.95)
    assert np.array_equal(_run(DONE)[0], _run(out)[0])


ONCE_12K = """device "npm_pro_x1.nem"

program once:

buffer W : DDR (size=12288, align=64)
buffer w : L1[0] (size=12288, align=64)
buffer o : L1[0] (size=12288, align=64)

ld = transfer.async(dst=region(w, 0, 12288) elem=f32, shape=[1, 1, 192, 16], layout=NHWC, src=region(W, 0, 12288) elem=f32, shape=[1, 1, 192, 16], layout=NHWC)
r = relu.async in region(w, 0, 12288) elem=f32, shape=[192, 16], layout=MN out region(o, 0, 12288) elem=f32, shape=[192, 16], layout=MN deps=[ld]
wait(r)
"""


def test_a_transfer_made_once_is_one_of_few_runs():
    """Made once, in no loop, a transfer is one of few runs: it splits from
    `min-few` (8 KiB) like the copies of a loop of at most `few-runs` runs,
    not from `min-single` (16 KiB) alone (session 49: Inception v1's 12 KiB
    weight slices of its 1x1 branches ran whole on one DMA of four; n16
    1,170 -> 650 cycles).  With `few-runs=1` it stays whole, as before."""
    split = _split(ONCE_12K)
    assert "ld_3 = transfer.async" in split and "ld_4" not in split  # 3 slices of 4 KiB
    assert "deps=[ld_1, ld_2, ld_3]" in split
    assert "ld_1" not in _split(ONCE_12K, few_runs=1)


_BIG = "elem=f32, shape=[1, 4, 14, 128], layout=NHWC"
_SMALL = "elem=f32, shape=[1, 1, 24, 128], layout=NHWC"
SHARED = f"""device "npm_pro_x1.nem"

{_buffers("X DDR 28672", "V DDR 12288", "b L1[0] 28672", "s L1[1] 12288", "o L1[0] 28672", "p L1[1] 12288")}
ls = transfer.async(dst=region(s, 0, 12288) {_SMALL}, src=region(V, 0, 12288) {_SMALL})
lb = transfer.async(dst=region(b, 0, 28672) {_BIG}, src=region(X, 0, 28672) {_BIG})
rb = relu.async in region(b, 0, 28672) elem=f32, shape=[56, 128], layout=MN out region(o, 0, 28672) elem=f32, shape=[56, 128], layout=MN deps=[lb]
rs = relu.async in region(s, 0, 12288) elem=f32, shape=[24, 128], layout=MN out region(p, 0, 12288) elem=f32, shape=[24, 128], layout=MN deps=[ls]
wait(rb, rs)
"""
"""A 28 KiB copy made once, which splits from `min-single`, live beside a
12 KiB one, which splits only as one of few runs (`min-few`)."""


def test_a_copy_split_only_as_one_of_few_runs_takes_the_tokens_left(monkeypatch):
    """Shared alike, the 12 KiB copy took two tokens and left the 28 KiB one
    3 slices of 4 (DenseNet-121's 3x3 128 -> 32 convolution at 14x14: its
    last part's 14 KB layout copies split, its third part's 28 KB input
    copy in 3 slices, 4,187 -> 4,806 cycles; session 49).  Now the copies
    the made-once rule alone splits get the tokens the others leave."""
    out = _split(SHARED, max_tokens=6)
    assert "lb_4 = transfer.async" in out and "ls_1" not in out
    (prog,) = programs(parse_nem(out, str(LIT)))
    assert max_live_tokens(prog) <= 6
    assert "ls_3 = transfer.async" in _split(SHARED)  # with tokens to spare, both split
    monkeypatch.setattr(split_transfers.Choice, "_once_only", lambda self, found, runs: frozenset())
    alike = _split(SHARED, max_tokens=6)
    assert "lb_4" not in alike and "ls_2 = transfer.async" in alike


PARTS = (
    """device "npm_pro_x1.nem"

program parts:

buffer W : DDR (size=65536, align=64)
buffer X : DDR (size=131072, align=64)
buffer Y : DDR (size=524288, align=64)
"""
    + "".join(
        f"buffer w{e} : L1[{e}] (size=65536, align=64)\n"
        f"buffer x{e} : L1[{e}] (size=65536, align=64)\n"
        f"buffer y{e} : L1[{e}] (size=65536, align=64)\n"
        for e in range(4)
    )
    + "".join(
        f"cw{e} = transfer.async(dst=region(w{e}, 0, 65536) elem=f32, shape=[8, 16, 128], layout=HWC, "
        "src=region(W, 0, 65536) elem=f32, shape=[8, 16, 128], layout=HWC)\n"
        for e in range(4)
    )
    + "loop i in [0..3] @max_in_flight(2):\n"
    + "".join(
        f"  ld{e} = transfer.async(dst=region(x{e}, (i mod 2) * 32768, 32768) elem=f32, "
        "shape=[4, 16, 128], layout=HWC, src=region(X, i * 32768, 32768) elem=f32, "
        "shape=[4, 16, 128], layout=HWC)\n"
        f"  r{e} = add.async in region(x{e}, (i mod 2) * 32768, 32768) elem=f32, shape=[4, 16, 128], "
        f"layout=HWC, region(w{e}, 0, 32768) elem=f32, shape=[4, 16, 128], layout=HWC "
        f"out region(y{e}, (i mod 2) * 32768, 32768) elem=f32, shape=[4, 16, 128], layout=HWC "
        f"deps=[ld{e}, cw{e}]\n"
        f"  s{e} = transfer.async(dst=region(Y, i * 131072 + {e} * 32768, 32768) elem=f32, "
        f"shape=[4, 16, 128], layout=HWC, src=region(y{e}, (i mod 2) * 32768, 32768) elem=f32, "
        f"shape=[4, 16, 128], layout=HWC, deps=[r{e}])\n"
        for e in range(4)
    )
    + "  wait(s0, s1, s2, s3)\nendloop\n"
)


def test_engine_parts_weight_copies_share_the_tokens_left():
    """Four engine parts, each staging its 64 KiB weights once before the
    jammed tile loop that reads them (an Inception v2 1x1 layer, whose
    per-channel broadcasts hoisted beside them are live across the loop
    too).  The loop's two iterations in flight hold 10 tokens and the
    weights 4: 18 tokens leave 4 slices' worth, and each weight copy takes
    2 slices (given in bytes order, the first took 4, the second 2 and the
    last two stayed whole: one DMA for 64 KiB, their engines' tiles waiting).
    Held (`retire-below` under their bytes); by default (session 56) waited
    for before the loop, 4 slices each, and the loop's loads split."""
    (prog,) = programs(parse_nem(PARTS, str(LIT)))
    assert max_live_tokens(prog) == 14
    out = _split(PARTS, max_tokens=18, min_moved=1 << 30, min_once=1 << 16, retire_below=1 << 16)
    for e in range(4):
        assert f"deps=[ld{e}, cw{e}_1, cw{e}_2]" in out
    (prog,) = programs(parse_nem(out, str(LIT)))
    assert max_live_tokens(prog) == 18
    out = _split(PARTS, max_tokens=18, min_moved=1 << 30, min_once=1 << 16)
    weights = ", ".join(f"cw{e}_{k}" for e in range(4) for k in range(1, 5))
    assert f"wait({weights})\n\nloop i" in out
    assert all(f"deps=[ld{e}_1, ld{e}_2" in out for e in range(4))


ACROSS = (
    PADDED.replace(
        f"cw = transfer.async(dst=region(w, 0, 65536) {_ROWS}, src=region(W, 0, 65536) {_ROWS})\n",
        "",
    )
    .replace(
        "la = ",
        f"cw = transfer.async(dst=region(w, 0, 65536) {_ROWS}, src=region(W, 0, 65536) {_ROWS})\nla = ",
        1,
    )
    .replace(
        f"src=region(X, 0, 65536) {_ROWS}, deps=[f1, f2])\nsa",
        f"src=region(X, 0, 65536) {_ROWS}, deps=[la])\nsa",
        1,
    )
)
"""`PADDED` with the weight copy `cw` issued before the first load and the
second load after the first: the strips' one consumer, `la`, comes after
`cw`, so their tokens are live across its issue (Inception v2's n51: 16
border strips consumed by the wait before its tile loop, engine 3's 221 KB
of weights issued before it and left whole, session 58)."""


def test_strips_first_consumed_after_a_copy_left_short_are_waited_for_before_it():
    """At 5 tokens `cw` takes 2 slices of 4 and `la` stays whole (the
    strips, `cw`'s slices and `la` live at `la`): no rule before session 58
    retired the strips, consumed once and first after `cw`.  Waited for
    right before `cw`, and dropped from `la`'s deps, they leave `cw` and
    `la` 2 slices each.  The same bits
    under random schedules, race-free, fewer cycles, within the limit, and
    a second run changes nothing."""
    _retired(ACROSS, 5, "la, cw_1, cw_2", "wait(f1, f2)\ncw_1 = ", "la_1, la_2, cw_1, cw_2", 0.8)
