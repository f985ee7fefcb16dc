"""What a roofline group reports and where (D-RT-ROOFLINE), from an outside
user's check of the report (session 18, issue 35): a group's cycles are its
busy cycles, not its first start to its last end (a 2-layer MLP's softmax,
whose accumulator fill starts at cycle 0, read 1501.91x its bound); the
JSON gives each group's lines; the compiler's final layout copy into a graph
output belongs to the node that produced it; the plot's legend hides no
bar.  And from the session-22 reading: every ONNX node is in the report, as
a group or fused into one (a SiLU's Sigmoid into its Mul, a GELU's parts,
a BatchNormalization and a Relu into their Conv)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from nem.runtime.roofline_tally import Busy, line_ranges

onnx = pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from onnx import helper  # noqa: E402
from roofline_models import conv_bn_relu, small_model, timed_session  # noqa: E402


def mlp2():
    """The outside check's mlp2: x 8x256, Gemm 256->512, Relu, Gemm 512->10,
    Softmax(axis=1)."""
    return small_model(
        "mlp2",
        [("x", [8, 256])],
        [("y", [8, 10])],
        [
            helper.make_node("Gemm", ["x", "W1", "B1"], ["h"], name="fc1"),
            helper.make_node("Relu", ["h"], ["hr"], name="relu1"),
            helper.make_node("Gemm", ["hr", "W2", "B2"], ["z"], name="fc2"),
            helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=1),
        ],
        [("W1", (256, 512)), ("B1", (512,)), ("W2", (512, 10)), ("B2", (10,))],
    )


def _report(model, label):
    """`timed_session`'s report and program text."""
    session, lines = timed_session(model, label)
    return session.roofline(), lines


@pytest.fixture(scope="module")
def mlp2_report():
    return _report(mlp2(), "mlp2")


def test_a_group_is_charged_its_busy_cycles_not_its_window(mlp2_report):
    rep, _ = mlp2_report
    groups = {g.name: g for g in rep.groups}
    softmax = groups["node 'softmax' (Softmax)"]
    total = rep.total.cycles
    # its first task (the -inf fill of the max accumulator) waits on nothing:
    # the window from its start to the softmax's end is the whole program
    assert softmax.span == (0, total)
    # busy, it is a small part of the program, a few times its bound
    assert softmax.cycles < total / 10
    assert 1 <= softmax.ratio < 100
    assert max(rep.groups, key=lambda g: g.cycles).name == "node 'fc1' (Gemm)"
    for g in rep.groups:
        assert g.bound <= g.cycles <= g.span[1] - g.span[0]
        assert all(0 <= u.utilization <= 1 for u in g.units.values())
    assert rep.total.cycles == total and rep.total.span == (0, total)


def test_a_report_per_node_has_no_note_about_nodes(mlp2_report):
    """The line pointing to `.nemb` is only for reports without node groups."""
    assert "no task names an ONNX node" not in mlp2_report[0].to_text()


def test_each_group_gives_the_lines_of_its_statements(mlp2_report):
    rep, text = mlp2_report
    seen: list[tuple[int, int]] = []
    for g in rep.groups:
        assert g.lines and g.lines[0][0] == g.line
        name = g.name.split("'")[1]
        for first, last in g.lines:
            seen.append((first, last))
            statements = [text[k - 1] for k in range(first, last + 1)]
            assert " = " in statements[0] and " = " in statements[-1], (name, first, last)
    seen.sort()
    assert all(a[1] < b[0] for a, b in zip(seen, seen[1:]))  # disjoint
    assert rep.to_json()["groups"][0]["lines"] == [list(r) for r in rep.groups[0].lines]


def test_line_ranges_break_at_another_groups_statement():
    at = [(5, 0), (6, 0), (9, 1), (7, 0), (12, 0), (10, 1), (20, 2)]
    assert line_ranges(at) == {0: [(5, 7), (12, 12)], 1: [(9, 10)], 2: [(20, 20)]}


def test_busy_cycles_are_the_union_of_the_intervals():
    rnd = random.Random(35)
    for _ in range(200):
        busy, covered = Busy(), np.zeros(200, bool)
        for _ in range(rnd.randrange(1, 30)):
            start = rnd.randrange(180) if rnd.random() < 0.3 else rnd.randrange(150, 190)
            end = start + rnd.randrange(0, 12)
            busy.add(start, end)
            covered[start:end] = True
            assert busy.cycles == covered.sum()
            assert all(a < b for a, b in zip(busy.ends, busy.starts[1:]))  # disjoint, sorted


def test_the_layout_copies_of_the_graphs_input_and_output_are_rows_of_their_own():
    """A Conv's NCHW output is written by copies the compiler adds after the
    node (NHWC to NCHW), and a padded Conv's NCHW input copied into NHWC
    before it: neither is the node's work, and charged to it they made the
    first and last layers read as moving twice their data (outside reviews,
    sessions 53 and 54).  They are located at the graph's input or output
    (`LAYOUT`, D-COMPILE-LAYOUT): rows `layout of 'x'` and `layout of 'y'`,
    which `--onnx` takes as no node of the model."""
    conv = small_model(
        "conv",
        [("x", [1, 8, 8, 8])],
        [("y", [1, 8, 8, 8])],
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1] * 4)],
        [("w", (8, 8, 3, 3))],
    )
    rep, text = _report(conv, "conv")
    assert [g.name for g in rep.groups] == ["layout of 'x'", "node 'conv' (Conv)", "layout of 'y'"]
    assert [g.kind for g in rep.groups] == ["layout", "node", "layout"]
    assert sum(g.tasks for g in rep.groups) == rep.total.tasks
    out = rep.groups[-1]
    last = max(last for _, last in out.lines)
    assert "region(y," in text[last - 1]  # the copy into the output is in its lines
    assert "layout of 'y'" in rep.to_text() and set(rep.within()) == {"Conv"}


