"""ONNX Slice and Split (D-COMPILE-SLICE): each form imported and checked
against onnxruntime on the importer's reference path (no NEM involved),
graphs with slices compiled by nem-compile on both routes and run
(`run_api`: verified, two random schedules, D-COMPILE-TOL), and the
located diagnostics of the forms that are not supported."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from compile_runs import run_api  # noqa: E402
from import_runs import check_model  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nem.compile import CompileError, compile_onnx  # noqa: E402
from nem.frontends.onnx import OnnxImportError, import_onnx, samples  # noqa: E402

INT_MAX = 2**63 - 1


def i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def at_opset(
    opset: int, op: str, x_shape, inits: dict[str, np.ndarray], n_out: int = 1, **attrs
) -> onnx.ModelProto:
    """One `op` node on input `x` (f32) and the initializers `inits`, in a
    model of default-domain opset `opset` (older forms than the samples')."""
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, ["x", *inits], outs, name="node", **attrs)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))
    graph = helper.make_graph(
        [node], op.lower(), [x], [], [numpy_helper.from_array(a, k) for k, a in inits.items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    model.graph.output.extend(v for v in inferred.graph.value_info if v.name in outs)
    onnx.checker.check_model(model, full_check=True)
    return model


# --------------------------------------------------------------------------
# every form on the reference path


FORMS = {
    # negative starts, an INT_MAX end, steps, axes out of order
    "slice-steps": lambda: samples.single_op(
        "Slice",
        {"x": (3, 5, 9)},
        "f32",
        {"st": i64(-8, 1), "en": i64(INT_MAX, -1), "ax": i64(2, 0), "sp": i64(3, 1)},
    ),
    "slice-no-axes-steps": lambda: samples.single_op(
        "Slice", {"x": (4, 6)}, "f32", {"st": i64(1, -4), "en": i64(-1, 100)}
    ),
    "slice-f16": lambda: samples.single_op(
        "Slice", {"x": (2, 8)}, "f16", {"st": i64(1), "en": i64(8), "ax": i64(-1), "sp": i64(2)}
    ),
    # negative steps: ONNX's clamping (starts past the end, ends before
    # the start), a step of -3, two reversed axes and a positive one
    "slice-negative-steps": lambda: samples.single_op(
        "Slice",
        {"x": (3, 5, 9)},
        "f32",
        {
            "st": i64(100, -2, 1),
            "en": i64(-INT_MAX, 0, 8),
            "ax": i64(0, 2, 1),
            "sp": i64(-1, -3, 2),
        },
    ),
    "slice-negative-step-f16": lambda: samples.single_op(
        "Slice", {"x": (2, 8)}, "f16", {"st": i64(-1), "en": i64(-9), "ax": i64(1), "sp": i64(-1)}
    ),
    "slice-opset9-attrs": lambda: at_opset(
        9, "Slice", (4, 6), {}, starts=[-3, 1], ends=[INT_MAX, 4], axes=[0, 1]
    ),
    "split-input": lambda: at_opset(20, "Split", (2, 7), {"s": i64(2, 5)}, n_out=2, axis=1),
    "split-opset11-attr": lambda: at_opset(
        11, "Split", (6, 4), {}, n_out=3, axis=0, split=[1, 3, 2]
    ),
    "split-opset13-even": lambda: at_opset(13, "Split", (2, 6), {}, n_out=3, axis=-1),
    "split-opset18-num-outputs": lambda: at_opset(18, "Split", (7, 3), {}, n_out=3, num_outputs=3),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_form_matches_onnxruntime(form):
    check_model(FORMS[form]())


def test_slice_of_a_weight_is_a_weight():
    """A Slice of an initializer is folded at import: Conv needs its
    weights at compile time, and the program gets only the used part."""
    g = samples.GraphBuilder("f32", seed=1)
    w = g.op(
        "Slice",
        [g.rand("w", (8, 3, 3, 3)), g.init("st", i64(2), True), g.init("en", i64(8), True)],
        name="wsl",
    )
    y = g.op("Conv", ["x", w], name="conv", pads=[1, 1, 1, 1])
    im = check_model(g.model("wslice", {"x": (1, 3, 6, 6)}, {"y": y}))
    assert [a.shape for a in im.weights.values()] == [(3, 3, 3, 6)]  # HWCF


# --------------------------------------------------------------------------
# compiled and run


def slice_conv_add() -> onnx.ModelProto:
    """Slice of an NCHW input (negative start and end, steps 2 on H and W)
    feeding a Conv and an Add of the slice itself (1x1 conv: same shape)."""
    g = samples.GraphBuilder("f32", seed=7)
    s = g.op(
        "Slice",
        [
            "x",
            g.init("st", i64(-11, 1), True),
            g.init("en", i64(-1, INT_MAX), True),
            g.init("ax", i64(2, 3), True),
            g.init("sp", i64(2, 2), True),
        ],
        name="sl",
    )
    y = g.op("Conv", [s, g.rand("w", (4, 4, 1, 1), 0.5)], name="conv")
    return g.model("slice_conv", {"x": (1, 4, 12, 11)}, {"y": g.op("Add", [y, s], name="add")})


def reversed_channels() -> onnx.ModelProto:
    """An RGB -> BGR flip (Slice with step -1 on the channels) feeding a
    Conv, and every other row reversed feeding an Add: the reversed axes
    are copies, what feeds them a view."""
    g = samples.GraphBuilder("f32", seed=10)
    bgr = g.op(
        "Slice",
        [
            "x",
            g.init("st", i64(-1), True),
            g.init("en", i64(-INT_MAX), True),
            g.init("ax", i64(1), True),
            g.init("sp", i64(-1), True),
        ],
        name="bgr",
    )
    y = g.op("Conv", [bgr, g.rand("w", (4, 3, 3, 3), 0.3)], name="conv", pads=[1, 1, 1, 1])
    rows = g.op(
        "Slice",
        [
            y,
            g.init("st2", i64(6), True),
            g.init("en2", i64(-INT_MAX), True),
            g.init("ax2", i64(2), True),
            g.init("sp2", i64(-2), True),
        ],
        name="rows",
    )
    return g.model(
        "reversed",
        {"x": (1, 3, 7, 5)},
        {"y": g.op("Add", [rows, g.rand("b", (1, 4, 4, 5), 0.5)], name="add")},
    )


def split_concat() -> onnx.ModelProto:
    """A Conv's 10 channels split 2/5/3, each part through a different op,
    concatenated again."""
    g = samples.GraphBuilder("f32", seed=8)
    c = g.op("Conv", ["x", g.rand("w", (10, 3, 3, 3), 0.3)], name="conv", pads=[1, 1, 1, 1])
    a = g.op("Split", [c, g.init("sz", i64(2, 5, 3), True)], n_out=3, name="sp", axis=1)
    parts = [
        g.op("Relu", [a], name="relu"),
        g.op("Sigmoid", ["sp_out1"], name="sig"),
        g.op("Conv", ["sp_out2", g.rand("w2", (4, 3, 1, 1), 0.3)], name="conv2"),
    ]
    return g.model(
        "split_concat", {"x": (1, 3, 8, 8)}, {"y": g.op("Concat", parts, name="cat", axis=1)}
    )


def qkv_attention(seq: int = 8, dim: int = 16) -> onnx.ModelProto:
    """A transformer's fused projection: one MatMul to 3*dim, split along
    the last axis (`num_outputs`) into q, k and v."""
    g = samples.GraphBuilder("f32", seed=9)
    h = g.op("MatMul", ["x", g.rand("wqkv", (dim, 3 * dim), dim**-0.5)], name="qkv")
    q = g.op("Split", [h], n_out=3, name="sp", axis=-1, num_outputs=3)
    kt = g.op("Transpose", ["sp_out1"], name="kt", perm=[0, 2, 1])
    p = g.op("Softmax", [g.op("MatMul", [q, kt], name="scores")], name="attn", axis=-1)
    return g.model("qkv", {"x": (1, seq, dim)}, {"y": g.op("MatMul", [p, "sp_out2"], name="ctx")})


@pytest.mark.parametrize("route", ["affine", "transform"])
@pytest.mark.parametrize("build", [slice_conv_add, split_concat, qkv_attention, reversed_channels])
@pytest.mark.slow  # 30 s (8 cases)
def test_end_to_end(build, route):
    run_api(build(), route=route)


def test_split_end_to_end_on_npm_lite():
    run_api(split_concat(), device="npm_lite")


@pytest.mark.parametrize("route", ["affine", "transform"])
def test_a_slice_is_a_strided_view(route):
    """A Slice that is a model output costs one strided transfer into the
    output: the slice itself is a view of the input's buffer."""
    m = samples.single_op(
        "Slice",
        {"x": (2, 5, 7)},
        "f32",
        {"st": i64(1, 0), "en": i64(6, -2), "ax": i64(1, 2), "sp": i64(3, 2)},
    )
    nem = run_api(m, route=route).nem
    assert nem.count("transfer") == 1 and "mlir.kernel" not in nem
    assert "src=region(x, 28, 244) elem=f32, shape=[2, 2, 3], strides=[35, 21, 2]" in nem


# --------------------------------------------------------------------------
# located errors


def _error(model, **options) -> str:
    with pytest.raises(OnnxImportError) as e:
        import_onnx(model, file="m.onnx", **options)
    return e.value.render()


def test_long_negative_step():
    """A negative step is one copy per element of the axis: more than
    MAX_REVERSED elements are a located error."""
    m = samples.single_op(
        "Slice",
        {"x": (2, 600)},
        "f32",
        {"st": i64(-1), "en": i64(-INT_MAX), "ax": i64(1), "sp": i64(-2)},
    )
    text = _error(m)
    assert (
        "m.onnx: node 0 'node' (Slice): error: not supported: Slice with a negative "
        "step selecting more than 256 elements of an axis (shape [2, 300])" in text
    )
    assert "\nfix: reverse a shorter axis" in text


def test_empty_slice():
    """An empty slice inside the graph (concatenated to a nonempty tensor)
    is removed by the graph simplifier (D-COMPILE-SIMPLIFY); without it, it
    is located at the Slice, and so is an empty model output."""
    g = samples.GraphBuilder("f32")
    s = g.op(
        "Slice",
        ["x", g.init("st", i64(4), True), g.init("en", i64(2), True), g.init("ax", i64(1), True)],
        name="cut",
    )
    model = g.model("empty", {"x": (2, 6)}, {"y": g.op("Concat", ["x", s], name="cat", axis=1)})
    check_model(model)
    text = _error(model, simplify=False)
    assert (
        "node 0 'cut' (Slice): error: not supported: Slice with an empty result (axis 1: "
        "[4:2:1] of 6)" in text
    )
    m = samples.single_op("Slice", {"x": (2, 6)}, "f32", {"st": i64(4), "en": i64(2), "ax": i64(1)})
    text = _error(m)
    assert "m.onnx: node 0 'node' (Slice): error: not supported: Slice with an empty result" in text


@pytest.mark.parametrize("op", ["Slice", "Split"])
def test_indices_from_a_graph_input(op):
    """An index operand fed at run time is located at the node reading it,
    with the fix of binding it at compile time (D-COMPILE-BIND)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])
    i = helper.make_tensor_value_info("i", TensorProto.INT64, [1])
    if op == "Slice":
        node = helper.make_node(op, ["x", "i", "e"], ["y"], name="cut")
    else:
        node = helper.make_node(op, ["x", "i"], ["y"], name="cut", axis=0)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "dyn", [x, i], [y], [numpy_helper.from_array(i64(3), "e")])
    text = _error(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    formal = "starts" if op == "Slice" else "split"
    assert (
        f"m.onnx: node 0 'cut' ({op}): error: not supported: {op} {formal} 'i' computed "
        "at run time" in text
    )
    assert "\nfix: bind 'i' at compile time (nem-compile --bind i=VALUES" in text
    text = _error(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), demote_i64=False
    )
    assert (
        f"m.onnx: node 0 'cut' ({op}): error: not supported: input 'i' ({op}'s {formal}) "
        "has element type INT64" in text
    )
    assert "\nfix: bind 'i' at compile time (nem-compile --bind i=VALUES" in text


def test_compile_error_is_the_diagnostic():
    """`compile_onnx` (what nem-compile runs) reports the importer's
    diagnostic as a CompileError of the import stage."""
    m = samples.single_op("Slice", {"x": (2, 6)}, "f32", {"st": i64(4), "en": i64(2), "ax": i64(1)})
    with pytest.raises(CompileError) as e:
        compile_onnx(m, device="npm_pro_x1")
    assert e.value.stage == "import"
    assert (
        "(Slice): error: not supported: Slice with an empty result (axis 1: [4:2:1] of 6)"
        in str(e.value)
    )
