"""ONNX ops onnx defines as functions, compiled through their onnx bodies
(D-COMPILE-ONNX-FUNCTIONS, `nem.frontends.onnx.functions`): each compiled
program is run race-free under random schedules and compared with
onnxruntime, which runs the op with its own kernel."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from compile_runs import graph_model, run_api
from onnx import helper, numpy_helper

from nem.compile import CompileError, compile_onnx

RNG = np.random.default_rng(5)


def weights(name: str, shape: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def op_then_relu(op: str, opset: int, inits=(), **attrs) -> onnx.ModelProto:
    """`x` [1, 8, 6, 6] -> `op` -> Relu -> `y`: the Relu needs the op's
    output type, which onnx's inference does not give for some of them."""
    nodes = [
        helper.make_node(op, ["x", *(i.name for i in inits)], ["f"], **attrs),
        helper.make_node("Relu", ["f"], ["y"]),
    ]
    return graph_model(nodes, [1, 8, 6, 6], inits, opset)


CASES = {
    # context-dependent bodies; onnx infers no type through GroupNormalization-21
    "GroupNormalization-21": lambda: op_then_relu(
        "GroupNormalization", 21, [weights("s", [8]), weights("b", [8])], num_groups=4
    ),
    "GroupNormalization-18": lambda: op_then_relu(
        "GroupNormalization", 18, [weights("s", [4]), weights("b", [4])], num_groups=4, epsilon=0.01
    ),
    "RMSNormalization-23": lambda: op_then_relu("RMSNormalization", 23, [weights("s", [6])]),
    # a body written for opset 12, converted to the model's 13 by onnx's version converter
    "Celu-13": lambda: op_then_relu("Celu", 13, alpha=0.7),
    "Mish-22": lambda: op_then_relu("Mish", 22),
    "MeanVarianceNormalization-13": lambda: op_then_relu("MeanVarianceNormalization", 13),
    # (ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare: converters
    # of their own since session 54, test_onnx_norm_reductions.py)
    # (ThresholdedRelu: a converter of its own since session 55, below)
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_function_op_compiles_to_onnxruntime_s_result(case):
    model = CASES[case]()
    before = model.SerializeToString()
    result = run_api(model)
    assert model.SerializeToString() == before  # the user's model is not modified
    op = case.split("-")[0]
    assert any(f"1 {op}" in n and "D-COMPILE-ONNX-FUNCTIONS" in n for n in result.remarks), (
        result.remarks
    )


def test_two_function_ops_in_a_row():
    """The second GroupNormalization's input type is known only once the
    first one's body is in place: a second round replaces it."""
    nodes = [
        helper.make_node("GroupNormalization", ["x", "s", "b"], ["g1"], num_groups=2),
        helper.make_node("GroupNormalization", ["g1", "s", "b"], ["g2"], num_groups=8),
        helper.make_node("Mish", ["g2"], ["y"]),
    ]
    model = graph_model(nodes, [1, 8, 4, 4], [weights("s", [8]), weights("b", [8])], 22)
    result = run_api(model)
    assert any("2 GroupNormalization, 1 Mish" in n for n in result.remarks), result.remarks


def test_a_body_op_the_importer_lacks_names_the_user_s_node():
    """Bernoulli's body draws random numbers (RandomUniformLike), which the
    importer does not convert: the error is at the user's node, its index
    and op type."""
    model = graph_model(
        [
            helper.make_node("Sigmoid", ["x"], ["r"]),
            helper.make_node("Bernoulli", ["r"], ["y"]),
        ],
        [1, 4],
        opset=18,
    )
    with pytest.raises(CompileError) as e:
        compile_onnx(model, device="npm_pro_x1")
    text = str(e.value)
    assert "node 1 'Bernoulli_1/RandomUniformLike_" in text and "(Bernoulli)" in text, text
    assert "not supported: op type RandomUniformLike" in text, text


def test_a_constant_function_node_is_left_to_the_simplifier():
    """A Range of constants is folded by the graph simplifier, not replaced
    by its body (a Loop the importer does not convert)."""
    start, limit, delta = (
        numpy_helper.from_array(np.array(v, np.float32), n)
        for n, v in (("start", 0.0), ("limit", 4.0), ("delta", 1.0))
    )
    nodes = [
        helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
        helper.make_node("Add", ["x", "r"], ["y"]),
    ]
    result = run_api(graph_model(nodes, [2, 4], [start, limit, delta], 18))
    assert not any("D-COMPILE-ONNX-FUNCTIONS" in n for n in result.remarks), result.remarks


def test_a_weight_named_with_a_double_underscore_suffix():
    """`w__1` (as onnx's inliner and onnxscript name values) became the NEM
    name `w_1`, which xDSL printed as `w` (a uniquing suffix): the interface
    named a buffer the program did not have."""
    w = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(1, 8), "w__1")
    nodes = [helper.make_node("Mul", ["x", "w__1"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    run_api(graph_model(nodes, [1, 8], [w], 17))


@pytest.mark.parametrize("opset", [10, 13, 18, 22])
def test_thresholded_relu_converts_at_every_opset(opset):
    """ThresholdedRelu has a converter of its own: onnx gives it a body from
    opset 22 only, and an outside user's opset-13 one was refused though the
    README listed it (session 55)."""
    result = run_api(op_then_relu("ThresholdedRelu", opset, alpha=0.3))
    assert not any("D-COMPILE-ONNX-FUNCTIONS" in n for n in result.remarks), result.remarks


@pytest.mark.parametrize("opset", [13, 18])
def test_an_f16_body_typed_for_f32_runs_in_f32(opset):
    """MeanVarianceNormalization's schema takes f16, but onnx's body for it
    adds an f32 constant (its epsilon) to the data: ill-typed for f16 (an
    outside user, session 66, got "inputs have different element types"
    naming values of onnx's body; onnxruntime refuses it at opset 13).  The
    body runs on the inputs cast to f32 and its result is rounded once
    (D-COMPILE-F16)."""
    model = graph_model(
        [helper.make_node("MeanVarianceNormalization", ["x"], ["y"])],
        [1, 3, 4, 5],
        opset=opset,
        elem=onnx.TensorProto.FLOAT16,
    )

    def exact(inputs):
        x = inputs["x"].astype(np.float64)
        d = x - x.mean(axis=(0, 2, 3), keepdims=True)
        std = np.sqrt((d**2).mean(axis=(0, 2, 3), keepdims=True))
        return {"y": (d / (std + 1e-9)).astype(np.float16)}

    result = run_api(model, reference=exact)
    assert any("1 MeanVarianceNormalization" in n for n in result.remarks), result.remarks
