"""The critical path of a timed run by group (D-RT-ROOFLINE, session 42):
each group's `critical` cycles are those of one longest chain of the
schedule spent in its tasks, the chain following what each task's start
waited for (a dependency, its unit, a `wait`, a loop's window), so the
groups' shares add up to the program's cycles; a group that runs beside a
longer one has none; a group's share never exceeds its busy cycles."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nem.cli.nem_run import run
from nem.runtime import NemInterpreter, Session, critical_path
from nem.runtime.roofline import Report

REPO = Path(__file__).resolve().parents[2]
CONV = REPO / "examples" / "conv2d_relu.nem"

HEAD = """include "npm_pro_x1.nem"
device npm_pro_x1

program main:

buffer D : DDR (size=1048576, align=64)
buffer S : L1[0] (size=262144, align=64)
"""


def _copy(name: str, offset: int, size: int, deps: str = "") -> str:
    """A transfer of `size` bytes from DDR into engine 0's L1 at `offset`."""
    n = size // 4
    return (
        f"{name} = transfer.async(dst=region(S, {offset}, {size}) elem=f32, shape=[{n}], "
        f"layout=C, src=region(D, {offset}, {size}) elem=f32, shape=[{n}], layout=C{deps})\n"
    )


def _session(tmp_path: Path, text: str) -> Session:
    """A timed session of the program `text`, started."""
    path = tmp_path / "p.nem"
    path.write_text(text)
    it = NemInterpreter(trace=False)
    it.set_mode("timed")
    it.load(path)
    return it.start()


def _report(tmp_path: Path, text: str) -> tuple[Report, int]:
    s = _session(tmp_path, text)
    result = s.run_to_end()
    assert result.status == "completed", result.error
    return s.roofline(), result.cycle_count


def _check_shares(rep: Report, cycles: int) -> None:
    assert rep.total.critical == cycles == sum(g.critical for g in rep.groups)
    for g in rep.groups:
        assert 0 <= g.critical <= g.cycles, g.name


def test_a_chain_through_a_busy_unit_covers_the_whole_run(tmp_path):
    """Five equal transfers into engine 0's L1, none waiting for another, on
    its 4 DMAs: the fifth starts when a DMA frees, so the path runs through
    the unit's previous task: two transfers, the program's cycles (without
    the unit's link the chain would stop at the fifth's start)."""
    text = HEAD + "".join(_copy(f"t{i}", i * 32768, 32768) for i in range(5))
    text += "wait(t0, t1, t2, t3, t4)\n"
    rep, cycles = _report(tmp_path, text)
    [seg] = rep.groups
    _check_shares(rep, cycles)
    assert seg.critical == cycles == seg.cycles
    one = cycles // 2
    assert cycles == 2 * one  # the fifth after one of the first four


def test_a_group_beside_a_longer_one_has_no_share(tmp_path):
    """A large transfer (its segment), then a loop of small ones issued
    beside it (the statements after the segment issue at once), then a
    wait for the large one: the path is the large transfer's alone."""
    text = HEAD + _copy("big", 0, 131072)
    text += "loop i in [0..1]:\n"
    text += "  " + _copy("small", 0, 4096).replace("region(S, 0,", "region(S, 131072 + i * 4096,")
    text += "endloop\nwait(big)\n"
    rep, cycles = _report(tmp_path, text)
    groups = {g.kind: g for g in rep.groups}
    _check_shares(rep, cycles)
    assert groups["segment"].critical == cycles
    assert groups["loop"].critical == 0 < groups["loop"].cycles
    lines = rep.to_text().splitlines()
    assert f"not on the critical path: 1 group ({groups['loop'].name})" in lines


