"""The graph fuzzer's regression seeds: the known findings, built by hand at
their smallest (issue 31 and the campaigns of docs/testing.md).

Each seed is a model builder, the configuration it fails on and the outcome
it has today (`today`) against the one it must have (`want`, PASS but for a
model onnxruntime does not run as declared).
`test/unit/test_graph_fuzz.py` replays every seed; a seed whose bug is not
fixed yet is an expected failure there (strict: when the fix lands the test
says so, and the marker goes with the fix).  `graph_fuzz.py seeds -o DIR`
writes them as `.onnx` files with their inputs and reproduction commands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from graph_case import Config
from graph_gen import OPSET, validate
from onnx import TensorProto, helper, numpy_helper


def _model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, list[int]],
    outputs: dict[str, list[int]],
    inits: dict[str, list[int]] | None = None,
    elem: int = TensorProto.FLOAT,
    weights: dict[str, np.ndarray] | None = None,
) -> onnx.ModelProto:
    """A model of `nodes`; `inits` are int64 initializers (shapes, axes),
    `weights` initializers of their own type."""
    graph = helper.make_graph(
        nodes,
        "seed",
        [helper.make_tensor_value_info(n, elem, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, elem, s) for n, s in outputs.items()],
        [numpy_helper.from_array(np.asarray(v, np.int64), n) for n, v in (inits or {}).items()]
        + [numpy_helper.from_array(v, n) for n, v in (weights or {}).items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="nem-graph-fuzz"
    )
    model.ir_version = 10
    validate(model)
    return model


def transpose_slice_concat_mean() -> onnx.ModelProto:
    """Transpose -> Slice -> Concat -> ReduceMean (issue 31's first
    miscompile, found again by the fuzzer as [1,4,10,12] -> [1,6,8] and
    minimized): 18 of 24 elements wrong on npm_pro_x1 and npm_mid, right
    with --engines 1, --route transform and on npm_lite."""
    return _model(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
            helper.make_node("Slice", ["t", "s1", "e1", "a1"], ["p1"]),
            helper.make_node("Concat", ["p1", "p2"], ["c"], axis=2),
            helper.make_node("ReduceMean", ["c", "r"], ["y"]),
        ],
        {"x": [1, 1, 8, 7], "p2": [1, 6, 3, 4]},
        {"y": [1, 6, 4, 1]},
        {"a1": [1, 3], "s1": [1, 4], "e1": [7, 8], "r": [3]},
    )


def transpose_4d() -> onnx.ModelProto:
    """Transpose(perm=[1,3,2,0]) of f32[5,1,1,3]: the 4-way split of the
    transposing copy reads each part's 5 elements as one contiguous DMA
    (the copy generation drops the stride 3): 12 of 15 elements wrong."""
    return _model(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[1, 3, 2, 0])],
        {"x": [5, 1, 1, 3]},
        {"y": [1, 3, 1, 5]},
    )


def avgpool_strided() -> onnx.ModelProto:
    """AveragePool(kernel [1,3], strides [2,2]) of f32[3,12,1,12] on npm_lite:
    batches 1 and 2 wrong (120 of 180 elements)."""
    return _model(
        [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[1, 3], strides=[2, 2])],
        {"x": [3, 12, 1, 12]},
        {"y": [3, 12, 1, 5]},
    )


def maxpool_strided() -> onnx.ModelProto:
    """MaxPool(kernel [1,3], strides [1,2]) of f32[2,12,1,12] on npm_lite."""
    return _model(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 3], strides=[1, 2])],
        {"x": [2, 12, 1, 12]},
        {"y": [2, 12, 1, 5]},
    )


def flatten_negative_axis() -> onnx.ModelProto:
    """Flatten(axis=-1) of f32[3,5]: the importer takes axis a as r+1+a and
    stops at its own shape check ('internal: output ... [15, 1] but ONNX
    infers [3, 5]')."""
    return _model(
        [helper.make_node("Flatten", ["x"], ["y"], axis=-1)], {"x": [3, 5]}, {"y": [3, 5]}
    )


def output_twice() -> onnx.ModelProto:
    """An output that is another output passed through Identity (or Dropout):
    the function returns one tensor twice, and upstream bufferization
    (one-shot-bufferize + buffer-results-to-out-params) dies of SIGSEGV."""
    return _model(
        [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Identity", ["e"], ["d"])],
        {"x": [2, 3]},
        {"d": [2, 3], "e": [2, 3]},
    )


def scalar_input() -> onnx.ModelProto:
    """Div(x f32[2,3], s f32[]) on npm_lite: the divide is an escape-hatch
    kernel whose argument for the 0-d input is `memref<f32>` while the task's
    operand is `f32[1]`; nem-run refuses the verified program ("not
    supported: compute op=mlir.kernel: argument 1 of @kernel is memref<f32>
    but the task's operand 1 is f32[1] [EXEC-03]")."""
    return _model(
        [helper.make_node("Div", ["x", "s"], ["y"])], {"x": [2, 3], "s": []}, {"y": [2, 3]}
    )


def maxpool_kernel_over_input() -> onnx.ModelProto:
    """MaxPool(kernel [2,2], strides [3,3]) of f32[1,1,1,1]: the kernel is
    larger than the input; ONNX (and onnxruntime) give [1,1,1,1] (C integer
    division truncates (1 - 2) / 3 to 0), the importer floors it to 0
    ('internal: output ... has shape [1, 1, 0, 0] but ONNX infers [1, 1, 1, 1]')."""
    return _model(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[3, 3])],
        {"x": [1, 1, 1, 1]},
        {"y": [1, 1, 1, 1]},
    )


