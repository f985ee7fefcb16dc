"""The ONNX importer checked on its own (issue 16, item "an independent
reference path"): each model is imported to linalg on tensors, lowered by
upstream MLIR to LLVM and run with the ExecutionEngine
(`nem.compile.reference`), and compared with onnxruntime on the same seeded
inputs, within the per-dtype tolerances of `nem.compile.check`
(D-COMPILE-TOL: f32 1e-5 + 1e-4|ref|, f16 1e-2 + 1e-2|ref|).  Nothing of the
NEM lowering or runtime is involved.

Also: unsupported ops and attribute values are located errors (file, node
index and name, op type), never tracebacks."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from import_runs import case_id, check_model, check_single_op, reference_outputs  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nem.compile.check import max_violation, onnxruntime_run  # noqa: E402
from nem.compile.reference import execute  # noqa: E402
from nem.frontends.onnx import OnnxImportError, import_onnx, light_cnns, samples  # noqa: E402


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("name", sorted(samples.MODELS))
@pytest.mark.slow  # 4 s (8 cases)
def test_sample_models_match_onnxruntime(name, dtype):
    im = check_model(samples.MODELS[name](dtype))
    text = str(im.module)
    # weights are arguments, never giant constants in the IR
    assert "arith.constant dense" not in text
    assert len(im.weights) > 0


def test_interface_is_the_models():
    m = samples.cnn("f32")
    im = import_onnx(m)
    assert [(p.name, p.shape) for p in im.inputs] == [("x", (1, 3, 16, 16))]
    assert [(p.name, p.shape) for p in im.outputs] == [("logits", (1, 10))]
    text = str(im.module)
    # NCHW at the interface, NHWC inside: the convolution's operands
    assert "func.func @main(%x: tensor<1x3x16x16xf32>" in im.module.operation.get_asm(
        use_name_loc_as_prefix=True
    )
    assert "linalg.conv_2d_nhwc_hwcf" in text
    assert "tensor<1x16x16x3xf32>" in text or "tensor<1x18x18x3xf32>" in text


def test_a_folded_batchnorms_epsilon_is_read():
    """A BatchNormalization of epsilon 1e-3 folded into its Conv: the fold
    reads `epsilon` (an outside review, session 53: the importer refused it
    as an attribute it does not implement, D-COMPILE-ATTRS, though the fold
    had applied it; only the simplifier, folding first, hid that)."""
    rng = np.random.default_rng(4)

    def const(name, *shape, lo=-0.5):
        return helper.make_tensor(
            name, TensorProto.FLOAT, shape, rng.uniform(lo, 0.5, shape).astype(np.float32)
        )

    inits = [const("w", 6, 4, 3, 3), const("s", 6), const("b", 6), const("m", 6)]
    inits.append(const("v", 6, lo=0.001))  # a small variance: epsilon counts
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], name="bn", epsilon=1e-3
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 9, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    # without the simplifier, which folds the BatchNormalization itself
    im = import_onnx(model, simplify=False)
    assert str(im.module).count("linalg.conv_2d_nhwc_hwcf") == 1
    assert not any("bn" in name for name in im.weights)  # folded into the Conv's
    inputs = samples.random_inputs(model, 0)
    args = [inputs[p.onnx_name] for p in im.inputs] + list(im.weights.values())
    [got] = execute(str(im.module), im.func_name, args, [(p.shape, p.dtype) for p in im.outputs])
    assert max_violation(got, onnxruntime_run(model, inputs)["y"]) <= 1.0


def test_batchnorm_folded_into_conv():
    im = import_onnx(samples.cnn("f32"))
    text = str(im.module)
    assert text.count("linalg.conv_2d_nhwc_hwcf") == 2
    # no per-channel scale/shift left for the two folded batch norms
    assert not any("bn" in w for w in im.weights)
    # HWCF weights: conv1's [8, 3, 3, 3] OIHW stored as [3, 3, 3, 8]
    assert im.weights["conv1_w"].shape == (3, 3, 3, 8)


# --------------------------------------------------------------------------
# one op at a time

R = np.random.default_rng(11)


def w(*shape, scale=0.5):
    return R.uniform(-scale, scale, shape).astype(np.float32)


X4 = {"x": (1, 4, 9, 9)}
CASES = [
    ("Conv", X4, {"w": w(6, 4, 3, 3), "b": w(6)}, {"pads": [1, 1, 1, 1]}),
    ("Conv", X4, {"w": w(6, 4, 3, 3)}, {"strides": [2, 2], "pads": [0, 1, 2, 1]}),
    ("Conv", X4, {"w": w(6, 4, 3, 3)}, {"dilations": [2, 2]}),
    ("Conv", X4, {"w": w(8, 2, 3, 3), "b": w(8)}, {"group": 2, "pads": [1, 1, 1, 1]}),
    ("Conv", X4, {"w": w(4, 1, 3, 3)}, {"group": 4, "auto_pad": "SAME_UPPER"}),
    ("Conv", X4, {"w": w(5, 4, 2, 2)}, {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    (
        "BatchNormalization",
        X4,
        {"s": w(4) + 1, "b": w(4), "m": w(4), "v": np.abs(w(4)) + 0.5},
        {"epsilon": 1e-3},
    ),
    ("Relu", {"x": (3, 7)}, {}, {}),
    ("LeakyRelu", {"x": (3, 7)}, {}, {"alpha": 0.2}),
    (
        "Clip",
        {"x": (3, 7)},
        {"lo": np.array(-0.3, np.float32), "hi": np.array(0.4, np.float32)},
        {},
    ),
    ("Clip", {"x": (3, 7)}, {"lo": np.array(0.0, np.float32)}, {}),
    ("Sigmoid", {"x": (3, 7)}, {}, {}),
    ("Tanh", {"x": (3, 7)}, {}, {}),
    ("Gelu", {"x": (3, 7)}, {}, {}),
    ("Gelu", {"x": (3, 7)}, {}, {"approximate": "tanh"}),
    ("Add", {"x": (2, 3, 4), "y": (3, 1)}, {}, {}),
    ("Sub", {"x": (2, 3, 4)}, {"c": w(4)}, {}),
    ("Mul", {"x": (2, 3, 4)}, {"c": np.array(1.5, np.float32)}, {}),
    ("Div", {"x": (4,), "y": (2, 3, 1)}, {}, {}),
    ("MatMul", {"x": (5, 6)}, {"w": w(6, 7)}, {}),
    ("MatMul", {"x": (2, 5, 6), "y": (2, 6, 3)}, {}, {}),
    ("MatMul", {"x": (2, 1, 5, 6), "y": (3, 6, 4)}, {}, {}),
    ("MatMul", {"x": (6,), "y": (2, 6, 3)}, {}, {}),
    ("Gemm", {"x": (5, 6)}, {"w": w(7, 6), "c": w(7)}, {"transB": 1}),
    ("Gemm", {"x": (6, 5)}, {"w": w(6, 7), "c": w(5, 1)}, {"transA": 1, "alpha": 0.5, "beta": 2.0}),
    ("Gemm", {"x": (5, 6), "y": (6, 7)}, {}, {"alpha": 1.5}),
    ("MaxPool", X4, {}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", X4, {}, {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", X4, {}, {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ("AveragePool", X4, {}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", X4, {}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", X4, {}, {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("GlobalAveragePool", X4, {}, {}),
    ("GlobalMaxPool", X4, {}, {}),
    ("Flatten", {"x": (2, 3, 4, 5)}, {}, {"axis": 2}),
    ("Reshape", {"x": (2, 3, 4)}, {"s": np.array([0, -1, 2], np.int64)}, {}),
    ("Reshape", {"x": (2, 3, 4)}, {"s": np.array([4, 6], np.int64)}, {}),
    ("Transpose", {"x": (2, 3, 4)}, {}, {"perm": [2, 0, 1]}),
    ("Concat", {"x": (2, 3, 4), "y": (2, 5, 4)}, {}, {"axis": 1}),
    ("Softmax", {"x": (2, 3, 5)}, {}, {"axis": 1}),
    ("Softmax", {"x": (2, 3, 5)}, {}, {}),
    (
        "LayerNormalization",
        {"x": (2, 3, 5)},
        {"g": w(3, 5) + 1, "b": w(3, 5)},
        {"axis": 1, "epsilon": 1e-3},
    ),
    ("LayerNormalization", {"x": (2, 3, 5)}, {"g": w(5) + 1}, {}),
    # D-COMPILE-REDUCE (opset 20: the axes are an input)
    ("ReduceMean", {"x": (2, 3, 5)}, {"a": np.array([-1], np.int64)}, {}),
    ("ReduceSum", {"x": (2, 3, 5)}, {"a": np.array([0, 2], np.int64)}, {"keepdims": 0}),
    ("ReduceMax", X4, {"a": np.array([1], np.int64)}, {}),
    ("ReduceMax", X4, {"a": np.array([-1, 1], np.int64)}, {"keepdims": 0}),
    ("ReduceMin", X4, {"a": np.array([1, 2, 3], np.int64)}, {}),
    ("ReduceMin", {"x": (2, 3, 5)}, {}, {"keepdims": 0}),
    ("ReduceSum", {"x": (2, 3, 5)}, {}, {"noop_with_empty_axes": 1}),
    ("ReduceMin", {"x": (2, 3, 5)}, {}, {"noop_with_empty_axes": 1, "keepdims": 0}),
    ("Floor", {"x": (2, 3, 4)}, {}, {}),
    ("Ceil", {"x": (2, 3, 4)}, {}, {}),
    ("Round", {"x": (2, 3, 4)}, {}, {}),
    ("Pow", {"x": (2, 3, 4)}, {"c": np.array(2.0, np.float32)}, {}),
    ("Pow", {"x": (2, 3, 4)}, {"c": np.array([1.0, 2.0, 3.0, 4.0], np.float32)}, {}),
    # an integer exponent tensor (T1): an internal error, session 55
    ("Pow", {"x": (2, 3, 4)}, {"c": np.array([1, 2, 3, 2], np.int64)}, {}),
]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@pytest.mark.slow  # 17 s (100 cases)
def test_single_op(case, dtype):
    check_single_op(case, dtype)


@pytest.mark.parametrize("keepdims", [1, 0])
def test_reduction_of_a_channels_last_tensor(keepdims):
    """D-COMPILE-REDUCE: a reduction over the channel axis of a convolution's
    output, which the importer keeps in NHWC (physical) order: the logical
    axis maps to its physical dimension, and keepdims=0 reshapes."""
    g = samples.GraphBuilder("f32", seed=3)
    y = g.op("Conv", ["x", g.init("w", w(6, 4, 3, 3))], name="conv", pads=[1, 1, 1, 1])
    r = g.op(
        "ReduceMean",
        [y, g.init("a", np.array([1], np.int64), exact_dtype=True)],
        name="mean",
        keepdims=keepdims,
    )
    check_model(g.model("conv_mean", X4, {"out": r}))


@pytest.mark.parametrize(
    ("op", "axes"), [("ReduceMax", [-1, 1]), ("ReduceMin", [1, 2, 3]), ("GlobalMaxPool", None)]
)
def test_a_max_or_min_over_several_axes_reduces_one_axis_at_a_time(op, axes):
    """D-COMPILE-REDUCE (session 47): the lowering raises a max or min
    reduction to one task per point of its reduced axes, so over several
    axes the importer reduces one at a time (64 + 64 tasks for a
    GlobalMaxPool over 64x64, not 4,096: 79 s of nem-synthesize-deps and
    nem-verify before); a sum keeps one reduction over all its axes."""
    g = samples.GraphBuilder("f32", seed=5)
    inputs = [g.init("a", np.array(axes, np.int64), exact_dtype=True)] if axes else []
    r = g.op(op, ["x", *inputs], name="r")
    s = g.op(
        "ReduceSum", ["x", g.init("b", np.array([1, 3], np.int64), exact_dtype=True)], name="s"
    )
    im = check_model(g.model("reduce", X4, {"r": r, "s": s}))
    generics = [line for line in str(im.module).splitlines() if "iterator_types" in line]
    per_op = sorted(line.count('"reduction"') + line.count("reduction>") for line in generics)
    reduced = len(axes) if axes else 2
    assert per_op == [1] * reduced + [2], per_op


def test_layouts_compose_without_copies():
    """Conv -> Transpose -> Concat with a graph input in NHWC order: the
    transposes are layout changes; the result is still right."""
    g = samples.GraphBuilder("f32", seed=9)
    y = g.op("Conv", ["x", g.rand("cw", (4, 3, 1, 1))], name="c")
    t = g.op("Transpose", [y], name="t", perm=[0, 2, 3, 1])  # NHWC view
    z = g.op("Concat", [t, "h"], name="cat", axis=3)  # along channels
    r = g.op("Relu", [z], name="r")
    check_model(g.model("layouts", {"x": (1, 3, 5, 5), "h": (1, 5, 5, 2)}, {"y": r}))


# --------------------------------------------------------------------------
# located errors


def _error(model, **options) -> str:
    with pytest.raises(OnnxImportError) as e:
        import_onnx(model, file="m.onnx", **options)
    return e.value.render()


def test_unsupported_op_is_a_located_error():
    g = samples.GraphBuilder("f32")
    a = g.op("Relu", ["x"], name="first")
    b = g.op("Hardmax", [a], name="hm")
    text = _error(g.model("bad", {"x": (2, 3)}, {"y": b}))
    assert text.startswith("m.onnx: node 1 'hm' (Hardmax): error: not supported: op type Hardmax")
    assert "fix: express it with the supported op types (docs/compile.md" in text


def test_unsupported_attribute_value():
    m = samples.single_op("MaxPool", {"x": (1, 2, 4, 4)}, kernel_shape=[2, 2], storage_order=1)
    assert "node 0 'node' (MaxPool): error: not supported: storage_order=1" in _error(m)


@pytest.mark.parametrize("bias_at_run_time", [False, True])
def test_conv_bias_of_another_shape(bias_at_run_time):
    """Conv weights and bias may be computed at run time (test_onnx_ops); a
    bias that is not one value per output channel is a located error, an
    initializer's as a run-time one's (an initializer's was an MLIR
    verifier traceback: ONNX's checks pass the model)."""
    ins = {"x": (1, 2, 4), "w": (3, 2, 1)}
    consts = {} if bias_at_run_time else {"b": np.ones(4, np.float32)}
    m = samples.single_op("Conv", {**ins, "b": (4,)} if bias_at_run_time else ins, "f32", consts)
    assert "(Conv): error: bias of shape [4] does not match the 3 output channels" in _error(m)


def test_dynamic_shape():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "dyn", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    text = _error(m)
    assert "m.onnx: error: input 'x' has a dynamic dimension 'N'" in text
    assert "fix:" in text


def test_integer_input():
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [4])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [4])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "int", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    text = _error(m)  # int64 is i32 in the program (D-COMPILE-I64): no Relu of it
    assert "node 0 'Relu_0' (Relu): error: not supported: Relu of integer data ('x', i32)" in text
    # (no fix line before session 55; an outside user asked for one)
    assert "fix: Cast 'x' to FLOAT before the Relu (and back after it" in text
    text = _error(m, demote_i64=False)
    assert (
        "node 0 'Relu_0' (Relu): error: not supported: input 'x' (Relu's X) has element "
        "type INT64: NEM has no 64-bit integer type" in text
    )
    assert "\nfix: import with int64 demoted to int32 (the default, D-COMPILE-I64)" in text


