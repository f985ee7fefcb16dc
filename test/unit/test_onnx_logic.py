"""ONNX comparisons, logical ops, Where, IsNaN/IsInf and Cast to and from
bool (D-COMPILE-BOOL): a bool is program data as an i32 0 or 1.  Each model
is compiled, run race-free under random schedules and compared with
onnxruntime bit for bit (every op here is exact), on inputs that hold ties,
NaNs and infinities; bool constants, bools moved by Unsqueeze/Expand, a
comparison on a Conv's NHWC output and int32 operands included.
A bool graph input or output is an i32 buffer of 0 and 1."""

from __future__ import annotations

import numpy as np
import pytest
from compile_runs import run_compiled
from onnx import TensorProto, helper, numpy_helper

from nem.compile import compile_onnx
from nem.compile.check import PROGRAM_DTYPES, max_violation, model_dtypes, onnxruntime_run

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        list(inits),
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _halves(shape, seed: int, special: bool = True) -> np.ndarray:
    """Values in {-1, -0.5, 0, 0.5, 1}, so comparisons meet ties and sums of
    products are exact, with (`special`) a NaN, +inf and -inf in the first
    three places."""
    rng = np.random.default_rng(seed)
    x = (rng.integers(-2, 3, size=shape) / 2).astype(np.float32)
    if special:
        x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    return x


def _node(op, ins, out, **attrs):
    return helper.make_node(op, ins, [out], name=out, **attrs)


def _compare_model():
    """Every comparison of x with y (broadcast), combined and Cast to float."""
    nodes, outs = [], []
    for op in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"):
        nodes.append(_node(op, ["x", "y"], op))
    nodes += [
        _node("And", ["Less", "Equal"], "and"),
        _node("Or", ["Less", "Equal"], "or"),
        _node("Xor", ["Greater", "GreaterOrEqual"], "xor"),
        _node("Not", ["LessOrEqual"], "not"),
        _node("IsNaN", ["x"], "nan"),
        _node("IsInf", ["x"], "inf"),
        _node("IsInf", ["x"], "pinf", detect_negative=0),
        _node("IsInf", ["x"], "ninf", detect_positive=0),
    ]
    for b in ("and", "or", "xor", "not", "nan", "inf", "pinf", "ninf"):
        nodes.append(_node("Cast", [b], f"{b}_f", to=F))
        outs.append((f"{b}_f", F))
    return _model(nodes, [("x", F, [2, 3, 4]), ("y", F, [3, 4])], outs)


def _where_model():
    """Where with a run-time condition, scalar constant branches of X's type,
    and a bool constant mask moved by Unsqueeze and Expand (an attention
    mask's shape)."""
    mask = np.array([[True, False, True, True]])
    inits = [
        numpy_helper.from_array(mask, "mask"),
        numpy_helper.from_array(np.array([1, 3, 4], np.int64), "shape"),
        numpy_helper.from_array(np.array([0], np.int64), "axes"),
        numpy_helper.from_array(np.array(0.25, np.float32), "quarter"),
        numpy_helper.from_array(np.array(-1e9, np.float32), "neg"),
    ]
    nodes = [
        _node("Less", ["x", "quarter"], "small"),
        _node("Where", ["small", "quarter", "x"], "clamped"),
        _node("Unsqueeze", ["mask", "axes"], "mask3"),
        _node("Expand", ["mask3", "shape"], "wide"),
        _node("Where", ["wide", "clamped", "neg"], "masked"),
        _node("Cast", ["x"], "xb", to=TensorProto.BOOL),
        _node("Where", ["xb", "x", "quarter"], "nonzero"),
    ]
    return _model(nodes, [("x", F, [2, 3, 4])], [("masked", F), ("nonzero", F)], inits)


def _int_model():
    """Comparisons of int32 data choose between f32 values; the bool Cast
    to int32 is its 0 or 1, added to the data."""
    nodes = [
        _node("Equal", ["k", "three"], "eq"),
        _node("Greater", ["k", "three"], "gt"),
        _node("Or", ["eq", "gt"], "ge"),
        _node("Where", ["ge", "x", "neg"], "w"),
        _node("Cast", ["ge"], "ge_i", to=TensorProto.INT32),
        _node("Add", ["k", "ge_i"], "k1"),
    ]
    inits = [
        numpy_helper.from_array(np.array(3, np.int32), "three"),
        numpy_helper.from_array(np.array(-2.5, np.float32), "neg"),
    ]
    return _model(
        nodes,
        [("x", F, [3, 5]), ("k", TensorProto.INT32, [3, 5])],
        [("w", F), ("k1", TensorProto.INT32)],
        inits,
    )