def flatten_axis_rank() -> onnx.ModelProto:
    """Flatten(axis=4) of f32[1,1,1,2] (axis = rank: [2, 1]): an upstream
    MLIRError 'Verification failed' escapes the importer (a traceback)."""
    return _model(
        [helper.make_node("Flatten", ["x"], ["y"], axis=4)], {"x": [1, 1, 1, 2]}, {"y": [2, 1]}
    )


def avgpool_f16_column() -> onnx.ModelProto:
    """AveragePool(kernel [3,1]) of f16[1,2,3,1] on npm_pro_x1 (found by the
    campaign of seed 2026, minimized): the same contiguous DMA of a
    [1,3,1,1] box of [1,3,1,2] (upstream copy generation)."""
    return _model(
        [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 1])],
        {"x": [1, 2, 3, 1]},
        {"y": [1, 2, 1, 1]},
        elem=TensorProto.FLOAT16,
    )


def matmul_4d_by_vector() -> onnx.ModelProto:
    """MatMul(x f32[1,1,2,3], w f32[3]) -> [1,1,2] (a 1-D second operand
    after a 4-D first): upstream asserts ('!exprs.empty()' in
    getSymbolLessAffineMaps: a reshape with an empty reassociation group)
    while the importer verifies its module; the process dies of SIGABRT."""
    return _model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        {"x": [1, 1, 2, 3], "w": [3]},
        {"y": [1, 1, 2]},
    )


def pool_ceil_mode() -> onnx.ModelProto:
    """MaxPool(kernel [1,1], strides [1,2], ceil_mode=1) of f32[1,1,1,6]:
    ONNX's shape inference says W = ceil((6 - 1) / 2) + 1 = 4, but the spec
    drops a window that starts past the input, and onnxruntime returns 3
    values, as the importer computes; the importer called the disagreement
    'internal' (a crash), now a located 'not supported' naming both sizes
    (REJECTED, D-COMPILE-POOL-EDGE).  AveragePool the same."""
    return _model(
        [
            helper.make_node(
                "MaxPool", ["x"], ["y"], kernel_shape=[1, 1], strides=[1, 2], ceil_mode=1
            )
        ],
        {"x": [1, 1, 1, 6]},
        {"y": [1, 1, 1, 4]},
    )


def unsqueeze_scalar() -> onnx.ModelProto:
    """Unsqueeze(axes [0]) of f16[] (campaign seed 3131, m163, minimized):
    the importer collapsed the 0-d value to 1-D with an empty reassociation
    group, an MLIRError traceback ('reassociation indices must not be
    empty'); fixed in the importer (emit.reshape)."""
    return _model(
        [helper.make_node("Unsqueeze", ["x", "axes"], ["y"])],
        {"x": []},
        {"y": [1]},
        {"axes": [0]},
        elem=TensorProto.FLOAT16,
    )