@pytest.mark.parametrize("op", ["Add", "Max", "Where"])
@pytest.mark.parametrize("value", [3_000_000_000, 2**31, -(2**31) - 1, np.iinfo(np.int64).max])
def test_an_int64_scalar_outside_int32_is_a_located_error(op, value):
    """A one-element int64 constant inlined into an elementwise body is
    checked as a weight is (D-COMPILE-I64): `Add(idx, 3000000000)` wrapped to
    -1294967296 without a word, and int64's maximum (torch's sentinel) was an
    internal error (an outside user, session 55); within int32 it computes
    as onnxruntime does."""
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [5])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [5])
    inputs = ["idx", "c"]
    extra = []
    if op == "Where":
        inputs = ["m", "idx", "c"]
        extra = [helper.make_tensor_value_info("m", TensorProto.BOOL, [5])]
    c = helper.make_tensor("c", TensorProto.INT64, [], [int(value)])
    g = helper.make_graph([helper.make_node(op, inputs, ["y"])], "i64", [*extra, idx], [y], [c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    text = _error(m)
    assert (
        f"node 0 '{op}_0' ({op}): error: constant 'c' has int64 values outside int32's range"
        in text
    )
    assert "fix: the program holds int64 data as int32" in text
    m.graph.initializer[0].int64_data[:] = [2**31 - 5]  # Add's sums stay in int32
    inputs = {"idx": np.arange(5, dtype=np.int64)}
    if op == "Where":
        inputs["m"] = np.arange(5) % 2 == 0
    check_model(m, inputs=inputs)


@pytest.mark.parametrize("elem", ["INT8", "UINT8", "INT16"])
def test_narrow_input_type_is_named_as_the_importers_limit(elem):
    """An 8- or 16-bit integer input is refused because the importer computes
    FLOAT, FLOAT16 and INT32 tensors only; the message said "NEM buffers
    hold numbers of at most 32 bits, not INT8", which an 8-bit type is
    (an outside user's report, session 22).  A BOOL input is an i32 0/1
    buffer since session 27 (D-COMPILE-BOOL, test_onnx_logic.py)."""
    x = helper.make_tensor_value_info("x", getattr(TensorProto, elem), [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=1)], "n", [x], [y])
    text = _error(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]))
    assert (
        f"node 0 'Cast_0' (Cast): error: not supported: input 'x' (Cast's input) has element "
        f"type {elem}: the ONNX importer computes FLOAT, FLOAT16 and INT32 tensors only" in text
    )
    assert "at most 32 bits" not in text


