"""The roofline report of a timed run (issue 35 item 1, D-RT-ROOFLINE): the
bound recomputed by hand from D-RT-COST, task grouping (ONNX node, loop
nest, top-level segment), the binding kind, and `nem-run --roofline`'s text,
JSON, plot and usage errors; what its text says, from an outside engineer's
reading (session 22): the ratio shown is the cycles over the bound shown,
the text names the roof, and a program that can use fewer units than the
device has gets its own bound beside the device's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nem.cli.nem_run import run
from nem.dialect.semantics.cost import Work
from nem.runtime import NemInterpreter
from nem.runtime.roofline import LATENCY, Report, cut, labels, row
from nem.runtime.roofline_tally import Group, Rate

REPO = Path(__file__).resolve().parents[2]
CONV = REPO / "examples" / "conv2d_relu.nem"


def _timed(path, profile=None):
    it = NemInterpreter(trace=False)
    it.set_mode("timed")
    if profile:
        it.set_timing_profile(profile)
    it.load(path)
    s = it.start()
    result = s.run_to_end()
    assert result.status == "completed", result.error
    return s.roofline(), result


def test_conv_layer_bound_recomputed_by_hand():
    """examples/conv2d_relu.nem on npm_lite (1 engine: 1 NMU, 2 CSTL, 2 DMA):
    4 tiles of a 3x3 conv, 64 -> 128 channels, 14x14 outputs, i8.  By hand
    from D-RT-COST: NMU MACs = |Y| x Kh x Kw x Cin at npm_lite's int8_macs
    (4096/cycle); transfers at 32 B/cycle; relu at 256 elements/cycle on CSTL,
    the store (a CSTL task) at the DMA's 32 B/cycle."""
    rep, result = _timed(CONV)
    [loop] = [g for g in rep.groups if g.kind == "loop"]
    y, k = 14 * 14 * 128, 3 * 3 * 64
    nmu = 4 * y * k / 4096 / 1  # 14112.0
    dma = 4 * (16 * 16 * 64) / 32 / 2  # the 4 input tiles: 1024.0
    cstl = (4 * y / 256 + 4 * y / 32) / 2  # relu + store: 1764.0
    assert loop.units["NMU"].bound == nmu == 14112
    assert loop.units["DMA"].bound == dma
    assert loop.units["CSTL"].bound == cstl
    assert loop.bound == max(nmu, dma, cstl) and loop.roof == "NMU"
    # the program adds the weights' transfer (73728 bytes) before the loop
    assert rep.total.units["DMA"].bound == dma + 73728 / 32 / 2
    assert rep.total.bound == nmu
    assert rep.total.cycles == result.cycle_count
    assert rep.total.ratio == pytest.approx(result.cycle_count / nmu)
    # the conv tiles run back to back on the one NMU: each ceil(MACs/4096) + 2 cycles
    assert loop.units["NMU"].busy == 4 * (y * k // 4096 + 2)


STRIDED = """include "npm_pro_x1.nem"
device npm_pro_x1

program main:

buffer D : DDR (size=602112, align=64)
buffer S : L1[0] (size=37632, align=64)
scatter = transfer.async(dst=region(D, 0, 601392) elem=f32, shape=[1, 14, 56, 12], strides=[150528, 10752, 192, 1], src=region(S, 0, 37632) elem=f32, shape=[1, 14, 56, 12], layout=NHWC)
wait(scatter)
gather = transfer.async(dst=region(S, 0, 37632) elem=f32, shape=[1, 14, 56, 12], layout=NHWC, src=region(D, 0, 601392) elem=f32, shape=[1, 14, 56, 12], strides=[150528, 10752, 192, 1])
wait(gather)
"""


def test_a_strided_transfer_costs_the_bytes_it_moves(tmp_path):
    """D-RT-COST charges a transfer the bytes it moves, a strided box its
    elements' (37,632 bytes here), not the 601,392-byte span they lie in:
    the timed mode charged the destination's extent, so writing the box cost
    16x reading it back (an outsider's hand check of the roofline, session
    17, found it)."""
    path = tmp_path / "strided.nem"
    path.write_text(STRIDED)
    rep, result = _timed(path)
    moved = 14 * 56 * 12 * 4
    per_transfer = -(-moved // 32) + 4  # ceil(bytes / 32) + the DMA's latency
    assert result.cycle_count == 2 * per_transfer == 2360
    assert rep.total.units["DMA"].bound == 2 * moved / 32 / 16


def test_bound_follows_the_timed_models_profile():
    """One home for the throughputs: a --profile override moves the bound."""
    base, _ = _timed(CONV)
    fast, _ = _timed(CONV, {"DMA": {"bandwidth": 64, "latency": 4}})
    assert fast.total.units["DMA"].bound == base.total.units["DMA"].bound / 2


def test_the_header_says_when_a_profile_sets_the_throughputs(tmp_path, capsys):
    """The header named D-RT-COST for bounds a `--profile` had halved (an
    outside review, session 25); it now says the profile overrides them."""
    header = "roofline (D-RT-ROOFLINE; throughputs D-RT-COST"
    assert run([str(CONV), "--timed", "--roofline"]) == 0
    assert f"{header}): conv2d_relu" in capsys.readouterr().out
    prof = tmp_path / "fast.json"
    prof.write_text(json.dumps({"DMA": {"bandwidth": 64, "latency": 4}}))
    assert run([str(CONV), "--timed", "--roofline", "--profile", str(prof)]) == 0
    out = capsys.readouterr().out
    assert f"{header}, as the timing profile overrides them): conv2d_relu" in out


def _with_node_locations(tmp_path) -> Path:
    """The example as NEM IR whose conv and relu are located at ONNX nodes
    (D-COMPILE-LOC's form, as a lowering of a located module gives them)."""
    from nem.cli.nem_opt import main as nem_opt

    plain = tmp_path / "conv.mlir"
    nem_opt([str(CONV), "-t", "mlir", "--print-debuginfo", "-o", str(plain)])
    text = plain.read_text()
    for op, loc in (
        ('"nem.conv2d"', '"conv1"("Conv"("m.onnx":1:1))'),
        ('"nem.relu"', '"act"("Relu"("m.onnx":2:1))'),
    ):
        text, n = re.subn(
            r'(%s.*) loc\("[^"]*":\d+:\d+\)$' % re.escape(op),
            r"\1 loc(%s)" % loc,
            text,
            count=1,
            flags=re.M,
        )
        assert n == 1
    out = tmp_path / "conv_loc.mlir"
    out.write_text(text)
    return out


def test_tasks_group_by_onnx_node_then_loop_then_segment(tmp_path):
    rep, _ = _timed(_with_node_locations(tmp_path))
    groups = {g.name: g for g in rep.groups}
    assert list(groups) == [
        "segment at line 43",
        "loop at line 49",
        "node 'conv1' (Conv)",
        "node 'act' (Relu)",
    ]
    assert [g.kind for g in groups.values()] == ["segment", "loop", "node", "node"]
    assert groups["node 'conv1' (Conv)"].tasks == 4
    assert list(groups["node 'conv1' (Conv)"].units) == ["NMU"]
    assert groups["loop at line 49"].tasks == 4  # tX of 4 iterations
    # tS stores act's output, all its inputs from act's tasks: act's work
    assert groups["node 'act' (Relu)"].tasks == 8
    assert sum(g.tasks for g in rep.groups) == rep.total.tasks == 17
    assert groups["node 'conv1' (Conv)"].binds == "NMU"


FLAT = """device "npm_lite.nem"
program flat:
buffer A : L2 (size=2048, align=64)
buffer B : L1 (size=2048, align=64)
t1 = transfer.async(dst=region(B, 0, 512), src=region(A, 0, 512))
t2 = transfer.sync(dst=region(B, 512, 512), src=region(A, 512, 512), deps=[t1])
t3 = transfer.async(dst=region(A, 1024, 512), src=region(B, 0, 512))
wait(t3)
t4 = transfer.async(dst=region(A, 1536, 512), src=region(B, 512, 512))
loop i in [0..1]:
  t5 = transfer.sync(dst=region(B, 1024 + i * 256, 256), src=region(A, i * 256, 256))
endloop
t6 = transfer.sync(dst=region(B, 1536, 512), src=region(A, 1024, 512), deps=[t4])
"""


def test_top_level_segments_end_at_sync_tasks_waits_and_loops(tmp_path):
    p = tmp_path / "flat.nem"
    p.write_text(FLAT)
    rep, _ = _timed(p)
    assert [(g.name, g.tasks) for g in rep.groups] == [
        ("segment at line 5", 2),
        ("segment at line 7", 1),
        ("segment at line 9", 1),
        ("loop at line 10", 2),
        ("segment at line 13", 1),
    ]


def _group(**busy_and_work) -> Group:
    g = Group("g", "segment", 1)
    for utype, (amount, rate, start, end) in busy_and_work.items():
        g.add(utype, Work(amount, rate, 0), start, end)
    return g


def test_binding_kind_is_the_busiest_unless_all_idle_half_the_time():
    units = {"DMA": 2, "NMU": 1}
    busy = row(_group(DMA=(640, 32, 0, 20), NMU=(4096, 1024, 0, 90)), units, 100)
    # the DMA's work makes the bound (640 B / 32 / 2 units); the NMU is the busy one
    assert (busy.binds, busy.roof, busy.bound) == ("NMU", "DMA", 10.0)
    assert busy.units["NMU"].utilization == 0.9
    idle = row(_group(DMA=(640, 32, 0, 20), NMU=(4096, 1024, 0, 40)), units, 100)
    assert idle.binds == LATENCY and idle.ratio == 10.0
    empty = row(Group("e", "segment", 1), units, 0)
    assert empty.ratio is None and empty.binds == LATENCY


def test_cli_text_report(capsys):
    assert run([str(CONV), "--mode", "timed", "--roofline"]) == 0
    out = capsys.readouterr().out
    assert "total cycles:" in out  # the summary is still there
    table = out[out.index("roofline (D-RT-ROOFLINE") :].splitlines()
    assert table[1].split()[:7] == ["group", "tasks", "cycles", "bound", "ratio", "roof", "binds"]
    program = table[2].split()
    assert program[:6] == ["program", "17", program[2], "14112", program[4], "NMU"]
    assert float(program[4]) == pytest.approx(int(program[2]) / 14112, abs=0.005)


def test_the_throughputs_each_kind_was_priced_at():
    """The report lists D-RT-COST's throughputs as the run priced its tasks
    (an outside review, session 52: its header named D-RT-COST but listed
    none): per kind, and where a kind ran work of several rates, each with
    its share of that kind's work cycles; a transfer or store moves bytes
    whatever unit runs it (the whitepaper's conv example stores its tiles on
    a CSTL at the DMA's 32 bytes a cycle)."""
    g = _group(NMU=(8192, 4096, 0, 2))
    g.add("NMU", Work(1024, 1024, 0), 2, 3)
    g.add("CSTL", Work(2560, 256, 0), 3, 13)
    g.add("CSTL", Work(640, 32, 0), 13, 33, "L1->L2")
    use = row(g, {"NMU": 1, "CSTL": 1}).units
    assert use["NMU"].rates == [(Rate(4096, "MACs"), 8192), (Rate(1024, "MACs"), 1024)]
    assert use["CSTL"].rates == [(Rate(32, "B"), 640), (Rate(256, "elements"), 2560)]
    rep, _ = _timed(CONV)  # npm_lite: 4096 i8 MACs a cycle (D-RT-COST)
    [line] = [t for t in rep.to_text().splitlines() if t.startswith("throughputs per unit")]
    assert line == (
        "throughputs per unit and cycle: CSTL 32 B (89%), 256 elements (11%); DMA 32 B; "
        "NMU 4096 MACs"
    )
    cstl = rep.to_json()["total"]["units"]["CSTL"]["rates"]
    assert {(r["rate"], r["of"]) for r in cstl} == {(256, "elements"), (32, "B")}
    assert sum(r["amount"] / r["rate"] for r in cstl) == pytest.approx(rep.total.units["CSTL"].work)


def test_a_report_without_onnx_nodes_says_where_they_are(capsys):
    """A model compiled to `.nem` (nem-compile's default) names no ONNX
    node: an outside review (session 25) got one `segment` row for a whole
    block and no word of `.nemb`; the text now says it under the table."""
    assert run([str(CONV), "--mode", "timed", "--roofline"]) == 0
    out = capsys.readouterr().out
    assert "no task names an ONNX node (a model compiled\nwith nem-compile -o M.nemb" in out


def test_timed_is_short_for_mode_timed(capsys):
    """`nem-run --timed` (an outside user tried it first, session 22) is
    `--mode timed`: the same report."""
    assert run([str(CONV), "--mode", "timed", "--roofline", "--json"]) == 0
    long = json.loads(capsys.readouterr().out)
    assert run([str(CONV), "--timed", "--roofline", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == long


def test_cli_json_is_the_whole_standard_output(capsys):
    assert run([str(CONV), "--mode", "timed", "--roofline", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "completed" and doc["device"] == "npm_lite"
    assert doc["total"]["bound"] == 14112 and doc["total"]["roof"] == "NMU"
    assert doc["units"]["NMU"] == 1
    assert doc["unit_utilization"]["E0.NMU[0]"] == round(14120 / doc["total"]["cycles"], 4)
    assert [g["kind"] for g in doc["groups"]] == ["segment", "loop"]
    assert doc["groups"][1]["units"]["NMU"]["amount"] == 4 * 14 * 14 * 128 * 3 * 3 * 64


def test_cli_json_carries_the_repeat_wall_times(capsys):
    """`--repeat N --json`: the wall times the text prints (`repeat: ...`)
    are a `repeat` object of the JSON document, not dropped (an outside
    check, session 40); a single run has none."""
    assert run([str(CONV), "--mode", "timed", "--roofline", "--json", "--repeat", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rep = doc["repeat"]
    assert rep["runs"] == rep["asked"] == 3
    assert rep["first_ms"] > 0 and 0 < rep["best_ms"] <= rep["median_ms"]
    # timed mode is always scheduled, never planned (D-RT-REPLAY)
    assert rep["prepared_ms"] is None and "timed" in rep["not_prepared"]
    assert rep["replayed"] is False
    assert run([str(CONV), "--mode", "timed", "--roofline", "--json"]) == 0
    assert "repeat" not in json.loads(capsys.readouterr().out)
    assert run([str(CONV), "--mode", "timed", "--roofline", "--repeat", "2"]) == 0
    text = capsys.readouterr().out
    assert re.search(
        r"repeat: 2 runs; first [0-9.]+ ms \(scheduled, race-checked; not prepared: ", text
    )


def test_cli_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "roof.png"
    assert run([str(CONV), "--mode", "timed", "--roofline", "--roofline-plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"roofline plot: {png}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--roofline"], "--roofline needs --mode timed"),
        (["--json"], "--json prints the roofline report: it needs --roofline"),
        (["--roofline-plot", "x.png"], "--roofline-plot draws the roofline report"),
        (["--onnx", "m.onnx"], "--onnx gives the roofline report's ideal bounds"),
        (["--mode", "timed", "--roofline", "--schedules", "2"], "it excludes --mode timed"),
    ],
)
def test_cli_usage_errors(flags, message, capsys):
    assert run([str(CONV), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nem-run: error: ") and message in err


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--roofline-plot", "{d}/tl", "--timeline", "{d}/tl.png"],
            "--roofline-plot '{d}/tl': a chart's format is its file's suffix; give a file name "
            "ending in .png, .svg, .pdf",
        ),
        (["--roofline-plot", "{d}/r.txt"], "--roofline-plot '{d}/r.txt': a chart's format"),
        (["--timeline", "-"], "--timeline '-': a chart's format"),
        (["--trace", "-"], "--trace writes a file; standard output ('-') carries"),
        (
            ["--json", "--output", "Y_L2=-"],
            "--output Y_L2=- with --json: standard output carries the JSON report alone",
        ),
    ],
)
def test_outputs_that_cannot_share_their_place_are_refused_before_the_run(
    tmp_path, flags, message, capsys
):
    """An outside check (session 40): matplotlib appended `.png` to a chart
    name without a suffix, so `--roofline-plot tl --timeline tl.png` wrote
    the bar chart over the Gantt chart; `r.txt` failed after the whole run;
    `--trace -` wrote a file named `-`; a tensor on standard output came
    before `--json`'s report.  Each is a usage error, and nothing is written."""
    d = str(tmp_path)
    argv = [str(CONV), "--mode", "timed", "--roofline", *(f.format(d=d) for f in flags)]
    assert run(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("nem-run: error: ") and message.format(d=d) in captured.err
    assert captured.out == "" and list(tmp_path.iterdir()) == []


@pytest.mark.filterwarnings("ignore:No artists with labels")  # barh is stubbed
def test_a_unit_kind_has_one_colour_in_every_chart(monkeypatch):
    """The bars' colours followed each program's sorted kinds: `latency`
    was red in one chart and purple in the next (session 40)."""
    pytest.importorskip("matplotlib")
    import matplotlib.axes
    import matplotlib.pyplot as plt

    from nem.runtime import roofline, roofline_plot

    rep, _ = _timed(CONV)
    colours: dict[str, object] = {}

    def barh(self, y, width, color=None, label=None, **kw):
        if label and label.startswith("busy cycles, binds "):
            colours[label.removeprefix("busy cycles, binds ")] = color

    monkeypatch.setattr(matplotlib.axes.Axes, "barh", barh)
    for kinds in (["DMA", LATENCY], ["NMU", "VPU", LATENCY]):
        rep.groups = [roofline.Row(k, "loop", 1, 1, 9, 1.0, k, k, {}) for k in kinds]
        plt.close(roofline_plot.bar_chart(rep))
    assert colours == {k: roofline_plot.kind_colors()[k] for k in ("DMA", "NMU", "VPU", LATENCY)}
    assert len(set(roofline_plot.kind_colors().values())) == len(roofline_plot.kind_colors())


def test_a_functional_session_has_no_roofline():
    it = NemInterpreter(trace=False)
    it.load(CONV)
    s = it.start()
    s.run_to_end()
    with pytest.raises(ValueError, match="not supported: a roofline needs a timed run"):
        s.roofline()


def test_the_worked_example_of_docs_compile_md(tmp_path):
    """docs/compile.md's roofline example prints what it shows."""
    from doc_blocks import ROOT, blocks, run_console

    doc = ROOT / "docs" / "compile.md"
    [block] = [b for b in blocks(doc.read_text()) if b.lang == "console" and "--roofline" in b.text]
    run_console(block, tmp_path, str(doc), ROOT)


def test_the_plot_shows_the_longest_groups_of_a_large_program(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.axes

    from nem.runtime import roofline, roofline_plot

    rep, _ = _timed(CONV)
    rep.groups = [
        roofline.Row(f"g{k}", "loop", k, 1, k, 1.0, "DMA", "DMA", {})
        for k in range(roofline_plot.PLOT_GROUPS + 5)
    ]
    drawn: list[str] = []
    monkeypatch.setattr(
        matplotlib.axes.Axes, "set_yticklabels", lambda self, labels, **kw: drawn.extend(labels)
    )
    roofline_plot.bar_chart_png(rep, str(tmp_path / "r.png"))
    assert drawn == [f"g{k}" for k in range(5, roofline_plot.PLOT_GROUPS + 5)]


def _lines(rep: Report) -> dict[str, list[str]]:
    """The text's rows, split, by group name (the table's first column)."""
    text = rep.to_text().splitlines()
    header = text[1].split()
    return {"header": header} | {
        line[:34].strip(): line[34:].split() for line in text[2 : 3 + len(rep.groups)]
    }


def test_the_ratio_shown_is_the_cycles_over_the_bound_shown():
    """An outside reader's softmax row `139  4  45.39` (139 / 4 = 34.75):
    the bound was printed rounded up to an integer, the ratio taken from the
    exact 3.0625."""
    units = {"DMA": 2}
    g = _group(DMA=(196, 32, 0, 139))  # 196 B / 32 B per cycle / 2 DMAs = 3.0625 cycles
    r = row(g, units)
    assert (r.cycles, r.bound) == (139, 3.0625)
    rep = Report("p", "d", units, r, [r])
    _tasks, cycles, bound, ratio, *_ = _lines(rep)["g"]
    assert (cycles, bound) == ("139", "3.06")
    assert float(ratio) == round(139 / 3.06, 2)
    rep, _ = _timed(CONV)
    for cols in list(_lines(rep).values())[1:]:
        assert float(cols[3]) == pytest.approx(int(cols[1]) / float(cols[2]), abs=0.005)
        assert len(cols[2].replace(".", "").lstrip("0")) >= 3  # 3 significant digits


def test_the_text_names_the_roof_beside_what_binds():
    """`binds` may be `latency` or another kind than the one whose work
    makes the bound: the text says both."""
    units = {"DMA": 2, "NMU": 1}
    busy = row(_group(DMA=(640, 32, 0, 20), NMU=(4096, 1024, 0, 90)), units, 100)
    cols = _lines(Report("p", "d", units, busy, [busy]))
    assert cols["header"][:7] == ["group", "tasks", "cycles", "bound", "ratio", "roof", "binds"]
    assert cols["g"][4:6] == ["DMA", "NMU"]  # roof DMA (640 B / 64 B per cycle), binds NMU


def test_a_program_that_reaches_one_engine_also_gets_that_engines_bound(tmp_path, capsys):
    """STRIDED's L1 is engine 0's: its DMA transfers can run on engine 0's
    DMAs only.  The bound stays the device's; the report adds the bound over
    the units the program can use, in the JSON always, in the text when
    they are fewer than the device's."""
    path = tmp_path / "strided.nem"
    path.write_text(STRIDED)
    rep, _ = _timed(path)
    engines = 4  # npm_pro_x1
    dma = rep.units["DMA"] // engines
    assert rep.usable_units["DMA"] == dma < rep.units["DMA"]
    assert rep.total.usable_bound == pytest.approx(rep.total.bound * engines)
    assert rep.total.usable_roof == rep.total.roof == "DMA"
    cols = _lines(rep)
    assert cols["header"][6:9] == ["u-bound", "u-ratio", "binds"]
    assert float(cols["program"][5]) == pytest.approx(rep.total.usable_bound, rel=0.005)
    assert f"DMA x{dma}" in rep.to_text().splitlines()[-1]
    assert run([str(path), "--mode", "timed", "--roofline", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["usable_units"]["DMA"] == dma and doc["units"]["DMA"] == rep.units["DMA"]
    assert doc["total"]["bound"] == round(rep.total.bound, 3)  # the device's, as before
    assert doc["total"]["usable_bound"] == round(rep.total.usable_bound, 3)
    # the whitepaper's example uses all of npm_lite's units: no second bound
    conv, _ = _timed(CONV)
    assert "u-bound" not in conv.to_text()


ROUTES = """device "npm_pro_x1.nem"
program routes:
buffer D : DDR (size=4096, align=64)
buffer M : L2 (size=4096, align=64)
buffer F : L1[1] (size=4096, align=64)
a = transfer.async(dst=region(M, 0, 1024), src=region(D, 0, 1024))
b = transfer.async(dst=region(F, 0, 1024), src=region(M, 0, 1024), deps=[a])
c = transfer.async(dst=region(F, 1024, 512), src=region(F, 0, 512), deps=[b])
r = relu.async in region(F, 1024, 512) elem=f32, shape=[128], layout=C out region(F, 2048, 512) elem=f32, shape=[128], layout=C deps=[c]
s = store.async(dst=region(D, 2048, 512), src=region(F, 2048, 512), deps=[r])
t = transfer.async(dst=region(D, 3072, 256), src=region(F, 0, 256), deps=[b])
wait(s, t)
"""


def test_the_bytes_each_group_moved_by_memory_levels(tmp_path, capsys):
    """Each row's `moved`: its transfers' and stores' bytes by the levels
    they go between, SRC->DST, an engine's L1 whatever its index, most
    first; a compute task moves none; the program's in the text (an
    outside review, session 52: a Conv moving 4.1x its least traffic, and
    the report did not say where the bytes went)."""
    path = tmp_path / "routes.nem"
    path.write_text(ROUTES)
    rep, _ = _timed(path)
    want = {"DDR->L2": 1024, "L2->L1": 1024, "L1->DDR": 512 + 256, "L1->L1": 512}
    assert rep.total.moved == want
    assert list(rep.total.moved) == ["DDR->L2", "L2->L1", "L1->DDR", "L1->L1"]
    # the transfers' bytes are the DMAs' amounts; the store's 512 run on CSTL
    transfers = sum(rep.total.units[u].amount for u in ("DMA", "sDMA") if u in rep.total.units)
    assert sum(rep.total.moved.values()) == transfers + 512
    merged: dict[str, int] = {}
    for g in rep.groups:
        for k, n in g.moved.items():
            merged[k] = merged.get(k, 0) + n
    assert merged == want
    assert run([str(path), "--mode", "timed", "--roofline"]) == 0
    text = capsys.readouterr().out
    assert (
        "moved: DDR->L2 1,024 B (31%), L2->L1 1,024 B (31%), L1->DDR 768 B (23%), "
        "L1->L1 512 B (15%)"
    ) in text
    assert run([str(path), "--mode", "timed", "--roofline", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["moved"] == want


@pytest.mark.parametrize(
    "name, shown",
    [
        ("node 'n1' (Conv)", "node 'n1' (Conv)"),
        ("node '/encoder/layer.0/attention/MatMul' (MatMul)", "'/encoder/l...on/MatMul' (MatMul)"),
        ("node 'layernormalization_1' (LayerNormalization)", "'laye...n_1' (LayerNormalization)"),
        ("node 'stage1_gap' (GlobalAveragePool)", "'stage1_gap' (GlobalAveragePool)"),
        (
            "loop nest at line 1234 of a very long file name.nem",
            "loop nest at line 1234 of a ve...",
        ),
    ],
)
def test_a_long_group_name_keeps_its_op_type(name, shown):
    """The text's group column is 33 characters: a long node name is cut in
    its middle and keeps its op type (an outside review, session 54: `node
    'layernormalization_1' (L...` named no op type)."""
    assert cut(name, 33) == shown and len(shown) <= 33


def test_two_long_names_are_never_shown_alike():
    """Names whose cuts collide show where they differ (an outside review,
    session 66: two `node ..._gap' (GlobalAveragePool)` rows; exporters'
    `/encoder/layer.N/...` names keep the same ends)."""
    names = [f"node '/encoder/layer.{i}/attention/MatMul' (MatMul)" for i in (0, 1, 11)]
    names += ["node '/decoder/layer.0/attention/MatMul' (MatMul)", "program"]
    shown = labels(names, 33)
    assert len(set(shown)) == len(names) and all(len(s) <= 33 for s in shown)
    assert "layer.11" in shown[2] and shown[-1] == "program"
    assert shown[3] == cut(names[3], 33)  # (a cut no other shares stays)


def test_an_nmu_rate_in_the_profile_sets_the_nmu_bound():
    """`NMU.macs` sets every input type's rate above the device's, a
    per-type key (the device's names) one type's (an outside review, session
    55: `{"NMU": {"macs": 16}}` changed nothing on a device that gives its
    rates, under a header saying the profile overrode them); the example's
    i8 convolutions on npm_lite's `int8_macs` 4096."""
    base, _ = _timed(CONV)
    assert base.total.units["NMU"].bound == 14112
    every, _ = _timed(CONV, {"NMU": {"macs": 2048}})
    assert every.total.units["NMU"].bound == 2 * 14112
    one, _ = _timed(CONV, {"NMU": {"macs": 2048, "int8_macs": 1024}})
    assert one.total.units["NMU"].bound == 4 * 14112
    other, _ = _timed(CONV, {"NMU": {"fp16_macs": 1024}})  # not the example's type
    assert other.total.units["NMU"].bound == 14112
    # a type's own key first, the profile's before the device's: npm_lite's
    # int4_macs stays i4's rate under a profile giving int8_macs only
    from nem.dialect.semantics.cost import DEFAULT_PROFILE, macs_per_cycle

    chars = {"NMU": {"int4_macs": 16384, "int8_macs": 4096, "int16_macs": 1024}}
    profile = {**DEFAULT_PROFILE, "NMU": {**DEFAULT_PROFILE["NMU"], "int8_macs": 100}}
    assert [macs_per_cycle(t, chars, profile) for t in ("i4", "i8", "i16")] == [16384, 100, 1024]
    it = NemInterpreter(trace=False)
    with pytest.raises(ValueError, match="unknown parameter 'fp33_macs'.*fp32_macs"):
        it.set_timing_profile({"NMU": {"fp33_macs": 8}})


def test_flags_that_did_nothing_are_usage_errors(tmp_path, capsys):
    """`--timed` with `--mode functional` ran timed, and `--roofline-plot ''`
    drew nothing, both without a word (an outside review, session 55; a
    review of the fix: `--timeline ''` and `--trace ''` too)."""
    assert run([str(CONV), "--mode", "functional", "--timed"]) == 2
    assert "--timed is --mode timed: it excludes --mode functional" in capsys.readouterr().err
    for flags in (["--roofline", "--roofline-plot", ""], ["--timeline", ""]):
        assert run([str(CONV), "--timed", *flags]) == 2
        assert f"{flags[-2]} '': a chart's format is its file's suffix" in capsys.readouterr().err
    assert run([str(CONV), "--timed", "--trace", ""]) == 2
    assert "--trace needs a file name" in capsys.readouterr().err
    assert run([str(CONV), "--timed", "--mode", "timed"]) == 0


def test_utilization_columns_round_down_as_binds_compares():
    """The example's loop keeps its NMU busy 90.96% of its cycles: the
    column prints 90%, rounded down, so a kind shown at 50% is one `binds`
    names (a DMA at 49.8% printed 50% beside `latency`, session 55)."""
    rep, _ = _timed(CONV)
    loop = next(r for r in rep.groups if r.name == "loop at line 49")
    assert 0.9 < loop.units["NMU"].utilization < 0.91
    line = next(x for x in rep.to_text().splitlines() if x.startswith("loop at line 49"))
    assert line.split()[-1] == "90%"