def tile_column() -> onnx.ModelProto:
    """Tile(repeats [3, 3]) of f16[2,1] on npm_lite --no-pipeline (campaign
    seed 3131, m111, minimized; Tile and Expand in 5 of its 200 cases, both
    routes, npm_lite and npm_pro_x1): the lowered broadcast copy reads and
    writes one buffer at overlapping bytes ('transfer source and destination
    overlap (bytes [0, 8) and [2, 10) of alloc_v2) [HAZ-02]': VERIFY-FAIL);
    fixed in the lowering (D-LOW-BCAST: a broadcast dimension stored inside
    a copied one is a concat, or a seed-and-doublings scratch, never transfers
    whose byte extents interleave)."""
    return _model(
        [helper.make_node("Tile", ["x", "r"], ["y"])],
        {"x": [2, 1]},
        {"y": [6, 3]},
        {"r": [3, 3]},
        elem=TensorProto.FLOAT16,
    )


def expand_broadcast() -> onnx.ModelProto:
    """Expand of f32[3,1,1] to [2,3,5,13] with --route transform --engines 1
    --no-pipeline on npm_pro_x1 (campaign seed 3131, m165, minimized): the
    broadcast copy overlaps itself as in `tile_column` ('bytes [0, 524) and
    [4, 528) of alloc_v1 [HAZ-02]'); fixed with `tile_column`."""
    return _model(
        [helper.make_node("Expand", ["x", "s"], ["y"])],
        {"x": [3, 1, 1]},
        {"y": [2, 3, 5, 13]},
        {"s": [2, 3, 5, 13]},
    )


def conv_transpose_same_stride() -> onnx.ModelProto:
    """ConvTranspose(kernel [1,4], strides [3,3], auto_pad SAME_LOWER) of
    f32[1,7,9,5] (campaign seed 3232, m17): on H, in * stride (27) is more
    than the convolution gives (25); ONNX and onnxruntime take the negative
    padding as 0, the importer refused the model ('output_shape [27, 15] is
    larger than the convolution gives'); fixed in the importer."""
    w = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((7, 3, 1, 4)).astype(np.float32) / 5, "w"
    )
    model = _model(
        [
            helper.make_node(
                "ConvTranspose",
                ["x", "w"],
                ["y"],
                kernel_shape=[1, 4],
                strides=[3, 3],
                auto_pad="SAME_LOWER",
            )
        ],
        {"x": [1, 7, 9, 5], "w": [7, 3, 1, 4]},
        {"y": [1, 3, 25, 15]},
    )
    model.graph.initializer.append(w)
    del model.graph.input[1]
    return validate(model) and model


def clip_chain_crossed() -> onnx.ModelProto:
    """Clip(max=-0.586) then Clip(min=-0.0116) of f32[2,3] (final-tree
    campaign seed 5151, m382, minimized): onnxscript's optimizer merged the
    two into one Clip(min=-0.0116, max=-0.586), whose bounds cross, so every
    element was -0.586 where the chain gives -0.0116 (MISCOMPILE, 0.574 off
    on all 120 elements); the simplification is now refused
    (prepare.crossed_clips, D-COMPILE-SIMPLIFY)."""
    lo = helper.make_node(
        "Constant", [], ["lo"], value=numpy_helper.from_array(np.array(-0.0116, np.float32), "lo")
    )
    hi = helper.make_node(
        "Constant", [], ["hi"], value=numpy_helper.from_array(np.array(-0.586, np.float32), "hi")
    )
    return _model(
        [
            lo,
            hi,
            helper.make_node("Clip", ["x", "", "hi"], ["c"]),
            helper.make_node("Clip", ["c", "lo"], ["y"]),
        ],
        {"x": [2, 3]},
        {"y": [2, 3]},
    )


def avgpool_same_negative() -> onnx.ModelProto:
    """AveragePool(kernel [3,1], strides [1,3], auto_pad SAME_UPPER) of
    f32[1,1,1,3] (final-tree campaign seed 6161, m57, minimized): on W the
    total padding is (1 - 1) 3 + 1 - 3 = -2, which the pooling's definition
    and onnxruntime split as -1 / -1 (the window reads element 1); the
    importer took it as 0 and read element 0, on every device and route
    (D-COMPILE-SAME-NEG)."""
    return _model(
        [
            helper.make_node(
                "AveragePool",
                ["x"],
                ["y"],
                kernel_shape=[3, 1],
                strides=[1, 3],
                auto_pad="SAME_UPPER",
            )
        ],
        {"x": [1, 1, 1, 3]},
        {"y": [1, 1, 1, 1]},
    )