def test_not_an_onnx_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00garbage\xff" * 10)
    with pytest.raises(OnnxImportError) as e:
        import_onnx(bad)
    assert "error: not an ONNX model" in e.value.render()


LONG_ROW = {"x": (1, 1, 64, 64)}  # 4096 elements: an f16 running sum of ~1s stalls at 2048


@pytest.mark.parametrize(
    "op, ins, consts",
    [
        ("GlobalAveragePool", LONG_ROW, {}),
        ("Softmax", {"x": (1, 4096)}, {}),
        ("LayerNormalization", {"x": (1, 4096)}, {"g": np.ones(4096, np.float16)}),
    ],
)
def test_f16_statistics_accumulate_in_f32(op, ins, consts):
    """D-COMPILE-F16: f16 softmax sums, layer norm statistics and global
    average pooling sums are computed in f32 and rounded once.  With 4096
    values just below 1, an f16 accumulator stops growing at 2048 (1 is below half
    its spacing there), so an f16 reduction gives a mean of about 0.5 and a
    softmax twice too large; the f32 one matches onnxruntime."""
    model = samples.single_op(op, ins, "f16", consts)
    shape = next(iter(ins.values()))
    rng = np.random.default_rng(0)
    x = (1.0 - rng.uniform(0, 0.01, size=shape)).astype(np.float16)
    if op == "LayerNormalization":  # a mean far from 0: f16 sums of x lose the variance
        x = (x + np.linspace(-0.5, 0.5, x.size).reshape(shape)).astype(np.float16)
    im, got = reference_outputs(model, {"x": x})
    want = onnxruntime_run(model, {"x": x})
    # relative: softmax's outputs (about 1/4096) are far below the f16 atol
    np.testing.assert_allclose(
        got["out"].astype(np.float32),
        want["out"].astype(np.float32),
        rtol=1e-2,
        atol=1e-3 * float(np.abs(want["out"]).max()),
    )