def test_the_legend_covers_no_bar(mlp2_report):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from nem.runtime.roofline_plot import bar_chart

    fig = bar_chart(mlp2_report[0])
    try:
        fig.canvas.draw()
        [ax] = fig.axes
        legend = ax.get_legend().get_window_extent()
        assert not legend.overlaps(ax.get_window_extent())
    finally:
        plt.close(fig)


def silu_gelu_mlp():
    """x 8x64, Gemm, SiLU as Sigmoid and Mul, Gemm, a GELU written out
    (Div, Erf, Add, Mul, Mul), Gemm."""
    scalars = [
        helper.make_node("Constant", [], [n], value_float=v, name=f"c_{n}")
        for n, v in (("sqrt2", 2**0.5), ("one", 1.0), ("half", 0.5))
    ]
    return small_model(
        "silu_gelu",
        [("x", [8, 64])],
        [("y", [8, 10])],
        [
            *scalars,
            helper.make_node("Gemm", ["x", "W1", "B1"], ["h1"], name="fc1"),
            helper.make_node("Sigmoid", ["h1"], ["s1"], name="sig"),
            helper.make_node("Mul", ["h1", "s1"], ["a1"], name="silu"),
            helper.make_node("Gemm", ["a1", "W2", "B2"], ["h2"], name="fc2"),
            helper.make_node("Div", ["h2", "sqrt2"], ["g0"], name="g_div"),
            helper.make_node("Erf", ["g0"], ["g1"], name="g_erf"),
            helper.make_node("Add", ["g1", "one"], ["g2"], name="g_add"),
            helper.make_node("Mul", ["h2", "g2"], ["g3"], name="g_mul"),
            helper.make_node("Mul", ["g3", "half"], ["a2"], name="g_half"),
            helper.make_node("Gemm", ["a2", "W3", "B3"], ["y"], name="fc3"),
        ],
        [("W1", (64, 128)), ("B1", (128,)), ("W2", (128, 128)), ("B2", (128,))]
        + [("W3", (128, 10)), ("B3", (10,))],
    )


@pytest.mark.parametrize(
    "model, fused",
    [
        (
            silu_gelu_mlp,
            {
                "node 'silu' (Mul)": ["node 'sig' (Sigmoid)"],
                "node 'g_erf' (Erf)": [
                    "node 'g_div' (Div)",
                    "node 'g_add' (Add)",
                    "node 'g_mul' (Mul)",
                    "node 'g_half' (Mul)",
                ],
            },
        ),
        (
            conv_bn_relu,
            {
                "node 'conv1' (Conv)": ["node 'bn' (BatchNormalization)", "node 'relu1' (Relu)"],
                "node 'conv2' (Conv)": ["node 'relu2' (Relu)"],
            },
        ),
    ],
)
def test_each_onnx_node_is_a_group_or_fused_into_one(model, fused):
    """A node the compiler fused into another vanished from the report
    without notice; now each one is listed with the group its work is in
    (text: `NODE fused into GROUP`; JSON: the group's `fused`).  Nodes that
    do no work in the program (the Constants, the `Abs` of a weight, folded
    at compile time) are neither."""
    proto = model()
    rep, _ = _report(proto, proto.graph.name)
    got = {g.name: sorted(g.fused) for g in rep.groups if g.fused}
    assert got == {group: sorted(nodes) for group, nodes in fused.items()}
    working = {n.name for n in proto.graph.node if n.op_type not in ("Constant", "Abs")}
    named = {g.name.split("'")[1] for g in rep.groups if g.kind == "node"} | {
        f.split("'")[1] for g in rep.groups for f in g.fused
    }
    assert named == working
    text = rep.to_text()
    for group, nodes in fused.items():
        assert all(f"{n} fused into {group}" in text for n in nodes)
    assert {g["name"]: sorted(g["fused"]) for g in rep.to_json()["groups"] if g["fused"]} == got


def test_nodes_of_one_name_are_groups_of_their_own():
    """onnx's checker accepts two nodes of one name, and an outside review
    (session 25) gave both Convs of a block the name `c`: the simplifier
    renamed them apart (`node_Conv_0`, `node_Conv_1`), names the user never
    wrote, and the report read "node 'c' (Conv) fused into node
    'node_Conv_0' (Conv)".  A later node of a name already used is
    `<name>_<index>` (D-COMPILE-SIMPLIFY), as an unnamed one is
    `<OpType>_<index>`."""
    proto = conv_bn_relu()
    for n in proto.graph.node:
        if n.op_type == "Conv":
            n.name = "c"
    rep, _ = _report(proto, "dup")
    assert [g.name for g in rep.groups if g.kind == "node"] == [
        "node 'c' (Conv)",
        "node 'c_4' (Conv)",
    ]
    assert {g.name: sorted(g.fused) for g in rep.groups if g.fused} == {
        "node 'c' (Conv)": ["node 'bn' (BatchNormalization)", "node 'relu1' (Relu)"],
        "node 'c_4' (Conv)": ["node 'relu2' (Relu)"],
    }