def relu_rank9() -> onnx.ModelProto:
    """Relu of f32[2,1,3,1,2,1,1,2,1] (campaign seed 7373, m104, minimized:
    Expand and Tile to rank 10, on every device and route): a contiguous
    region of more than 8 dimensions got the layout id `ABCDEFGH`, which
    names 8, and the compiler's own final check refused the program
    ('layout ABCDEFGH has rank 8 but the shape has rank 9 [REG-05]':
    VERIFY-FAIL); such regions now carry strides (D-LOW-REGION)."""
    return _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        {"x": [2, 1, 3, 1, 2, 1, 1, 2, 1]},
        {"y": [2, 1, 3, 1, 2, 1, 1, 2, 1]},
    )


def conv_runtime_weights() -> onnx.ModelProto:
    """Conv of f32[1,4,6,5] with weights f32[6,2,3,3] that are a graph input
    (computed at run time), 2 groups, pads 1, stride [1,2] (campaign seed
    7373, m55 with 11 groups and m82, minimized): the importer took only
    initializer weights ('not supported: Conv weights computed at run
    time': REJECTED); a 2-D convolution now transposes them in the program."""
    return _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], group=2, pads=[1, 1, 1, 1], strides=[1, 2])],
        {"x": [1, 4, 6, 5], "w": [6, 2, 3, 3]},
        {"y": [1, 6, 6, 3]},
    )


def conv_transpose_runtime_weights() -> onnx.ModelProto:
    """ConvTranspose of f32[1,4,5,4] with weights f32[4,3,3,2] that are a
    graph input, 2 groups (2 input and 3 output channels each), strides
    [2,1], pads [1,0,0,1] (campaign seed 7373, m89, made small): REJECTED
    ('not supported: ConvTranspose weights computed at run time'); the
    kernel is now flipped (slices concatenated) and transposed in the
    program."""
    return _model(
        [
            helper.make_node(
                "ConvTranspose", ["x", "w"], ["y"], group=2, strides=[2, 1], pads=[1, 0, 0, 1]
            )
        ],
        {"x": [1, 4, 5, 4], "w": [4, 3, 3, 2]},
        {"y": [1, 6, 10, 4]},
    )


def conv1d_runtime_weights() -> onnx.ModelProto:
    """1-D Conv of f32[2,4,9] with weights f32[6,2,3] that are a graph
    input, 2 groups, stride 2, pads 1: REJECTED ('Conv weights computed at
    run time in a 1-D convolution', issue 32); now the 2-D path's, the
    kernel given a unit height."""
    return _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], group=2, strides=[2], pads=[1, 1])],
        {"x": [2, 4, 9], "w": [6, 2, 3]},
        {"y": [2, 6, 5]},
    )


def conv3d_runtime_weights() -> onnx.ModelProto:
    """3-D Conv of f32[1,2,4,5,4] with weights f32[3,2,2,3,2] that are a
    graph input, strides [1,2,1], pads [0,1,0,0,1,1]: REJECTED (issue 32);
    now one 2-D convolution per kernel depth, each with its slice of the
    run-time kernel."""
    return _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], strides=[1, 2, 1], pads=[0, 1, 0, 0, 1, 1])],
        {"x": [1, 2, 4, 5, 4], "w": [3, 2, 2, 3, 2]},
        {"y": [1, 3, 3, 3, 4]},
    )


def conv_runtime_bias() -> onnx.ModelProto:
    """Conv of f32[1,3,6,5] with initializer weights f32[4,3,3,3] and a bias
    f32[4] that is a graph input, pads 1: REJECTED ('Conv bias computed at
    run time', issue 32); the bias is now broadcast into the accumulator in
    the program."""
    k = np.random.default_rng(32).uniform(-0.5, 0.5, (4, 3, 3, 3)).astype(np.float32)
    return _model(
        [helper.make_node("Conv", ["x", "k", "b"], ["y"], pads=[1, 1, 1, 1])],
        {"x": [1, 3, 6, 5], "b": [4]},
        {"y": [1, 4, 6, 5]},
        weights={"k": k},
    )