# --------------------------------------------------------------------------
# operand element types: one check for every op (Importer.check_operand_types)


def _mixed(op, ins, f16_input, **attrs):
    """A one-node model whose input `f16_input` is f16, the rest f32."""
    vis = [
        helper.make_tensor_value_info(
            k, TensorProto.FLOAT16 if k == f16_input else TensorProto.FLOAT, list(s)
        )
        for k, s in ins.items()
    ]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph(
        [helper.make_node(op, list(ins), ["y"], name="n", **attrs)], "mixed", vis, [out]
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    "op, ins, attrs",
    [
        ("Add", {"a": (3,), "b": (3,)}, {}),
        ("MatMul", {"a": (2, 3), "b": (3, 4)}, {}),
        ("Gemm", {"a": (2, 3), "b": (3, 4)}, {}),
        ("Concat", {"a": (2, 3), "b": (2, 3)}, {"axis": 0}),
    ],
)
def test_mixed_element_types_are_a_located_error(op, ins, attrs):
    """An invalid model whose operands of one ONNX type variable differ
    (f32 and f16) is the importer's located error, not MLIR's verifier
    failing as an internal error (outside report, finding 1)."""
    text = _error(_mixed(op, ins, "b", **attrs))
    assert text.startswith(
        f"m.onnx: node 0 'n' ({op}): error: inputs have different "
        "element types: 'a' f32, 'b' f16 (the ONNX schema of "
        f"{op} gives them one type T)"
    )
    assert "\nfix: make the model one element type throughout" in text