def test_the_text_says_what_the_groups_after_the_largest_hold(tmp_path):
    """Seven copies one after another, each its own segment (a `wait` ends
    one): all on the path; the text names the 5 largest and what the other 2
    hold together, so the shares printed add up to the path (an outside
    reading: the 5 alone read as the whole path)."""
    text = HEAD
    for i in range(7):
        text += _copy(f"t{i}", i * 4096, 4096 * (i + 1) // 2 * 2) + f"wait(t{i})\n"
    rep, cycles = _report(tmp_path, text)
    _check_shares(rep, cycles)
    assert len(rep.groups) == 7 and all(g.critical for g in rep.groups)
    [line] = [x for x in rep.to_text().splitlines() if re.match(r"critical path: \d+ cycles", x)]
    shown = [int(n) for n in re.findall(r" (\d+) \(\d+%\)", line)]
    assert len(shown) == 6 and sum(shown) == cycles
    assert ", 2 more groups " in line
    assert "not on the critical path" not in rep.to_text()


def test_a_dependency_chain_across_groups_shares_the_cycles(tmp_path):
    """The whitepaper's example: the weights' load (a `.sync` segment), then
    the loop of tiles, which waits for it: both on the path, each its busy
    cycles, and the text names them with their shares."""
    it = NemInterpreter(trace=False)
    it.set_mode("timed")
    it.load(CONV)
    s = it.start()
    result = s.run_to_end()
    rep = s.roofline()
    _check_shares(rep, result.cycle_count)
    assert [(g.kind, g.critical) for g in rep.groups] == [
        ("segment", 2308),
        ("loop", 15523),
    ]
    assert (
        "critical path: 17831 cycles: loop at line 49 15523 (87%), segment at line 43 2308 (13%)"
        in (rep.to_text().splitlines())
    )


def test_the_json_gives_each_groups_critical_cycles(capsys):
    assert run([str(CONV), "--mode", "timed", "--roofline", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"]["critical"] == doc["total"]["cycles"] == 17831
    assert [g["critical"] for g in doc["groups"]] == [2308, 15523]


def test_a_compiled_models_node_groups_add_up_to_its_cycles(tmp_path):
    """A two-layer model compiled as `nem-compile -o M.nemb` writes it (a
    group per ONNX node): the groups' shares add up to the program's cycles,
    each within its busy cycles."""
    pytest.importorskip("onnx")
    pytest.importorskip("mlir.ir")
    from onnx import helper
    from roofline_models import small_model, timed_session

    model = small_model(
        "two",
        [("x", [1, 8, 16, 16])],
        [("y", [1, 8, 16, 16])],
        [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], "conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"], "act"),
        ],
        [("w", [8, 8, 3, 3]), ("b", [8])],
    )
    s, _text = timed_session(model, "two")
    rep = s.roofline()
    _check_shares(rep, rep.total.cycles)
    assert any(g.kind == "node" and g.critical for g in rep.groups)


# ---------------------------------------------------------------- link kinds
# Each stretch of the path says what its start waited for (session 43, issue
# 35 item 1): a dependency, its unit's previous task, a `wait`, a loop's
# window, or nothing (cycle 0).


def _at(name: str, offset: int, size: int, dma: int, deps: str = "") -> str:
    """`_copy` on engine 0's DMA `dma` (`@resource`)."""
    return _copy(name, offset, size, deps).rstrip("\n") + f" @resource(DMA[{dma}])\n"


def _check_path(rep: Report, cycles: int) -> list[tuple[str, str]]:
    """The segments tile `[0, cycles)` in time order, each group's
    `critical_by_kind` adds up to its `critical` and is the sum of its
    segments; returns the (group, kind) of each segment."""
    _check_shares(rep, cycles)
    path = rep.critical_path
    assert path[0].start == 0 and path[-1].end == cycles
    assert all(a.end == b.start for a, b in zip(path, path[1:]))
    assert sum(s.end - s.start for s in path) == cycles
    assert sum(rep.total.critical_by_kind.values()) == cycles
    for i, g in enumerate(rep.groups):
        assert sum(g.critical_by_kind.values()) == g.critical, g.name
        mine: dict[str, int] = {}
        for s in path:
            if s.group == i:
                assert s.name == g.name
                mine[s.entered_by] = mine.get(s.entered_by, 0) + s.end - s.start
        assert mine == g.critical_by_kind, g.name
    return [(s.name, s.entered_by) for s in path]


BIG, TINY = 65536, 256