def maxpool_dilated_same() -> onnx.ModelProto:
    """MaxPool(kernel [3], dilations [2], strides [3], auto_pad SAME_LOWER,
    ceil_mode=1) of f32[1,1,3]: onnxruntime pads by the undilated kernel
    and takes max(x0, x2), the operator's definition pads by the dilated
    extent and takes x1 (the importer's; a MISCOMPILE against onnxruntime),
    both one output as declared: now refused, naming the disagreement
    (REJECTED, D-COMPILE-POOL-EDGE)."""
    return _model(
        [
            helper.make_node(
                "MaxPool",
                ["x"],
                ["y"],
                kernel_shape=[3],
                dilations=[2],
                strides=[3],
                auto_pad="SAME_LOWER",
                ceil_mode=1,
            )
        ],
        {"x": [1, 1, 3]},
        {"y": [1, 1, 1]},
    )


def maxpool_window_in_padding() -> onnx.ModelProto:
    """MaxPool(kernel [2], dilations [2], pads [1, 1]) of f32[2,2,1]: the
    window's taps (-1 and 1) are both padding; onnxruntime gives -3.4e38 in
    f32 (-inf in f16), the importer's -inf padding -inf (a MISCOMPILE against
    onnxruntime); the operator gives no value: now refused (REJECTED,
    D-COMPILE-POOL-EDGE)."""
    return _model(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], dilations=[2], pads=[1, 1])],
        {"x": [2, 2, 1]},
        {"y": [2, 2, 1]},
    )


def layernorm_f16_after_erf() -> onnx.ModelProto:
    """Add(x, [0, .002, .004, .006]) -> Tanh -> Erf -> LayerNormalization
    (epsilon 1e-5) of f16[8,1] (the form of campaign seed 4141's m46, made
    stronger): each row normalizes four nearly equal values, so one ulp of
    Tanh's result moves the output by tenths.  onnxruntime computes Tanh
    and Erf in f32 without rounding between them and is 15 tolerances off
    the exact evaluation, within its rounding allowance; the program rounds
    each op's result as the model's types say and matches the exact
    evaluation (REFERENCE-INEXACT, graph_exact)."""
    w = numpy_helper.from_array(np.array([[0, 0.002, 0.004, 0.006]], np.float16), "w")
    scale = numpy_helper.from_array(np.ones(4, np.float16), "s")
    model = _model(
        [
            helper.make_node("Add", ["x", "w"], ["a"]),
            helper.make_node("Tanh", ["a"], ["t"]),
            helper.make_node("Erf", ["t"], ["e"]),
            helper.make_node("LayerNormalization", ["e", "s"], ["y"], epsilon=1e-5),
        ],
        {"x": [8, 1], "w": [1, 4], "s": [4]},
        {"y": [8, 4]},
        elem=TensorProto.FLOAT16,
    )
    model.graph.initializer.extend([w, scale])
    del model.graph.input[1:]
    return validate(model) and model


def initializer_named_zero() -> onnx.ModelProto:
    """ReduceSum(x f32[4,8], axis 1) + b, b an initializer named `zero_1`
    (an outside user's GroupNorm written with InstanceNormalization, whose
    weights an exporter named `one_6`, `zero_7`): the buffer `zero1` and the
    token `zero1` of a forwarded zero fill were both declared (NAME-02 in the
    compiler's own check, blamed on node 0)."""
    return _model(
        [
            helper.make_node("ReduceSum", ["x", "ax"], ["r"], keepdims=0),
            helper.make_node("Add", ["r", "zero_1"], ["y"]),
        ],
        {"x": [4, 8]},
        {"y": [4]},
        {"ax": [1]},
        weights={"zero_1": np.arange(4, dtype=np.float32)},
    )


@dataclass(frozen=True)
class Seed:
    name: str
    build: Callable[[], onnx.ModelProto]
    config: Config
    today: str
    """The outcome today: its `want` once fixed (the first twelve were found
    on main 28188ef and fixed on branch miscompile; an open one is a strict
    xfail in test_graph_fuzz.py until its fix sets `today`)."""
    want: str = "PASS"
    """The outcome once fixed (REJECTED: a model onnxruntime itself does not
    run as declared, or runs otherwise than the operator's definition, which
    a clean diagnostic must refuse, D-COMPILE-POOL-EDGE; REFERENCE-INEXACT:
    a model onnxruntime computes less exactly than the program)."""