def test_mixed_constant_operand_is_a_located_error():
    """An f16 initializer added to an f32 activation: the same error."""
    g = samples.GraphBuilder("f32")
    y = g.op("Add", ["x", g.init("c", np.ones(3, np.float16), exact_dtype=True)], name="add")
    # built by hand: GraphBuilder.model runs the checker, which refuses it
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="y_id"))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = helper.make_model(
        helper.make_graph(g.nodes, "m", [x], [out], g.inits),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    assert (
        "node 0 'add' (Add): error: inputs have different element types: 'x' f32, "
        "'c' f16" in _error(m)
    )


def _relus(nodes, inputs=("x",)):
    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in inputs]
    out = [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])]
    graph = helper.make_graph(
        [helper.make_node("Relu", [i], [o]) for i, o in nodes], "m", value, out
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_cycle_is_the_importers_located_error():
    """Two Relus reading each other: onnxscript's optimizer ran out of
    memory on it (2.2 GB, then killed; an outside tester, session 66).  A
    graph with a node reading what no earlier node defines is not
    simplified, and the importer names the node."""
    text = _error(_relus([("b", "a"), ("a", "b")]))
    assert "node 0 'Relu_0' (Relu): error: input 'b' is not produced by any earlier node" in text


def test_two_graph_inputs_of_one_name_are_an_error():
    """Two graph inputs named `x`: the second was renamed, the Relu read
    it, and a run fed the first one: outputs of zeros, exit 0 (an outside
    tester, session 66)."""
    text = _error(_relus([("x", "b")], inputs=("x", "x")))
    assert "graph input 'x' is declared twice" in text, text


def test_more_inputs_than_the_schema_takes_are_a_located_error():
    """ReduceMean at opset 17 takes its axes as an attribute: given them as a
    second input (invalid ONNX: ReduceMean-18's form at opset 17), the error
    says so (an outside user, session 66, read "inputs have different
    element types: 'x' f32, 'ax' i32" and "make the model one element type
    throughout")."""
    ax = numpy_helper.from_array(np.array([-1], np.int64), "ax")
    node = helper.make_node("ReduceMean", ["x", "ax"], ["y"], name="rm", keepdims=0)
    m = helper.make_model(
        helper.make_graph(
            [node],
            "m",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
            [ax],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    text = _error(m)
    assert text.startswith(
        "m.onnx: node 0 'rm' (ReduceMean): error: ReduceMean takes at most 1 input(s) at the "
        "model's opset 17 (its schema of opset 13); the node has 2"
    ), text
    assert "different element types" not in text


@pytest.mark.parametrize("dtype, exp_dtype", [("f16", np.float32), ("f32", np.float16)])
def test_pow_exponent_may_have_another_float_type(dtype, exp_dtype):
    """Negative case: Pow's exponent is T1 in ONNX, not T; a tensor of the
    other float type is valid and computed right."""
    g = samples.GraphBuilder(dtype, seed=3)
    e = g.init("e", np.array([1.0, 2.0, 3.0, 0.5], exp_dtype), exact_dtype=True)
    check_model(g.model("pow", {"x": (2, 4)}, {"out": g.op("Pow", ["x", e], name="p")}))


@pytest.mark.parametrize(
    "dtype, k",
    [("f32", np.array(3.0, np.float32)), ("f32", np.array(2, np.int64)), ("f16", np.array(3.0))],
)
def test_pow_by_two_or_three_runs_as_nem_multiplies(dtype, k):
    """D-COMPILE-POW-SMALL: the tanh GELU's `x + 0.044715 * x ** 3` ran
    wholly as escape-hatch kernels ('math.powf' with a constant operand:
    0.0% of its FLOPs as NEM opcodes, an outside user, session 62); as
    products it is all NEM `mul`/`add`, and f32 equals onnxruntime's
    (which multiplies too) exactly, at infinities, NaN and -0 too."""
    from compile_runs import run_compiled

    from nem.compile import compile_onnx

    np_dtype = np.float16 if dtype == "f16" else np.float32
    g = samples.GraphBuilder(dtype, seed=3)
    e = g.init("k", k.astype(np_dtype) if k.dtype.kind == "f" else k, exact_dtype=True)
    c = g.init("c", np.array(0.044715, np_dtype), exact_dtype=True)
    cubed = g.op("Pow", ["x", e], name="pow")
    y = g.op("Add", ["x", g.op("Mul", [cubed, c], name="mul")], name="add")
    model = g.model("gelu_cube", {"x": (2, 5, 7)}, {"y": y})
    result = compile_onnx(model, device="npm_pro_x1")
    assert result.flops is not None and result.flops.escaped == 0, result.flops
    x = (np.random.default_rng(1).standard_normal((2, 5, 7)) * 3).astype(np_dtype)
    x.flat[:4] = [np.inf, -np.inf, np.nan, -0.0]
    it, _ = run_compiled(result, model, "npm_pro_x1", inputs={"x": x})
    name, shape, out_dtype = result.interface.outputs[0]
    got = it.read_tensor(name, shape, out_dtype)
    want = onnxruntime_run(model, {"x": x})["y"]
    if dtype == "f32":
        assert np.array_equal(got, want, equal_nan=True)
    assert max_violation(got, want) <= 1.0


# --------------------------------------------------------------------------
# Constant's attribute forms


def test_constant_scalar_and_list_forms():
    """Constant `value_float(s)` (f32) and `value_int(s)` (i64) are tensors
    as `value` is (outside report, finding 4): a scalar scale, a bias row,
    a Reshape shape, and an unused integer scalar."""
    nodes = [
        helper.make_node("Constant", [], ["k"], name="k", value_float=0.5),
        helper.make_node("Mul", ["x", "k"], ["t"], name="mul"),
        helper.make_node("Constant", [], ["d"], name="d", value_floats=[1.0, 2.0, 3.0, 4.0]),
        helper.make_node("Add", ["t", "d"], ["u"], name="add"),
        helper.make_node("Constant", [], ["s"], name="s", value_ints=[4, 2]),
        helper.make_node("Reshape", ["u", "s"], ["y"], name="reshape"),
        helper.make_node("Constant", [], ["i"], name="i", value_int=3),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 2])
    m = helper.make_model(
        helper.make_graph(nodes, "consts", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    onnx.checker.check_model(m, full_check=True)
    im = check_model(m)
    assert [a.tolist() for a in im.weights.values()] == [[1.0, 2.0, 3.0, 4.0]]


@pytest.mark.parametrize(
    "attr, value",
    [
        ("value_string", "s"),
        ("value_strings", ["a", "b"]),
        (
            "sparse_value",
            helper.make_sparse_tensor(
                helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
                helper.make_tensor("i", TensorProto.INT64, [1], [0]),
                [3],
            ),
        ),
    ],
)
def test_constant_forms_without_a_nem_form_are_located_errors(attr, value):
    node = helper.make_node("Constant", [], ["c"], name="c", **{attr: value})
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    g = helper.make_graph([node, helper.make_node("Relu", ["x"], ["y"], name="r")], "c", [x], [y])
    # the graph simplifier removes unused string constants: without it, the converter says why
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    text = _error(model, simplify=False)
    assert text.startswith(
        f"m.onnx: node 0 'c' (Constant): error: not supported: Constant "
        f"with attribute '{attr}' (the importer takes 'value', "
        "'value_float', 'value_floats', 'value_int', 'value_ints')"
    )
    assert "\nfix: " in text


# --------------------------------------------------------------------------
# every unsupported node in one run (D-COMPILE-DIAG)


def test_every_unsupported_node_is_listed_once():
    """Three unsupported nodes along one chain, like a linker's undefined
    symbols: each with its index, name, op type and why; the nodes between
    and after them are still converted (placeholders of the inferred
    shapes), and a node that only reads a failed node's output adds no
    error of its own."""
    g = samples.GraphBuilder("f32")
    a = g.op("Hardmax", ["x"], name="hm")  # node 0: no converter
    b = g.op("Relu", [a], name="ok1")
    c = g.op("MaxPool", [b], name="pool", kernel_shape=[2], storage_order=1)  # attribute
    d = g.op("Relu", [c], name="ok2")
    e = g.op("LpNormalization", [d], name="lpn")  # node 4: no converter
    text = _error(g.model("many", {"x": (1, 2, 6)}, {"y": e}))
    lines = text.splitlines()
    assert lines[0] == "m.onnx: node 0 'hm' (Hardmax): error: not supported: op type Hardmax"
    assert "m.onnx: node 2 'pool' (MaxPool): error: not supported: storage_order=1" in lines
    assert (
        "m.onnx: node 4 'lpn' (LpNormalization): error: not supported: op type LpNormalization"
        in lines
    )
    assert lines[-2] == "m.onnx: error: 3 nodes cannot be imported, 3 errors above"
    # op types first: the Relus (which a rewrite could fuse) are not checked
    # in this run (D-COMPILE-EARLY-UNSUPPORTED)
    assert lines[-1].startswith("note: the graph was not simplified")
    assert text.count("error:") == 4


def test_a_failed_node_without_inferred_shape_skips_its_users():
    """A node whose output ONNX cannot shape has no placeholder: the nodes
    reading it are skipped (their problems may only be the first one's)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Custom", ["x"], ["t"], name="c", domain="my.ops"),
        helper.make_node("Relu", ["t"], ["r"], name="relu"),
        helper.make_node("Hardmax", ["r"], ["y"], name="hm"),
    ]
    m = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1)],
    )
    text = _error(m, simplify=False)
    assert "node 0 'c' (Custom): error: not supported: operator domain 'my.ops'" in text
    assert "'relu'" not in text  # skipped
    # an unknown op type is reported even after a failed input: no converter needed
    assert "node 2 'hm' (Hardmax): error: not supported: op type Hardmax" in text
    assert (
        "m.onnx: error: 2 nodes cannot be imported, 2 errors above\nnote: "
        "onnx.checker.check_model rejects the model: Field 'shape'" in text
    )


# --------------------------------------------------------------------------
# the nine CNNs shipped with onnx import as shipped (issue 30, D-COMPILE-SIMPLIFY)

LIGHT = (
    light_cnns.NAMES
    if __import__("os").environ.get("NEM_ONNX_BACKEND") == "full"
    else ("squeezenet", "shufflenet", "inception_v1", "resnet50", "densenet121")
)
"""The smaller five by default (a few seconds); all nine with NEM_ONNX_BACKEND=full
(VGG-19's 575 MB of weights take 5 s and 3 GB)."""


@pytest.mark.parametrize("name", LIGHT)
@pytest.mark.slow  # 18 s (5 cases)
def test_light_models_import_as_shipped(name):
    """Opset 9, weights built by ConstantOfShape, initializers listed as
    inputs, LRN, n-ary Sum: imported without any manual step; the input and
    output keep their names."""
    path = str(light_cnns.path(name))
    model = onnx.load(path)
    im = import_onnx(path)
    inits = {i.name for i in model.graph.initializer}
    assert [p.onnx_name for p in im.inputs] == [
        i.name for i in model.graph.input if i.name not in inits
    ]
    assert [p.onnx_name for p in im.outputs] == [o.name for o in model.graph.output]
    assert "opset 9 upgraded to 17 (onnx version converter)" in im.notes
    text = str(im.module)
    assert "linalg.conv_2d_nhwc_hwcf" in text and len(im.weights) > 20


def test_a_float64_constant_beyond_float32_is_a_located_error():
    """f64 is computed in f32 (D-COMPILE-F64): a finite constant beyond f32's
    range is an error naming it, as in an input, not an infinity (an outside
    user's `(1 - mask) * finfo(float64).min` was -inf, and 0 * -inf made every
    softmax output NaN, session 55); within f32's range it computes."""
    m = helper.make_tensor_value_info("m", TensorProto.DOUBLE, [3])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3])
    nodes = [
        helper.make_node("Sub", ["one", "m"], ["k"]),
        helper.make_node("Mul", ["k", "fill"], ["y"]),
    ]

    def model(fill):
        inits = [
            helper.make_tensor("one", TensorProto.DOUBLE, [], [1.0]),
            helper.make_tensor("fill", TensorProto.DOUBLE, [], [fill]),
        ]
        g = helper.make_graph(nodes, "mask", [m], [y], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    text = _error(model(float(np.finfo(np.float64).min)))
    assert (
        "node 1 'Mul_1' (Mul): error: constant 'fill' (float64) holds -1.79769e+308, beyond "
        "float32's range" in text
    )  # (at its reader: the initializer is read before any node, session 55's review)
    assert "fix: use a value within float32's range" in text
    check_model(model(-1e30), inputs={"m": np.array([1.0, 0.0, 1.0])})
