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
from nem.runtime import NemInterpreter
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


def _report(tmp_path: Path, text: str) -> tuple[Report, int]:
    path = tmp_path / "p.nem"
    path.write_text(text)
    it = NemInterpreter(trace=False)
    it.set_mode("timed")
    it.load(path)
    s = it.start()
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
