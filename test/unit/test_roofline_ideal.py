"""The roofline report's ideal bound (D-RT-ROOFLINE, "Ideal bound", session
26): the bound of what an ONNX node must do at the least, its tensors moved
once and its MACs, beside the bound of the program as compiled, which
counts a transfer made twice twice (an outside review, session 25: a
MobileNetV2 block's 1x1 conv at 1.77x its compiled bound was 3.13x the
bound of its tensors moved once).  The least work recomputed by hand, its
pricing by D-RT-COST's numbers, the report's text and JSON, and
`nem-run --roofline --onnx`."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from onnx import TensorProto, helper  # noqa: E402
from roofline_models import conv_bn_pool, conv_bn_relu, timed_session  # noqa: E402

from nem.cli.nem_run import run  # noqa: E402
from nem.frontends.onnx.traffic import NodeTraffic, Traffic  # noqa: E402
from nem.runtime.roofline import shown  # noqa: E402

X, C1, PARAMS, V = 1 * 3 * 16 * 16 * 4, 8 * 3 * 3 * 3 * 4, 3 * 8 * 4, 8 * 4
"""conv_bn_relu's bytes: the input, conv1's weights, the normalization's
scale, bias and mean (initializers), its variance (the `var` node's output)."""
ACT = 8 * 16 * 16 * 4  # an 8x16x16 f32 activation
MACS1 = 8 * 16 * 16 * 3 * 3 * 3  # conv1: each output element, 3 channels x 3x3
DMA_BYTES_PER_CYCLE = 16 * 32 + 4 * 16  # npm_pro_x1: DMA x16 at 32 B, sDMA x4 at 16 B
F32_MACS_PER_CYCLE = 8 * 4096 // 4  # NMU x8, fp16_macs 4096, f32 a quarter (D-RT-COST)


def test_the_least_work_of_a_node_and_of_its_fused_group_by_hand():
    """A group moves what enters and leaves it: conv1 alone writes its
    output for the normalization; with the normalization and the Relu fused
    into it (the group the report shows) it reads their parameters and
    writes the Relu's output instead, and the values between them are not
    moved at all."""
    least = NodeTraffic(conv_bn_relu())
    assert least.of(["conv1"]) == Traffic(X + C1 + ACT, (("f32", MACS1),))
    assert least.of(["conv1", "bn", "relu1"]) == Traffic(
        X + C1 + PARAMS + V + ACT, (("f32", MACS1),)
    )
    conv2 = 8 * 16 * 16 * 8 * 3 * 3
    assert least.of(["conv2", "relu2"]) == Traffic(ACT + 8 * 8 * 3 * 3 * 4 + ACT, (("f32", conv2),))
    assert least.of(["relu2"]) == Traffic(2 * ACT, ())
    assert least.of(["no_such_node"]) is None


def _gemm(trans_a: int, batch: object):
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b"], ["y"], name="g", transA=trans_a)],
        "gemm",
        [
            helper.make_tensor_value_info(
                "a", TensorProto.FLOAT, [32, batch] if trans_a else [batch, 32]
            ),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [32, 16]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("trans_a", [0, 1])
def test_a_gemms_macs_follow_trans_a_and_an_unknown_shape_gives_none(trans_a):
    """M x N x K with K the reduced dimension of A, transposed or not; a
    tensor without a static shape has no size: no least work (the row then
    shows no ideal bound rather than a wrong one)."""
    assert NodeTraffic(_gemm(trans_a, 4)).of(["g"]) == Traffic(
        (4 * 32 + 32 * 16 + 4 * 16) * 4, (("f32", 4 * 16 * 32),)
    )
    assert NodeTraffic(_gemm(trans_a, "n")).of(["g"]) is None


@pytest.fixture(scope="module")
def conv_bn_relu_report():
    proto = conv_bn_relu()
    return timed_session(proto, "conv_bn")[0], proto


def test_each_node_row_gets_the_bound_of_its_least_work(conv_bn_relu_report):
    """Priced by hand from D-RT-COST's numbers: bytes over every transfer
    unit of the device, MACs over its NMUs at f32's rate; the program's
    ideal is that of all its nodes as one group (session 62)."""
    session, proto = conv_bn_relu_report
    rep = session.roofline(NodeTraffic(proto).of)
    rows = {r.name: r for r in rep.groups}
    conv1 = rows["node 'conv1' (Conv)"]
    moved1 = (X + C1 + PARAMS + V + ACT) / DMA_BYTES_PER_CYCLE
    assert conv1.ideal_bound == pytest.approx(max(moved1, MACS1 / F32_MACS_PER_CYCLE))
    assert conv1.ideal_ratio == pytest.approx(conv1.cycles / conv1.ideal_bound)
    assert conv1.ideal_roof == ("DMA" if moved1 >= MACS1 / F32_MACS_PER_CYCLE else "NMU")
    nodes = [r for r in rep.groups if r.kind == "node"]
    assert all(r.ideal_bound for r in nodes)
    names = [n for r in nodes for n in (r.name.split("'")[1], *(f.split("'")[1] for f in r.fused))]
    moved = NodeTraffic(proto).of(names).moved
    assert rep.total.ideal_bound == pytest.approx(moved / DMA_BYTES_PER_CYCLE)
    assert rep.total.ideal_bound < rep.total.bound  # this program moves more than the least
    doc = rep.to_json()
    assert doc["total"]["ideal_bound"] == round(rep.total.ideal_bound, 3)
    assert all("ideal_ratio" in g for g in doc["groups"])
    assert "ideal_bound" not in session.roofline().to_json()["total"]  # not asked: as before
    table = rep.to_text().splitlines()
    assert table[1].split()[5:9] == ["roof", "ideal", "i-ratio", "i-roof"]
    assert rep.total.ideal_roof == "DMA" and doc["total"]["ideal_roof"] == "DMA"
    assert _cells(table, "node 'conv1' (Conv)")[5:8] == [
        *shown(conv1.cycles, conv1.ideal_bound),
        conv1.ideal_roof,
    ]
    assert "ideal, i-ratio, i-roof: the bound of the ONNX nodes' least work" in rep.to_text()
    # the layout rows, which have no ideal, are explained (an outside review, session 63)
    assert [r.ideal_bound for r in rep.groups if r.kind == "layout"] == [None, None]
    assert "layout of 'x': the copy of a model input or output" in rep.to_text()


def test_a_node_split_between_two_groups_is_counted_in_its_own():
    """x * Sigmoid(GlobalAveragePool(x)) (an outside user, session 62): the
    pooling's divide is fused into the Sigmoid's group, so that group named
    the pooling as fused and its ideal counted the pooling's whole input
    (174 cycles for a Sigmoid of 32 values), and the program's, the sum of
    its rows' (x counted for the pooling and for the Mul), was above the
    cycles the program took.  The Sigmoid's least work is its own; the
    program's is every tensor in and out of the model once; the text says
    the pooling is fused in part."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 28, 28])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 28, 28])
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["p"], name="gap"),
        helper.make_node("Sigmoid", ["p"], ["s"], name="sig"),
        helper.make_node("Mul", ["x", "s"], ["y"], name="scale"),
    ]
    proto = helper.make_model(
        helper.make_graph(nodes, "se", [x], [y]), opset_imports=[helper.make_opsetid("", 13)]
    )
    session, _ = timed_session(proto, "se")
    rep = session.roofline(NodeTraffic(proto).of)
    rows = {r.name: r for r in rep.groups}
    sig = rows["node 'sig' (Sigmoid)"]
    assert sig.fused == ["node 'gap' (GlobalAveragePool)"]  # (else the model shows nothing)
    assert sig.least == (2 * 32 * 4, 0)  # its 32 values in and out
    everything = 2 * 32 * 28 * 28 * 4  # x in and y out, once
    assert rep.total.least == (everything, 0)
    assert rep.total.ideal_bound == pytest.approx(everything / DMA_BYTES_PER_CYCLE)
    assert rep.total.ideal_bound <= rep.total.cycles
    text = rep.to_text()
    assert "part of node 'gap' (GlobalAveragePool) fused into node 'sig' (Sigmoid)" in text


@pytest.mark.parametrize("first", ["f32", "f16"])
def test_the_macs_of_each_type_are_priced_at_that_types_rate(first):
    """An f32 MatMul and an f16 one in one program (an outside review,
    session 63): the program's ideal priced every MAC at the first node's
    type, 66,048 cycles at f32's rate for a program of 54,168 when the f32
    MatMul came first, and below the f32 MatMul's own row when the f16 one
    did.  Each type's MACs at its own rate, by hand: f32 a quarter of
    fp16_macs, f16 fp16_macs (D-RT-COST)."""
    f16 = F32_MACS_PER_CYCLE * 4
    types = {"f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16}
    second = "f16" if first == "f32" else "f32"
    rng = np.random.default_rng(0)
    w1 = onnx.numpy_helper.from_array(
        (rng.standard_normal((64, 512)) * 0.1).astype(np.dtype(first.replace("f", "float"))), "w1"
    )
    w2 = onnx.numpy_helper.from_array(
        (rng.standard_normal((512, 512)) * 0.05).astype(np.dtype(second.replace("f", "float"))),
        "w2",
    )
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
        helper.make_node("Cast", ["a"], ["b"], name="cast", to=types[second]),
        helper.make_node("MatMul", ["b", "w2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes,
        "mixed",
        [helper.make_tensor_value_info("x", types[first], [256, 64])],
        [helper.make_tensor_value_info("y", types[second], [256, 512])],
        [w1, w2],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    macs1, macs2 = 256 * 512 * 64, 256 * 512 * 512
    assert NodeTraffic(proto).of(["mm1", "cast", "mm2"]).by_type == (
        (first, macs1),
        (second, macs2),
    )
    session, _ = timed_session(proto, "mixed")
    rep = session.roofline(NodeTraffic(proto).of)
    rate = {"f32": F32_MACS_PER_CYCLE, "f16": f16}
    nmu = macs1 / rate[first] + macs2 / rate[second]
    assert rep.total.ideal_roof == "NMU"
    assert rep.total.ideal_bound == pytest.approx(nmu)
    rows = {r.name: r for r in rep.groups}
    assert rows["node 'mm1' (MatMul)"].ideal_bound <= rep.total.ideal_bound
    assert rows["node 'mm2' (MatMul)"].ideal_bound <= rep.total.ideal_bound
    assert rep.total.ideal_bound <= rep.total.cycles


def _cells(table: list[str], name: str) -> list[str]:
    """A row's cells after its group's name."""
    [line] = [t for t in table if t.startswith(name)]
    return line[len(name) :].split()


def test_nem_run_reads_the_model_for_the_ideal_bounds(tmp_path, capsys, monkeypatch):
    """`nem-run M.nemb --mode timed --roofline --onnx M.onnx`, its chart
    (`--roofline-plot`) marking the same ideal bounds (an outside review,
    session 53: the chart with `--onnx` was the one without); a model file
    that cannot be read is a diagnostic before the run, not a traceback."""
    from nem.cli.nem_compile import nemb_bytes
    from nem.compile import compile_onnx
    from nem.runtime import roofline_plot

    proto = conv_bn_relu()
    onnx_path, nemb = tmp_path / "conv_bn.onnx", tmp_path / "conv_bn.nemb"
    onnx.save(proto, str(onnx_path))
    result = compile_onnx(proto, device="npm_pro_x1", origins=True)
    nemb.write_bytes(nemb_bytes(result, str(nemb), str(onnx_path)))
    flags = ["--mode", "timed", "--roofline", "--json", "--onnx"]
    assert run([str(nemb), *flags, str(onnx_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    conv1 = next(g for g in doc["groups"] if g["name"] == "node 'conv1' (Conv)")
    assert conv1["ideal_bound"] > 0 and conv1["ideal_ratio"] == pytest.approx(
        conv1["cycles"] / conv1["ideal_bound"], rel=1e-3
    )
    charted: list[float | None] = []
    monkeypatch.setattr(
        roofline_plot,
        "bar_chart_png",
        lambda rep, path: charted.extend(r.ideal_bound for r in rep.groups),
    )
    png = str(tmp_path / "r.png")
    assert run([str(nemb), *flags, str(onnx_path), "--roofline-plot", png]) == 0
    drawn = {g["name"]: g["ideal_bound"] for g in json.loads(capsys.readouterr().out)["groups"]}
    assert charted == pytest.approx(list(drawn.values()), abs=1e-3) and any(charted)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    assert run([str(nemb), *flags, str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "bad.onnx" in captured.err and "Traceback" not in captured.err


def test_nem_run_refuses_a_model_the_program_was_not_compiled_from(tmp_path, capsys):
    """`--onnx` with another model than the program's: a node of the
    program that the model does not have, or has as another op type, is an
    error before the run naming the node and the model the program names
    (an outside review, session 52: a model of other shapes, or with no
    node in common, gave ideal bounds or dashes without a word); the same
    model under another name runs, with a warning that the shapes are the
    file's given."""
    from roofline_models import small_model

    from nem.cli.nem_compile import nemb_bytes
    from nem.compile import compile_onnx

    proto = conv_bn_relu()
    onnx_path, nemb = tmp_path / "conv_bn.onnx", tmp_path / "conv_bn.nemb"
    onnx.save(proto, str(onnx_path))
    result = compile_onnx(str(onnx_path), device="npm_pro_x1", origins=True)
    nemb.write_bytes(nemb_bytes(result, str(nemb), str(onnx_path)))
    flags = ["--mode", "timed", "--roofline", "--json", "--onnx"]

    other = tmp_path / "other.onnx"
    relu = helper.make_node("Relu", ["a"], ["b"], name="q")
    onnx.save(small_model("other", [("a", [2, 3])], [("b", [2, 3])], [relu], []), str(other))
    retyped = tmp_path / "retyped.onnx"
    changed = onnx.ModelProto()
    changed.CopyFrom(proto)
    changed.graph.node[3].op_type = "Sigmoid"  # relu1, fused into conv1's group
    onnx.save(changed, str(retyped))
    # its types or shapes: the ideal bounds would be priced in them (an
    # outside review, session 53: an f32 model for its f16 program gave
    # ideal ratios under 1)
    halved, wider = tmp_path / "f16.onnx", tmp_path / "wider.onnx"
    onnx.save(_as_f16(proto), str(halved))
    grown = onnx.ModelProto()
    grown.CopyFrom(proto)
    for port in (*grown.graph.input, *grown.graph.output):
        for d in port.type.tensor_type.shape.dim[2:]:
            d.dim_value = 32
    onnx.save(grown, str(wider))
    for model, says in [
        (other, "is not a node of it"),
        (retyped, "is a Sigmoid node there"),
        (halved, "its 'x' is f16, 1,536 B; the program's buffer x is f32, 3,072 B"),
        (wider, "its 'x' is f32, 12,288 B; the program's buffer x is f32, 3,072 B"),
    ]:
        assert run([str(nemb), *flags, str(model)]) == 1
        out, err = capsys.readouterr()
        assert out == "" and "Traceback" not in err
        assert f"--onnx {model} is not the model {nemb} was compiled from ({onnx_path})" in err
        assert says in err and "fix: give --onnx the model the program was compiled from" in err

    copy = tmp_path / "copy.onnx"
    copy.write_bytes(onnx_path.read_bytes())
    assert run([str(nemb), *flags, str(copy)]) == 0
    out, err = capsys.readouterr()
    assert f"was compiled from {onnx_path}, not --onnx {copy}" in err
    assert json.loads(out)["groups"]
    assert run([str(nemb), *flags, str(onnx_path)]) == 0
    assert "warning" not in capsys.readouterr().err


def _as_f16(proto: onnx.ModelProto) -> onnx.ModelProto:
    """`proto` in float16: its ports and initializers."""
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(proto)
    for port in (*out.graph.input, *out.graph.output):
        port.type.tensor_type.elem_type = TensorProto.FLOAT16
    for t in out.graph.initializer:
        t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    return out


def test_a_model_that_names_none_of_the_groups_is_said_so(conv_bn_relu_report):
    """Another model than the program's gives no group an ideal bound: the
    text says so instead of a column of dashes alone."""
    from roofline_models import small_model

    session, _ = conv_bn_relu_report
    other = small_model(
        "other",
        [("a", [2, 3])],
        [("b", [2, 3])],
        [helper.make_node("Relu", ["a"], ["b"], name="q")],
        [],
    )
    text = session.roofline(NodeTraffic(other).of).to_text()
    assert "ideal: no group's nodes are nodes of the model given" in text
    assert "ideal: no group's" not in session.roofline(NodeTraffic(conv_bn_relu()).of).to_text()


def test_the_chart_marks_each_rows_ideal_bound(conv_bn_relu_report):
    """With the model's least work (`--onnx`) the bar chart draws a tick
    across each node's pair of bars at its ideal bound, and the title names
    the program's; without it, no tick (an outside check, session 40: the
    chart did not draw the ideal bound the table printed)."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    from nem.runtime.roofline import shown_bound
    from nem.runtime.roofline_plot import bar_chart

    session, proto = conv_bn_relu_report
    for least, want in ((NodeTraffic(proto).of, True), (None, False)):
        rep = session.roofline(least)
        fig = bar_chart(rep)
        try:
            [ax] = fig.axes
            ticks = [c for c in ax.collections if isinstance(c, LineCollection)]
            xs = sorted(seg[0][0] for c in ticks for seg in c.get_segments())
            marked = sorted(r.ideal_bound for r in rep.groups if r.ideal_bound)
            assert xs == pytest.approx(marked) and bool(xs) == want
            title = ax.get_title()
            assert (f"ideal {shown_bound(rep.total.ideal_bound or 0)}" in title) == want
        finally:
            plt.close(fig)


def test_each_op_types_groups_within_2x_and_the_least_work():
    """The report counts, per ONNX op type, its node groups within 2x of
    their bound and of their ideal (issue 35's per-layer measure, which only
    bench_roofline.py counted: an outside review, session 53), and gives
    each node row the least work its ideal prices (`least`: bytes, MACs;
    the review found the model's MACs shown nowhere)."""
    proto = conv_bn_pool()
    session = timed_session(proto, "conv_bn_pool")[0]
    traffic = NodeTraffic(proto)
    rep = session.roofline(traffic.of)
    nodes = [r for r in rep.groups if r.kind == "node"]
    assert {r.op for r in nodes} == {"Conv", "MaxPool"}
    want: dict[str, list[int]] = {}
    for r in nodes:
        n = want.setdefault(r.name.rsplit("(", 1)[1].rstrip(")"), [0, 0, 0])
        n[0] += r.cycles <= 2 * r.bound
        n[1] += 1
        n[2] += r.cycles <= 2 * (r.ideal_bound or 0)
    assert rep.within() == {op: tuple(n) for op, n in want.items()}
    assert list(rep.within()) == ["Conv", "MaxPool"] == sorted(want, key=lambda op: -want[op][1])
    text = rep.to_text().splitlines()
    conv, pool = want["Conv"], want["MaxPool"]
    assert f"within 2x of their bound: Conv {conv[0]} of 2, MaxPool {pool[0]} of 1" in text
    assert f"within 2x of their ideal: Conv {conv[2]} of 2, MaxPool {pool[2]} of 1" in text
    doc = rep.to_json()
    assert doc["within"]["Conv"] == {"within": want["Conv"][0], "of": 2, "ideal": want["Conv"][2]}
    conv1 = next(g for g in doc["groups"] if g["name"] == "node 'conv1' (Conv)")
    least = traffic.of(["conv1", *(f.split("'")[1] for f in conv1["fused"])])
    assert least is not None and conv1["least"] == {"moved": least.moved, "macs": least.macs}
    assert conv1["least"]["macs"] == MACS1
    assert doc["total"]["least"]["macs"] == sum(r.least[1] for r in nodes if r.least)
    assert "ideal" not in session.roofline().to_json()["within"]["Conv"]  # no model given


def test_the_models_nodes_no_task_names_are_listed(tmp_path, capsys):
    """With `--onnx`, a node of the model that no task names (here an Abs of
    a constant, computed at compile time) is listed under the table and in
    the JSON's `nodes_without_tasks`, so every node is a row, fused into one
    or listed (an outside review, session 55: a Mul folded into a Softmax
    was named nowhere); a `.nem` program, whose tasks name no node, runs
    with a warning that `--onnx` is unused (it did nothing, silently)."""
    from nem.cli.nem_compile import nemb_bytes
    from nem.compile import compile_onnx

    proto = conv_bn_relu()
    onnx_path, nemb = tmp_path / "conv_bn.onnx", tmp_path / "conv_bn.nemb"
    onnx.save(proto, str(onnx_path))
    result = compile_onnx(str(onnx_path), device="npm_pro_x1", origins=True)
    nemb.write_bytes(nemb_bytes(result, str(nemb), str(onnx_path)))
    flags = ["--mode", "timed", "--roofline", "--onnx", str(onnx_path)]
    assert run([str(nemb), *flags, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["nodes_without_tasks"] == ["'var' (Abs)"]
    assert run([str(nemb), *flags]) == 0
    out = capsys.readouterr().out
    assert "no task names 1 node(s) of the model: 'var' (Abs);" in out
    assert "'bn' (BatchNormalization) fused into node 'conv1' (Conv)" in out
    assert "'relu1'" not in out.split("no task names")[1]
    text, weights = tmp_path / "conv_bn.nem", tmp_path / "conv_bn.weights.npz"
    plain = compile_onnx(str(onnx_path), device="npm_pro_x1")
    text.write_text(plain.nem)
    plain.save_weights(str(weights))
    assert run([str(text), "--input", str(weights), *flags]) == 0
    out, err = capsys.readouterr()
    assert f"warning: --onnx {onnx_path} is unused: no task of {text} names an ONNX node" in err
    assert "node(s) of the model" not in out


def test_a_model_with_a_function_op_is_the_programs(tmp_path, capsys):
    """A function op's body nodes (`celu/Div_1`) carry the user's op type in
    the program's locations, as in `--onnx`'s model read the same way: the
    model was refused as another one ("'celu/Div_1' (Celu) is a Div node
    there", a review, session 55)."""
    from nem.cli.nem_compile import nemb_bytes
    from nem.compile import compile_onnx

    nodes = [
        helper.make_node("Celu", ["x"], ["c"], name="celu", alpha=0.7),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    g = helper.make_graph(
        nodes,
        "fn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
    )
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx_path, nemb = tmp_path / "fn.onnx", tmp_path / "fn.nemb"
    onnx.save(proto, str(onnx_path))
    result = compile_onnx(str(onnx_path), device="npm_pro_x1", origins=True)
    nemb.write_bytes(nemb_bytes(result, str(nemb), str(onnx_path)))
    assert run([str(nemb), "--mode", "timed", "--roofline", "--onnx", str(onnx_path)]) == 0
    out, err = capsys.readouterr()
    assert "error" not in err and "(Celu) fused into node 'relu' (Relu)" in out
