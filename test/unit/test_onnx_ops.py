"""The converters of issue 32, each checked on its own against onnxruntime
through the importer's reference path (`import_runs.check_model`: linalg
lowered by upstream MLIR and run by the ExecutionEngine; nothing of the NEM
lowering), f32 and f16, at D-COMPILE-TOL; near misses of each attribute
(strides, pads, groups, negative axes and indices, modes)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from import_runs import case_id, check_model, check_single_op, reference_outputs  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nem.compile.check import max_violation  # noqa: E402
from nem.frontends.onnx import samples  # noqa: E402

R = np.random.default_rng(32)


def w(*shape, scale=0.5):
    return R.uniform(-scale, scale, shape).astype(np.float32)


def i64(*v):
    return np.array(v, np.int64)


X3 = {"x": (2, 3, 7)}
X4 = {"x": (1, 4, 6, 5)}
X5 = {"x": (1, 2, 5, 6, 4)}
CASES = [
    # activations (D-COMPILE-ACT)
    ("PRelu", X4, {"s": w(4, 1, 1)}, {}),
    ("PRelu", X4, {"s": w(5)}, {}),
    ("PRelu", X4, {"s": np.array([0.25], np.float32)}, {}),
    ("Elu", X4, {}, {"alpha": 0.7}),
    ("Selu", X4, {}, {}),
    ("Softplus", {"x": (3, 40)}, {}, {}),
    ("Softsign", X4, {}, {}),
    ("HardSigmoid", X4, {}, {"alpha": 0.3, "beta": 0.4}),
    ("HardSwish", X4, {}, {}),
    ("Sign", X4, {}, {}),
    ("Shrink", X4, {}, {"lambd": 0.3, "bias": 0.1}),
    ("Shrink", X4, {}, {}),
    ("ThresholdedRelu", X4, {}, {"alpha": 0.3}),
    ("Reciprocal", X4, {}, {}),
    ("Sum", {"x": (2, 3, 4), "y": (3, 4), "z": (2, 1, 4)}, {}, {}),
    ("Max", {"x": (2, 3, 4), "y": (3, 4), "z": (2, 1, 4)}, {}, {}),
    ("Min", {"x": (2, 3, 4)}, {"c": w(4)}, {}),
    ("Mean", {"x": (2, 3, 4), "y": (3, 4), "z": (2, 1, 4)}, {}, {}),
    ("Sum", {"x": (2, 3)}, {}, {}),
    # data movement (D-COMPILE-SHAPES)
    ("Unsqueeze", X3, {"a": i64(0, -1)}, {}),
    ("Unsqueeze", X3, {"a": i64(2)}, {}),
    ("Squeeze", {"x": (2, 1, 7, 1)}, {"a": i64(1, -1)}, {}),
    ("Squeeze", {"x": (2, 1, 7, 1)}, {}, {}),
    ("Tile", X3, {"r": i64(2, 1, 3)}, {}),
    ("Expand", {"x": (3, 1)}, {"s": i64(2, 3, 4)}, {}),
    ("Expand", {"x": (1, 4)}, {"s": i64(3, 1)}, {}),
    ("Gather", X3, {"i": i64(0, 2)}, {"axis": 1}),
    ("Gather", X3, {"i": i64(6, 0, -1, 3)}, {"axis": -1}),
    ("Gather", X3, {"i": np.array(1, np.int64)}, {"axis": 0}),
    ("Gather", X3, {"i": i64(1, 3, 5)}, {"axis": 2}),
    ("Gather", X3, {"i": np.array([[0, 1], [2, 0]], np.int64)}, {"axis": 1}),
    ("Pad", X4, {"p": i64(0, 1, 2, 0, 0, 2, 1, 3)}, {}),
    ("Pad", X4, {"p": i64(0, 0, 2, 1, 0, 0, 1, 3), "v": np.array(1.5, np.float32)}, {}),
    ("Pad", X4, {"p": i64(0, 0, 2, 1, 0, 0, 3, 3)}, {"mode": "reflect"}),
    ("Pad", X4, {"p": i64(0, 0, 2, 1, 0, 0, 1, 3)}, {"mode": "edge"}),
    ("Pad", X4, {"p": i64(0, 0, -1, 2, 0, 0, 1, -2)}, {}),
    # convolutions (D-COMPILE-CONV-ND)
    ("Conv", X3, {"w": w(5, 3, 3), "b": w(5)}, {"pads": [1, 2], "strides": [2]}),
    ("Conv", X3, {"w": w(6, 1, 2)}, {"group": 3, "dilations": [2]}),
    (
        "Conv",
        X5,
        {"w": w(3, 2, 2, 3, 2), "b": w(3)},
        {"pads": [1, 0, 1, 0, 1, 1], "strides": [2, 1, 2]},
    ),
    ("Conv", X5, {"w": w(4, 1, 3, 2, 2)}, {"group": 2, "dilations": [2, 1, 2]}),
    (
        "ConvTranspose",
        X4,
        {"w": w(4, 3, 3, 3), "b": w(3)},
        {"strides": [3, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
    ),
    ("ConvTranspose", X4, {"w": w(4, 2, 2, 3)}, {"group": 2, "dilations": [2, 1]}),
    ("ConvTranspose", X4, {"w": w(4, 2, 3, 3)}, {"strides": [2, 2], "pads": [2, 0, 1, 3]}),
    (
        "ConvTranspose",
        X4,
        {"w": w(4, 2, 3, 3)},
        {"strides": [2, 2], "output_shape": [12, 10], "auto_pad": "SAME_UPPER"},
    ),
    ("ConvTranspose", X3, {"w": w(3, 2, 4)}, {"strides": [2]}),
    # an output_shape past the convolution (18 x 11): its last rows are the bias
    # (an outside user's F5, session 8: refused before)
    (
        "ConvTranspose",
        X4,
        {"w": w(4, 2, 3, 3), "b": w(2)},
        {"strides": [3, 2], "output_shape": [20, 12]},
    ),
    # pooling (D-COMPILE-CONV-ND)
    ("MaxPool", X3, {}, {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ("AveragePool", X3, {}, {"kernel_shape": [2], "strides": [2], "ceil_mode": 1}),
    (
        "MaxPool",
        X5,
        {},
        {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2], "pads": [1, 1, 0, 0, 1, 1]},
    ),
    (
        "AveragePool",
        X5,
        {},
        {"kernel_shape": [3, 2, 2], "strides": [1, 2, 2], "pads": [1, 0, 1, 1, 0, 1]},
    ),
    (
        "AveragePool",
        X5,
        {},
        {"kernel_shape": [3, 2, 2], "pads": [1, 0, 1, 1, 0, 1], "count_include_pad": 1},
    ),
    # normalizations
    ("LogSoftmax", X3, {}, {}),
    ("LogSoftmax", X3, {}, {"axis": 1}),
    ("InstanceNormalization", X4, {"s": w(4) + 1, "b": w(4)}, {"epsilon": 1e-3}),
    ("InstanceNormalization", X5, {"s": w(2) + 1, "b": w(2)}, {}),
    ("LRN", X4, {}, {"size": 3}),
    ("LRN", X4, {}, {"size": 5, "alpha": 1e-2, "beta": 0.6, "bias": 2.0}),
    # 3-D ConvTranspose: one 2-D convolution per kernel depth of the
    # stride-dilated input (refused before session 9)
    (
        "ConvTranspose",
        X5,
        {"w": w(2, 3, 2, 3, 2), "b": w(3)},
        {"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1], "output_padding": [1, 0, 1]},
    ),
    (
        "ConvTranspose",
        {"x": (2, 4, 3, 3, 2)},
        {"w": w(4, 1, 2, 2, 3)},
        {"group": 2, "dilations": [2, 1, 2], "strides": [1, 2, 1]},
    ),
    (
        "ConvTranspose",
        X5,
        {"w": w(2, 2, 3, 3, 3)},
        {"strides": [2, 2, 2], "auto_pad": "SAME_UPPER"},
    ),
    (
        "ConvTranspose",
        X5,
        {"w": w(2, 2, 2, 2, 2)},
        {"strides": [3, 2, 2], "output_shape": [15, 13, 9]},
    ),
]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@pytest.mark.slow  # 32 s (110 cases)
def test_single_op(case, dtype):
    check_single_op(case, dtype)


@pytest.mark.parametrize(
    "pads", [(0, 0, 2, 1, 0, 0, 1, 3), (0, 0, 7, 0, 0, 0, 0, 12), (0, 1, -1, 2, 0, 0, 1, -2)]
)
def test_pad_wrap(pads):
    """Pad mode `wrap` (opset 19): the rows of the other end, round and round
    when the padding is longer than the axis, after negative pads crop
    (graph fuzz campaign seed 7373, m30: refused before)."""
    model = samples.single_op("Pad", X4, "f32", {"p": i64(*pads)}, mode="wrap")
    model.opset_import[0].version = 19
    check_model(model)


@pytest.mark.parametrize("group", [1, 3])
def test_conv_weights_computed_at_run_time(group):
    """Conv whose weights are a graph input, not an initializer: transposed
    in the program (graph fuzz campaign seed 7373, m55 and m82: refused
    before)."""
    conv = helper.make_node(
        "Conv", ["x", "w"], ["y"], group=group, pads=[1, 0, 1, 2], strides=[2, 1], dilations=[1, 2]
    )
    f = 6
    model = _typed_model(
        [conv],
        {"x": (TensorProto.FLOAT, [1, 3, 7, 6]), "w": (TensorProto.FLOAT, [f, 3 // group, 3, 2])},
        {"y": (TensorProto.FLOAT, [1, f, 4, 6])},
    )
    check_model(model)


RUN_TIME_CONVS = [  # weights (and bias) as graph inputs: computed at run time
    (
        "Conv",
        {"x": (2, 4, 7), "w": (6, 2, 3), "b": (6,)},
        {},
        {"group": 2, "pads": [1, 2], "strides": [2]},
    ),
    (
        "Conv",
        {"x": (1, 4, 5, 6, 4), "w": (6, 2, 3, 2, 2), "b": (6,)},
        {},
        {"group": 2, "pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1], "dilations": [2, 1, 2]},
    ),
    ("Conv", {"x": (1, 3, 6, 5), "w": (4, 3, 3, 3), "b": (4,)}, {}, {"pads": [1, 1, 1, 1]}),
    (
        "ConvTranspose",
        {"x": (1, 4, 6, 5), "w": (4, 3, 3, 3), "b": (3,)},
        {},
        {"strides": [3, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
    ),
    (
        "ConvTranspose",
        {"x": (1, 4, 6, 5), "w": (4, 3, 2, 3)},
        {},
        {"group": 2, "dilations": [2, 1], "strides": [1, 2], "pads": [2, 0, 1, 3]},
    ),
    ("ConvTranspose", {"x": (2, 3, 7), "w": (3, 2, 4), "b": (2,)}, {}, {"strides": [2]}),
    (
        "ConvTranspose",
        {"x": (1, 4, 3, 4, 3), "w": (4, 1, 2, 3, 2), "b": (2,)},
        {},
        {"group": 2, "strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 0], "dilations": [1, 2, 1]},
    ),
]


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("case", RUN_TIME_CONVS, ids=[case_id(c) for c in RUN_TIME_CONVS])
def test_conv_operands_computed_at_run_time(case, dtype):
    """1-D and 3-D Conv and ConvTranspose whose weights are computed at run
    time, and run-time biases: the kernel sliced, flipped and transposed in
    the program (issue 32; ConvTranspose from graph fuzz campaign seed
    7373, m89: refused before, as were the others)."""
    check_single_op(case, dtype)


def test_conv_operands_of_other_nodes():
    """Weights another node computes, in a layout other than the logical
    one (a Transpose only changes the permutation, D-COMPILE-LAYOUT), and a
    bias computed from an input beside constant weights."""
    nodes = [
        helper.make_node("Transpose", ["v"], ["w"], perm=[3, 2, 0, 1]),
        helper.make_node("ConvTranspose", ["x", "w"], ["t"], group=2, strides=[2, 1]),
        helper.make_node("Neg", ["c"], ["b"]),
        helper.make_node("Conv", ["t", "k", "b"], ["y"], pads=[0, 1, 0, 1]),
        helper.make_node("Transpose", ["u"], ["k1"], perm=[2, 1, 0]),
        helper.make_node("Conv", ["z", "k1"], ["y1"], strides=[2]),
    ]
    model = _typed_model(
        nodes,
        {
            "x": (TensorProto.FLOAT, [1, 4, 3, 5]),
            "v": (TensorProto.FLOAT, [2, 3, 3, 4]),
            "c": (TensorProto.FLOAT, [5]),
            "z": (TensorProto.FLOAT, [2, 3, 9]),
            "u": (TensorProto.FLOAT, [3, 3, 4]),
        },
        {"y": (TensorProto.FLOAT, [1, 5, 5, 7]), "y1": (TensorProto.FLOAT, [2, 4, 4])},
        [numpy_helper.from_array(w(5, 6, 2, 3), "k")],
    )
    check_model(model)


def test_log_of_positive_values():
    g = samples.GraphBuilder("f32", seed=1)
    x = g.op("Exp", ["x"], name="e")
    check_model(g.model("log", {"x": (2, 5)}, {"out": g.op("Log", [x], name="node")}))


def _typed_model(nodes, inputs, outputs, inits=(), opset=17):
    vis = [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()]
    outs = [helper.make_tensor_value_info(n, t, s) for n, (t, s) in outputs.items()]
    g = helper.make_graph(nodes, "m", vis, outs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_gather_with_indices_at_run_time():
    """An embedding: int64 token ids (i32 in the program, D-COMPILE-I64),
    negative ones counted from the end."""
    table = numpy_helper.from_array(w(6, 4), "table")
    m = _typed_model(
        [helper.make_node("Gather", ["table", "ids"], ["y"], name="g")],
        {"ids": (TensorProto.INT64, [2, 3])},
        {"y": (TensorProto.FLOAT, [2, 3, 4])},
        [table],
    )
    check_model(m, inputs={"ids": np.array([[0, 5, -1], [2, -6, 3]], np.int64)})


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_layernorm_mean_and_inv_std_dev_outputs(elem):
    """LayerNormalization's optional Mean and InvStdDev outputs (f32 for f16
    data, the reduced dimensions kept with size 1; refused until session 28):
    over the last two axes of an NCHW-shaped input."""
    scale = numpy_helper.from_array(w(3, 5).astype(helper.tensor_dtype_to_np_dtype(elem)), "s")
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y", "m", "r"], axis=2, name="ln")
    m = _typed_model(
        [node],
        {"x": (elem, [2, 4, 3, 5])},
        {
            "y": (elem, [2, 4, 3, 5]),
            "m": (TensorProto.FLOAT, [2, 4, 1, 1]),
            "r": (TensorProto.FLOAT, [2, 4, 1, 1]),
        },
        [scale],
        opset=17,
    )
    check_model(m)


def test_integer_arithmetic_and_casts():
    """int64 Add/Mul (i32 in the program), a Cast to float and back."""
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"], name="add"),
        helper.make_node("Mul", ["s", "a"], ["p"], name="mul"),
        helper.make_node("Cast", ["p"], ["f"], name="tof", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["x"], ["i"], name="toi", to=TensorProto.INT64),
    ]
    m = _typed_model(
        nodes,
        {
            "a": (TensorProto.INT64, [2, 3]),
            "b": (TensorProto.INT64, [3]),
            "x": (TensorProto.FLOAT, [4]),
        },
        {
            "p": (TensorProto.INT64, [2, 3]),
            "f": (TensorProto.FLOAT, [2, 3]),
            "i": (TensorProto.INT64, [4]),
        },
    )
    check_model(
        m,
        inputs={
            "a": np.array([[1, -2, 3], [40, 5, -6]], np.int64),
            "b": np.array([7, 8, -9], np.int64),
            "x": np.array([1.7, -2.5, 0.2, -0.9], np.float32),
        },
    )


def test_double_model_is_computed_in_f32():
    """D-COMPILE-F64: an f64 model imports with f32 buffers and matches
    onnxruntime's f64 result at f32's tolerance."""
    nodes = [
        helper.make_node("Mul", ["x", "c"], ["t"], name="mul"),
        helper.make_node("Tanh", ["t"], ["y"], name="tanh"),
    ]
    c = numpy_helper.from_array(np.array([0.5, -1.5, 2.0], np.float64), "c")
    m = _typed_model(
        nodes, {"x": (TensorProto.DOUBLE, [2, 3])}, {"y": (TensorProto.DOUBLE, [2, 3])}, [c]
    )
    im = check_model(m, inputs={"x": R.uniform(-1, 1, (2, 3))})
    assert [p.dtype for p in im.inputs + im.outputs] == [np.float32, np.float32]


def test_sequences_resolved_at_compile_time():
    """D-COMPILE-SEQ: SplitToSequence, SequenceInsert/Erase at constant
    positions, SequenceAt and ConcatFromSequence (new_axis) become slices,
    a choice of tensor and a concatenation."""
    pos = numpy_helper.from_array(np.array(-1, np.int64), "pos")
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["s"], name="split", axis=1),
        helper.make_node("SequenceErase", ["s", "pos"], ["s2"], name="erase"),
        helper.make_node("SequenceInsert", ["s2", "y"], ["s3"], name="insert"),
        helper.make_node("ConcatFromSequence", ["s3"], ["c"], name="cat", axis=1, new_axis=1),
        helper.make_node("SequenceAt", ["s3", "pos"], ["last"], name="at"),
    ]
    m = _typed_model(
        nodes,
        {"x": (TensorProto.FLOAT, [2, 3, 4]), "y": (TensorProto.FLOAT, [2, 1, 4])},
        {"c": (TensorProto.FLOAT, [2, 3, 1, 4]), "last": (TensorProto.FLOAT, [2, 1, 4])},
        [pos],
        opset=18,
    )
    check_model(m)


@pytest.mark.parametrize("engines", [None, 1])
def test_1d_pooling_end_to_end(engines):
    """Regression (the onnx backend's test_operator_maxpool, minimized): a
    1-D MaxPool viewed as [N, 1, W, C] made upstream's copy generation stage
    a [3, 1, 5, 1] box of [3, 1, 6, 1] as 15 contiguous elements (a wrong
    result on the affine route); viewed as [1, N, W, C] it is right."""
    from compile_runs import run_api

    m = samples.single_op("MaxPool", {"x": (3, 1, 6)}, "f32", kernel_shape=[3], strides=[2])
    run_api(m, engines=engines, route="affine")


@pytest.mark.parametrize(
    "device,engines,route",
    [("npm_pro_x1", None, "transform"), ("npm_pro_x1", 1, "affine"), ("npm_lite", None, "affine")],
)
def test_3d_conv_transpose_end_to_end(device, engines, route):
    """3-D ConvTranspose (refused before session 9) through the NEM lowering:
    groups, strides, dilations, pads, output_padding and a bias, compiled,
    verified, run race-free under random schedules, equal to onnxruntime."""
    from compile_runs import run_api

    m = samples.single_op(
        "ConvTranspose",
        {"x": (2, 4, 3, 3, 2)},
        "f32",
        {"w": w(4, 1, 2, 2, 3), "b": w(2)},
        group=2,
        dilations=[2, 1, 2],
        strides=[1, 2, 1],
        pads=[1, 0, 0, 0, 1, 1],
        output_padding=[0, 1, 0],
    )
    run_api(m, device=device, engines=engines, route=route)


@pytest.mark.parametrize("engines,route", [(1, "transform"), (None, "affine")])
@pytest.mark.parametrize(
    "make",
    [
        lambda: samples.single_op("Expand", {"x": (3, 1)}, "f32", {"shape": i64(2, 3, 2)}),
        lambda: samples.single_op("Tile", {"x": (1, 2, 3, 4)}, "f32", {"r": i64(1, 2, 3, 4)}),
    ],
    ids=["expand", "tile"],
)
def test_inner_broadcast_end_to_end(make, engines, route):
    """Regression (the onnx backend's test_expand_shape_model4 and
    test_operator_repeat, minimized): a broadcast dimension stored inside a
    copied one ([3,1] -> [2,3,2]: y[i,j,k] = x[j,0]) was doubled by transfers
    whose byte extents interleave, and nem-compile's own verify rejected the
    program (HAZ-02).  Now one concat and a doubling (Expand), or doublings
    in a scratch storing the broadcast dimensions outermost (Tile's two such
    dimensions), D-LOW-BCAST: verified, race-free, equal to onnxruntime."""
    from compile_runs import run_api

    run_api(make(), engines=engines, route=route)


@pytest.mark.parametrize("op", ["LayerNormalization", "InstanceNormalization"])
def test_normalization_of_rows_far_from_zero(op):
    """Rows whose mean is hundreds of standard deviations from zero (fuzz
    campaign seed 7171, m93: f32 LayerNormalization over 750 elements, 10.5
    tolerances off the exact result with a plain sum, onnxruntime 1.11):
    the sums are shifted by each row's first element (D-COMPILE-NORM-SHIFT),
    and the result is within D-COMPILE-TOL of the float64 one."""
    x = (350.0 + R.standard_normal((2, 3, 750))).astype(np.float32)
    n = 750 if op == "LayerNormalization" else 3
    scale, bias = w(n), w(n)
    node = helper.make_node(
        op,
        ["x", "s", "b"],
        ["y"],
        name="n",
        epsilon=1e-5,
        **({"axis": 2} if op == "LayerNormalization" else {}),
    )
    m = _typed_model(
        [node],
        {"x": (TensorProto.FLOAT, [2, 3, 750])},
        {"y": (TensorProto.FLOAT, [2, 3, 750])},
        [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(bias, "b")],
    )
    _, got = reference_outputs(m, {"x": x})
    x64 = x.astype(np.float64)
    mean, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    shape = (1, 1, 750) if op == "LayerNormalization" else (1, 3, 1)
    exact = (
        (x64 - mean) / np.sqrt(var + 1e-5) * scale.reshape(shape) + bias.reshape(shape)
    ).astype(np.float32)
    assert max_violation(got["y"], exact) <= 1.0


def test_f16_batchnorm_is_rounded_once():
    """An f16 BatchNormalization is `x * scale + shift` computed in f32 and
    rounded once (D-COMPILE-F16): in f16 the folded constants and the product
    each rounded, up to 423 ulps off where the shift cancels the product
    (campaign seed 10101's m270, where a LayerNormalization after a Softmax
    amplified it past the tolerance; the whole chain is
    test_graph_fuzz.py::test_f16_batchnorm_softmax_layernorm)."""
    c = 4
    g, b, mean = R.uniform(0.5, 2, c), R.uniform(-1, 1, c), R.uniform(-1, 1, c)
    var = R.uniform(0.1, 2, c)
    params = [p.astype(np.float16) for p in (g, b, mean, var)]
    x = (R.standard_normal((1, c, 6, 8)) * 2).astype(np.float16)
    node = helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], epsilon=1e-5)
    m = _typed_model(
        [node],
        {"x": (TensorProto.FLOAT16, list(x.shape))},
        {"y": (TensorProto.FLOAT16, list(x.shape))},
        [numpy_helper.from_array(p, n) for p, n in zip(params, "gbmv")],
    )
    _, got = reference_outputs(m, {"x": x})
    g64, b64, m64, v64 = (p.astype(np.float64).reshape(1, c, 1, 1) for p in params)
    exact = ((x.astype(np.float64) - m64) / np.sqrt(v64 + 1e-5) * g64 + b64).astype(np.float16)
    ulps = np.abs(
        got["y"].reshape(x.shape).view(np.int16).astype(np.int64)
        - exact.view(np.int16).astype(np.int64)
    )
    assert ulps.max() <= 1, f"{ulps.max()} ulps off the exact result rounded once"


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("HardSwish", {}),
        ("Elu", {"alpha": 0.7}),
        ("Selu", {}),
        ("Softsign", {}),
        ("Softplus", {}),
        ("Gelu", {}),
    ],
)
def test_f16_activations_are_rounded_once(op, attrs):
    """An f16 activation built of several arithmetic ops is computed in f32
    and rounded once (D-COMPILE-F16), as an exact implementation does: each
    f16 step rounding (and constants such as HardSigmoid's alpha rounded to
    f16) put results ulps off, which a later normalization amplifies (m270)."""
    from onnx.reference import ReferenceEvaluator

    x = np.linspace(-7, 7, 2 * 3 * 40).reshape(2, 3, 40).astype(np.float16)
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    m = _typed_model(
        [node],
        {"x": (TensorProto.FLOAT16, [2, 3, 40])},
        {"y": (TensorProto.FLOAT16, [2, 3, 40])},
        opset=20,
    )
    _, got = reference_outputs(m, {"x": x})
    wide = _typed_model(
        [helper.make_node(op, ["x"], ["y"], **attrs)],
        {"x": (TensorProto.DOUBLE, [2, 3, 40])},
        {"y": (TensorProto.DOUBLE, [2, 3, 40])},
        opset=20,
    )
    exact = ReferenceEvaluator(wide).run(None, {"x": x.astype(np.float64)})[0].astype(np.float16)
    ulps = np.abs(
        got["y"].reshape(x.shape).view(np.int16).astype(np.int64)
        - exact.view(np.int16).astype(np.int64)
    )
    assert ulps.max() <= 1, f"{ulps.max()} ulps off the exact result rounded once"


@pytest.mark.parametrize(
    "kernel, attrs",
    [([2, 2], {}), ([3, 3], {"strides": [2, 2], "pads": [1, 1, 1, 1]}), ([4], {})],
)
def test_f16_average_pool_sums_in_f32(kernel, attrs):
    """An f16 AveragePool sums its windows in f32 and rounds the mean once
    (D-COMPILE-F16): summed in f16, a 2x2 window of 20,000s overflowed to
    inf where onnxruntime gives 20,000 (an outside user, session 66; 3x3
    windows of 20,000-23,000 and a 1-D window of 17,000s alike)."""
    shape = [1, 3, 9, 9][: 2 + len(kernel)]
    x = R.uniform(17000, 23000, shape).astype(np.float16)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=kernel, **attrs)
    m = _typed_model(
        [node], {"x": (TensorProto.FLOAT16, shape)}, {"y": (TensorProto.FLOAT16, None)}
    )
    _, got = reference_outputs(m, {"x": x})
    assert np.isfinite(got["y"]).all()
    check_model(m, inputs={"x": x})
