"""The shared bound of a roofline group: all the work run in its busy cycles,
its own and concurrent groups' (D-RT-ROOFLINE, session 56)."""

from __future__ import annotations

import pytest

from nem.runtime.api import NemInterpreter
from nem.runtime.roofline import shown
from nem.runtime.roofline_shared import Beside, Runs, Spread


def test_the_work_in_an_interval_spreads_each_task_evenly():
    """By hand: a task of 10 work over [0, 10), one of 20 over [5, 15), one
    of 4 at cycle 12 with no duration."""
    runs = [(0, 10, 10.0, 0), (5, 15, 20.0, 1), (12, 12, 4.0, 2)]
    spread = Spread(runs)
    assert spread.within([0], [10]) == pytest.approx(10 + 10)
    assert spread.within([5, 12], [10, 15]) == pytest.approx((5 + 10) + (6 + 4))
    assert spread.within([10], [12]) == pytest.approx(4)  # the instant task not yet
    assert spread.within([0], [100]) == pytest.approx(34)
    assert spread.within([20], [30]) == 0


def test_the_groups_beside_a_group_are_those_whose_work_shared_its_cycles():
    """Group 0 is busy [0, 10) and [20, 30); group 1's DMA task [5, 25) puts
    half its work in them, group 2's [40, 50) none; a long NMU task started
    well before is found too; each kind apart (ranked by the kind of the
    row's shared bound: an outside review, NMU work ranked a DMA-bound
    row's neighbours)."""
    runs = Runs()
    runs.add("DMA", 0, 10, 10.0, 0)
    runs.add("DMA", 20, 30, 10.0, 0)
    runs.add("DMA", 5, 25, 40.0, 1)
    runs.add("NMU", 40, 50, 8.0, 2)
    runs.add("NMU", -100, 1, 101.0, 3)
    near = Beside(runs)
    assert near.of("DMA", 0, [0, 20], [10, 30]) == pytest.approx({1: 20.0})
    assert near.of("NMU", 0, [0, 20], [10, 30]) == pytest.approx({3: 1.0})
    runs.add("DMA", 22, 22, 3.0, 4)  # no duration: whole where it starts in an interval
    runs.add("DMA", 15, 15, 3.0, 5)
    assert list(Beside(runs).of("DMA", 0, [0, 20], [10, 30]).items()) == [(1, 20.0), (4, 3.0)]


CONCURRENT = """device "npm_lite.nem"
program side:
buffer A : L2 (size=8192, align=64)
buffer B : L1 (size=8192, align=64)
t1 = transfer.async(dst=region(B, 0, 4096), src=region(A, 0, 4096))
loop i in [0..1]:
  t2 = transfer.sync(dst=region(B, 4096 + i * 1024, 1024), src=region(A, 4096 + i * 1024, 1024))
endloop
wait(t1)
"""


def test_a_loop_beside_a_transfer_shares_its_cycles(tmp_path):
    """npm_lite's 2 DMAs, D-RT-COST's 32 B/cycle and 4 cycles a transfer:
    `t1` (the segment) runs [0, 132) on one DMA while the loop's two 1 KiB
    copies run [0, 36) and [36, 72) on the other.  The loop's own bound is
    its 2,048 B: 64 cycles of one DMA over 2; in its 72 busy cycles `t1`
    moved 72/132 of its 128 cycles' work too: (64 + 128 x 72 / 132) / 2.
    The segment's cycles hold all of both: (128 + 64) / 2.  The program's
    shared bound is its bound."""
    p = tmp_path / "side.nem"
    p.write_text(CONCURRENT)
    it = NemInterpreter(trace=False)
    it.set_mode("timed")
    it.load(str(p))
    s = it.start()
    assert s.run_to_end().status == "completed"
    rep = s.roofline()
    seg, loop = rep.groups
    assert (seg.name, seg.cycles, loop.name, loop.cycles) == (
        "segment at line 5",
        132,
        "loop at line 6",
        72,
    )
    assert loop.bound == 32.0 and loop.shared_bound == pytest.approx((64 + 128 * 72 / 132) / 2)
    assert seg.bound == 64.0 and seg.shared_bound == pytest.approx((128 + 64) / 2)
    assert rep.total.shared_bound == rep.total.bound
    assert rep.to_json()["groups"][1]["shared_ratio"] == round(72 / loop.shared_bound, 4)
    # no ONNX node in a .nem text program: the line counts its loops and segments
    text = rep.to_text().splitlines()
    at = text.index(
        "over 2x of their bound: 2 group(s), 2 of them within 2x of all the work run in "
        "their cycles:"
    )
    assert text[at + 1 : at + 4] == [
        "  segment at line 5 2.06 -> 1.38 beside loop at line 6",
        "  loop at line 6 2.25 -> 1.08 beside segment at line 5",
        "groups: loops and segments; no task names an ONNX node (a model compiled",
    ]