SEEDS = [
    Seed("transpose_slice_concat_mean", transpose_slice_concat_mean, Config("npm_pro_x1"), "PASS"),
    Seed("transpose_4d", transpose_4d, Config("npm_pro_x1"), "PASS"),
    Seed("avgpool_strided", avgpool_strided, Config("npm_lite"), "PASS"),
    Seed("maxpool_strided", maxpool_strided, Config("npm_lite"), "PASS"),
    Seed("flatten_negative_axis", flatten_negative_axis, Config("npm_pro_x1"), "PASS"),
    Seed("output_twice", output_twice, Config("npm_pro_x1"), "PASS"),
    Seed("scalar_input", scalar_input, Config("npm_lite"), "PASS"),
    Seed("maxpool_kernel_over_input", maxpool_kernel_over_input, Config("npm_lite"), "PASS"),
    Seed("flatten_axis_rank", flatten_axis_rank, Config("npm_pro"), "PASS"),
    Seed("avgpool_f16_column", avgpool_f16_column, Config("npm_pro_x1"), "PASS"),
    Seed("matmul_4d_by_vector", matmul_4d_by_vector, Config("npm_pro"), "PASS"),
    Seed("pool_ceil_mode", pool_ceil_mode, Config("npm_pro"), "REJECTED", "REJECTED"),
    # the new front end's op types (branch fuzz2, campaign seed 3131)
    Seed("unsqueeze_scalar", unsqueeze_scalar, Config("npm_pro_x1"), "PASS"),
    Seed("conv_transpose_same_stride", conv_transpose_same_stride, Config("npm_pro_x1"), "PASS"),
    # the final tree's campaign (seed 5151)
    Seed("clip_chain_crossed", clip_chain_crossed, Config("npm_pro_x1"), "PASS"),
    Seed("tile_column", tile_column, Config("npm_lite", pipeline=False), "PASS"),
    Seed(
        "expand_broadcast",
        expand_broadcast,
        Config("npm_pro_x1", "transform", 1, pipeline=False),
        "PASS",
    ),
    # onnxruntime inexact on f16 (campaign seed 4141, m46)
    Seed(
        "layernorm_f16_after_erf",
        layernorm_f16_after_erf,
        Config("npm_pro_x1"),
        "REFERENCE-INEXACT",
        "REFERENCE-INEXACT",
    ),
    # the final tree's campaign (seed 6161)
    Seed("avgpool_same_negative", avgpool_same_negative, Config("npm_pro_x1", engines=1), "PASS"),
    # the campaign of session 7 (seed 7373)
    Seed("relu_rank9", relu_rank9, Config("npm_pro_x1"), "PASS"),
    Seed("conv_runtime_weights", conv_runtime_weights, Config("npm_mid"), "PASS"),
    Seed(
        "conv_transpose_runtime_weights", conv_transpose_runtime_weights, Config("npm_mid"), "PASS"
    ),
    # issue 32's remaining run-time convolution operands
    Seed("conv1d_runtime_weights", conv1d_runtime_weights, Config("npm_pro_x1"), "PASS"),
    Seed("conv3d_runtime_weights", conv3d_runtime_weights, Config("npm_lite"), "PASS"),
    Seed("conv_runtime_bias", conv_runtime_bias, Config("npm_pro", "transform"), "PASS"),
    # pooling where ONNX, the definition and onnxruntime disagree (D-COMPILE-POOL-EDGE)
    Seed(
        "maxpool_dilated_same", maxpool_dilated_same, Config("npm_pro_x1"), "REJECTED", "REJECTED"
    ),
    Seed(
        "maxpool_window_in_padding",
        maxpool_window_in_padding,
        Config("npm_lite"),
        "REJECTED",
        "REJECTED",
    ),
    # an outside user's models (session 8)
    Seed("initializer_named_zero", initializer_named_zero, Config("npm_pro_x1"), "PASS"),
]


def write_seeds(root: Path) -> list[Path]:
    """Each seed as ROOT/NAME/model.onnx with inputs, info.json, README.txt."""
    from graph_case import CaseResult
    from graph_minimize import write_finding

    paths = []
    for seed in SEEDS:
        doc = " ".join((seed.build.__doc__ or "").split())
        info = write_finding(
            seed.build(),
            seed.config,
            CaseResult(seed.today),
            root,
            f"seed {seed.name}: {doc}",
            name=seed.name,
        )
        paths.append(Path(info["path"]))
    return paths