def _conv_model():
    """A comparison on a Conv's NHWC output against a per-channel constant
    (broadcast [C, 1, 1]), and a ReLU by Where; weights and inputs are
    halves, so the convolution is exact in any order and ties with the
    thresholds are met."""
    inits = [
        numpy_helper.from_array(_halves((4, 3, 3, 3), 5, special=False), "w"),
        numpy_helper.from_array(_halves((4, 1, 1), 6, special=False) * 2, "t"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        _node("Greater", ["c", "t"], "above"),
        _node("Where", ["above", "c", "zero"], "y"),
    ]
    return _model(nodes, [("x", F, [1, 3, 6, 6])], [("y", F)], inits)


def _inputs(model, special: bool):
    out = {}
    for k, vi in enumerate(model.graph.input):
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == TensorProto.INT32:
            out[vi.name] = np.random.default_rng(k).integers(0, 6, size=shape).astype(np.int32)
        else:
            out[vi.name] = _halves(shape, seed=k, special=special)
    return out


CASES = {
    "comparisons and logic": _compare_model,
    "where and a bool mask": _where_model,
    "integer operands": _int_model,
    "a conv's output": _conv_model,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bool_ops_match_onnxruntime_bit_for_bit(case):
    model = CASES[case]()
    inputs = _inputs(model, special=case != "a conv's output")
    result = compile_onnx(model, device="npm_pro_x1")
    it, _ = run_compiled(result, model, inputs=inputs)
    want = onnxruntime_run(model, inputs)
    iface = result.interface
    for name, shape, dtype in iface.outputs:
        got = it.read_tensor(name, shape, dtype)
        ref = want[iface.onnx_names[name]]
        np.testing.assert_array_equal(got, ref.astype(got.dtype), err_msg=name)


def test_bool_inputs_and_outputs_are_i32_buffers_of_0_and_1():
    """A bool graph input and output: the program's buffers are i32 0/1,
    converted at the interface by nem.compile.check (as the backend does)."""
    b = TensorProto.BOOL
    model = _model(
        [_node("Not", ["m"], "n"), _node("Less", ["x", "y"], "lt"), _node("Xor", ["n", "lt"], "z")],
        [("m", b, [2, 5]), ("x", F, [2, 5]), ("y", F, [5])],
        [("z", b), ("n", b)],
    )
    onnx_inputs = {
        "m": np.random.default_rng(4).integers(0, 2, (2, 5)).astype(bool),
        "x": _halves((2, 5), 1),
        "y": _halves((5,), 2),
    }
    program_inputs = {
        k: v.astype(PROGRAM_DTYPES.get(v.dtype, v.dtype)) for k, v in onnx_inputs.items()
    }
    result = compile_onnx(model, device="npm_pro_x1")
    iface = result.interface
    assert {str(d) for _, _, d in iface.inputs + iface.outputs} >= {"int32"}
    it, _ = run_compiled(result, model, inputs=program_inputs)
    want = onnxruntime_run(model, model_dtypes(program_inputs, model))
    for name, shape, dtype in iface.outputs:
        got = it.read_tensor(name, shape, dtype)
        assert dtype == np.int32 and set(np.unique(got)) <= {0, 1}
        assert max_violation(got, want[iface.onnx_names[name]]) == 0.0, name


@pytest.mark.parametrize(
    ("op", "attrs", "extra"),
    [
        ("Pad", {"mode": "constant"}, [("pads", [0, 1, 2, 0, 2, 1]), ("value", 7)]),
        ("Pad", {"mode": "edge"}, [("pads", [0, 1, 0, 0, 2, 1])]),
        ("Pad", {"mode": "reflect"}, [("pads", [0, 1, 1, 0, 1, 2])]),
        ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}, []),
        ("SpaceToDepth", {"blocksize": 2}, []),
        ("Clip", {}, [("lo", -5), ("hi", 20)]),
        ("CumSum", {"reverse": 1}, [("axis", 1)]),
    ],
)
def test_integer_data_moves_through_pads_and_depth_to_space(op, attrs, extra):
    """Pad, DepthToSpace and SpaceToDepth move data: they take integer
    tensors as Slice and Transpose do (refused as "not data movement" by a
    message naming data movement, an outside user, session 55); Clip is a
    Max and a Min, CumSum sums (Hugging Face's `position_ids =
    cumsum(mask)`).  onnxruntime has no int32 DepthToSpace kernel: onnx's
    reference evaluator is the oracle for all of them."""
    from onnx.reference import ReferenceEvaluator

    shape = [1, 8, 4, 6] if op.endswith("Depth") or op.startswith("Depth") else [2, 3, 4]
    inits = [
        numpy_helper.from_array(np.array(v, np.int64 if k == "pads" else np.int32), k)
        for k, v in extra
    ]
    node = helper.make_node(op, ["x", *(k for k, _ in extra)], ["y"], **attrs)
    model = _model([node], [("x", TensorProto.INT32, shape)], [("y", TensorProto.INT32)], inits)
    x = np.random.default_rng(5).integers(-50, 50, shape).astype(np.int32)
    result = compile_onnx(model, device="npm_pro_x1")
    it, _ = run_compiled(result, model, inputs={"x": x})
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    ((name, out_shape, dtype),) = result.interface.outputs
    assert np.array_equal(it.read_tensor(name, out_shape, dtype), want)