def test_a_fire_modules_expand_layers_share_their_cycles():
    """SqueezeNet's fire module in small: both expand convolutions read the
    squeeze's output and run at the same time on the same engines' DMAs.
    Each takes over twice its own bound, the other's transfers in its
    cycles; against all the work run in them each is within 2x, and the
    text names the other beside it (the squeeze, alone, stays over)."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("mlir.ir")
    from roofline_models import small_model, timed_session

    helper = onnx.helper
    model = small_model(
        "fire",
        [("x", [1, 32, 13, 13])],
        [("y", [1, 128, 13, 13])],
        [
            helper.make_node("Conv", ["x", "S"], ["s"], name="squeeze"),
            helper.make_node("Relu", ["s"], ["r"], name="squeeze_relu"),
            helper.make_node("Conv", ["r", "E1"], ["e1"], name="expand1x1"),
            helper.make_node("Conv", ["r", "E3"], ["e3"], name="expand3x3", pads=[1, 1, 1, 1]),
            helper.make_node("Concat", ["e1", "e3"], ["y"], name="cat", axis=1),
        ],
        [("S", (16, 32, 1, 1)), ("E1", (64, 16, 1, 1)), ("E3", (64, 16, 3, 3))],
    )
    rep = timed_session(model, "fire")[0].roofline()
    rows = {r.name: r for r in rep.groups}
    e1, e3 = rows["node 'expand1x1' (Conv)"], rows["node 'expand3x3' (Conv)"]
    squeeze = rows["node 'squeeze' (Conv)"]
    for r, other in ((e1, e3), (e3, e1)):
        assert r.ratio > 2 >= r.shared_ratio and other.name in r.beside
    assert squeeze.shared_bound == squeeze.bound and squeeze.ratio > 2 and squeeze.beside == []
    text = rep.to_text().splitlines()
    at = text.index(
        "over 2x of their bound: 3 node group(s), 2 of them within 2x of all the work run in "
        "their cycles:"
    )
    own, shared = shown(e1.cycles, e1.bound)[1], shown(e1.cycles, e1.shared_bound)[1]
    assert text[at + 1] == f"  {e1.name} {own} -> {shared} beside {e3.name}"
    sq = shown(squeeze.cycles, squeeze.bound)[1]
    assert text[at + 3] == f"  over 2x of both (their units idle): {squeeze.name} {sq} / {sq}"
    # a program reaching fewer units (`--engines 1`): the line says whose units divide
    rep.usable_units = {u: max(1, n // 4) for u, n in rep.units.items()}
    fewer = rep.to_text().splitlines()
    assert fewer[at].endswith("(the device's units: see u-ratio):")
    assert fewer[at + 3].startswith("  over 2x of both (the device's units): ")
    rep.usable_units = dict(rep.units)
    json_rows = {r["name"]: r for r in rep.to_json()["groups"]}
    assert json_rows[squeeze.name]["beside"] == []  # over 2x, nothing beside it
    assert json_rows["layout of 'y'"]["beside"] is None  # not over 2x: not asked