def test_a_stretch_after_a_dependency_is_entered_by_dep(tmp_path):
    """`b` depends on `a` (another segment: it issues after `wait(s)`, a tiny
    copy's end): it starts at `a`'s end, on another DMA, so its stretch is
    entered by the dependency, `a`'s at cycle 0."""
    text = HEAD + _at("a", 0, BIG, 0) + _at("s", BIG, TINY, 1) + "wait(s)\n"
    text += _at("b", 2 * BIG, BIG, 2, ", deps=[a]") + "wait(b)\n"
    rep, cycles = _report(tmp_path, text)
    seg_a, seg_b = (g.name for g in rep.groups)
    assert _check_path(rep, cycles) == [(seg_a, "start"), (seg_b, "dep")]
    assert rep.groups[1].critical_by_kind == {"dep": cycles // 2}


def test_a_stretch_after_its_units_previous_task_is_entered_by_unit(tmp_path):
    """`b` issues after `wait(s)` with nothing to wait for but `a` holds the
    DMA both name: `b` starts when `a` frees it, entered by its unit."""
    text = HEAD + _at("a", 0, BIG, 0) + _at("s", BIG, TINY, 1) + "wait(s)\n"
    text += _at("b", 2 * BIG, BIG, 0) + "wait(a, b)\n"
    rep, cycles = _report(tmp_path, text)
    seg_a, seg_b = (g.name for g in rep.groups)
    assert _check_path(rep, cycles) == [(seg_a, "start"), (seg_b, "unit")]
    assert rep.total.critical_by_kind == {"start": cycles // 2, "unit": cycles // 2}
    half = cycles // 2
    assert f"entered by: unit {half} (50%), start {half} (50%)\n" in rep.to_text()
    # which group held the unit (an outside review, session 53: `entered by:
    # unit` named no one)
    assert critical_path.queued(rep.critical_path) == [(seg_b, seg_a, half)]
    assert f"queued on a unit: {seg_b} after {seg_a} {half}\n" in rep.to_text()


def test_a_path_without_unit_waits_names_no_queue(tmp_path):
    """A stretch entered by a dependency queued behind no one: no line."""
    text = HEAD + _at("a", 0, BIG, 0) + _at("s", BIG, TINY, 1) + "wait(s)\n"
    text += _at("b", 2 * BIG, BIG, 2, ", deps=[a]") + "wait(b)\n"
    rep, _ = _report(tmp_path, text)
    assert critical_path.queued(rep.critical_path) == []
    assert "queued on a unit" not in rep.to_text()


def test_a_stretch_after_a_wait_is_entered_by_wait(tmp_path):
    """`b` issues when `wait(a)` returns: its stretch is entered by the wait."""
    text = HEAD + _at("a", 0, BIG, 0) + "wait(a)\n" + _at("b", BIG, BIG, 1) + "wait(b)\n"
    rep, cycles = _report(tmp_path, text)
    seg_a, seg_b = (g.name for g in rep.groups)
    assert _check_path(rep, cycles) == [(seg_a, "start"), (seg_b, "wait")]


def test_a_loops_window_enters_its_next_iteration_and_what_follows(tmp_path):
    """One iteration in flight: each later iteration opens when the one
    before completes, so its copy starts after the window (the scheduler
    hands the tally `window` for it; on the path the loop is one stretch, a
    group's consecutive tasks merged); the copy after the loop starts when
    the last iteration ended: entered by `loop-end`, on the path too."""
    text = HEAD + "loop i in [0..2] @max_in_flight(1):\n"
    text += "  " + _at("t", 0, BIG, 0).replace("region(S, 0,", "region(S, i * 65536,")
    text += "  wait(t)\nendloop\n" + _at("b", 3 * BIG, BIG, 1) + "wait(b)\n"
    s = _session(tmp_path, text)
    tally = s.sched.roofline
    kinds = []
    add = tally.add
    tally.add = lambda tpl, *a: (kinds.append((tpl.label, a[-1])), add(tpl, *a))[1]
    result = s.run_to_end()
    assert kinds == [("t", "start"), ("t", "window"), ("t", "window"), ("b", "loop-end")]
    rep = s.roofline()
    loop, seg = (g.name for g in rep.groups)
    assert _check_path(rep, result.cycle_count) == [(loop, "start"), (seg, "loop-end")]


def test_the_json_has_the_path_and_each_groups_kinds(capsys):
    """The whitepaper's example: the weights' `.sync` load from cycle 0, then
    the loop, which issues when that returns."""
    assert run([str(CONV), "--mode", "timed", "--roofline", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["critical_path"] == [
        {"group": 0, "name": "segment at line 43", "start": 0, "end": 2308, "entered_by": "start"},
        {"group": 1, "name": "loop at line 49", "start": 2308, "end": 17831, "entered_by": "wait"},
    ]
    assert [g["critical_by_kind"] for g in doc["groups"]] == [{"start": 2308}, {"wait": 15523}]
    assert doc["total"]["critical_by_kind"] == {"start": 2308, "wait": 15523}


def test_a_group_off_the_path_has_no_kinds(tmp_path):
    text = HEAD + _copy("big", 0, 131072)
    text += "loop i in [0..1]:\n"
    text += "  " + _copy("small", 0, 4096).replace("region(S, 0,", "region(S, 131072 + i * 4096,")
    text += "endloop\nwait(big)\n"
    rep, cycles = _report(tmp_path, text)
    _check_path(rep, cycles)
    off = [g for g in rep.to_json()["groups"] if not g["critical"]]  # type: ignore[union-attr]
    assert len(off) == 1 and "critical_by_kind" not in off[0]


def test_the_trace_has_a_critical_path_track(tmp_path):
    """`--trace`: the Chrome JSON's `critical path` process has one slice per
    segment, named by its group, at its cycles (1 cycle = 1 ns); the CSV a
    `critical-path` row per segment."""
    it = NemInterpreter(trace=True)
    it.set_mode("timed")
    it.load(CONV)
    s = it.start()
    s.run_to_end()
    s.export_trace(str(tmp_path / "t.json"))
    s.export_trace(str(tmp_path / "t.csv"))
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    [pid] = [
        e["pid"]
        for e in events
        if e["name"] == "process_name" and e["args"]["name"] == "critical path"
    ]
    assert [
        e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == pid
    ] == ["critical path"]
    slices = [
        (e["name"], e["ts"], e["dur"], e["args"]["entered_by"])
        for e in events
        if e["ph"] == "X" and e["pid"] == pid
    ]
    assert slices == [
        ("segment at line 43", 0, 2.308, "start"),
        ("loop at line 49", 2.308, 15.523, "wait"),
    ]
    rows = [r.split(",") for r in (tmp_path / "t.csv").read_text().splitlines()]
    assert [(r[1], r[2], r[7], r[8]) for r in rows if r[6] == "critical-path"] == [
        ("segment at line 43", "start", "0", "2308"),
        ("loop at line 49", "wait", "2308", "17831"),
    ]
    assert len([r for r in rows[1:] if r[6] != "critical-path"]) == 17  # the tasks, as before


def test_a_functional_trace_has_no_path(tmp_path):
    it = NemInterpreter(trace=True)
    it.load(CONV)
    s = it.start()
    s.run_to_end()
    assert s.critical_path() == []
    s.export_trace(str(tmp_path / "t.json"))
    assert "critical path" not in (tmp_path / "t.json").read_text()


def test_the_timeline_draws_a_critical_path_row(tmp_path, monkeypatch):
    """`--timeline`: a last row `critical path`, its segments black and
    white alternating, each named with what entered it where that fits, the
    legend beside the rows (not over the bars)."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    charts = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: (charts.append(fig), close(fig)))
    out = tmp_path / "t.png"
    assert run([str(CONV), "--mode", "timed", "--timeline", str(out)]) == 0
    (fig,) = charts
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[-1] == "critical path" and len(labels) == 6  # 5 units and the path
    spans = sorted(tuple(p.get_extents().x0 for p in a.get_paths()) for a in ax.collections[-2:])
    assert len(spans) == 2
    # the loop's stretch (87% of the path) fits its name and kind; the weights'
    # load (13%, ~90 px once the legend stands beside the rows) not its name
    assert [t.get_text() for t in ax.texts] == ["loop at line 49 <- wait"]
    assert ax.get_legend().get_bbox_to_anchor().x0 >= ax.get_window_extent().x1 - 1
    assert out.stat().st_size > 0


def test_the_roofline_plot_hatches_each_groups_share_of_the_path(tmp_path):
    """`--roofline-plot`: over each group's busy bar its `critical` cycles,
    hatched from 0, once in the legend; a group off the path (a small loop
    beside a larger transfer) has no hatch."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from nem.runtime.roofline_plot import bar_chart

    text = HEAD + _copy("big", 0, 131072)
    text += "loop i in [0..1]:\n"
    text += "  " + _copy("small", 0, 4096).replace("region(S, 0,", "region(S, 131072 + i * 4096,")
    text += "endloop\nwait(big)\n"
    rep, cycles = _report(tmp_path, text)
    fig = bar_chart(rep)
    try:
        [ax] = fig.axes
        hatched = [
            (round(p.get_y() + p.get_height() / 2), p.get_width())
            for p in ax.patches
            if p.get_hatch()
        ]
        on_path = [(y, g.critical) for y, g in enumerate(rep.groups) if g.critical]
        assert hatched == on_path == [(0, cycles)]
        assert rep.groups[1].critical == 0 < rep.groups[1].cycles
        entries = [t.get_text() for t in ax.get_legend().get_texts()]
        assert entries.count("on the critical path") == 1
    finally:
        plt.close(fig)
