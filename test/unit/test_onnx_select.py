"""ONNX TopK, GatherElements and Einsum (D-COMPILE-TOPK, D-COMPILE-EINSUM,
D-COMPILE-SHAPES): each model is compiled, run race-free under random
schedules and compared with onnxruntime bit for bit.  TopK and
GatherElements only move elements; the Einsum inputs are halves, so every
sum of products is exact in any order.  Inputs hold ties (TopK's order
among equal values), NaNs and infinities (TopK: a NaN is greater than every
number, as onnxruntime orders it) and negative indices."""

from __future__ import annotations

import numpy as np
import pytest
from compile_runs import run_compiled, typed_model
from onnx import TensorProto, helper, numpy_helper

from nem.compile import CompileError, compile_onnx
from nem.compile.check import onnxruntime_run

F, H, I64, I32 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.INT32


def _halves(shape, seed: int, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.integers(-3, 4, size=shape) / 2).astype(dtype)


def _topk_model():
    """Largest along the last axis and smallest along axis 0 (k constants),
    of the same input with ties, NaNs and infinities; the indices of one
    Cast to float."""
    inits = [numpy_helper.from_array(np.array([k], np.int64), f"k{k}") for k in (2, 3)]
    nodes = [
        helper.make_node("TopK", ["x", "k3"], ["top", "top_i"], axis=-1),
        helper.make_node("TopK", ["x", "k2"], ["low", "low_i"], axis=0, largest=0),
        helper.make_node("Cast", ["low_i"], ["low_f"], to=F),
    ]
    outs = [("top", F, None), ("top_i", I64, None), ("low", F, None), ("low_f", F, None)]
    return typed_model(nodes, [("x", F, [4, 7])], outs, inits)


def _topk_input_k_model():
    """k a graph input, the output's shape declared (the k input is not
    read, as a Reshape's shape: D-COMPILE-TOPK); int32 data."""
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)]
    outs = [("v", I32, [3, 2]), ("i", I64, [3, 2])]
    return typed_model(nodes, [("x", I32, [3, 5]), ("k", I64, [1])], outs)


def _gather_elements_model():
    """Indices computed at run time (negative ones included) along axis 1,
    and constant ones along axis 0."""
    idx = numpy_helper.from_array(np.array([[2, 0, 1, 1], [-1, 2, 0, -3]], np.int64), "ci")
    nodes = [
        helper.make_node("GatherElements", ["x", "i"], ["g1"], axis=1),
        helper.make_node("GatherElements", ["x", "ci"], ["g0"], axis=0),
    ]
    return typed_model(
        nodes,
        [("x", F, [3, 4]), ("i", I64, [3, 2])],
        [("g1", F, None), ("g0", F, None)],
        [idx],
    )


def _einsum_model(equation: str, shapes, elem=F):
    names = [f"x{k}" for k in range(len(shapes))]
    nodes = [helper.make_node("Einsum", names, ["y"], equation=equation)]
    return typed_model(nodes, [(n, elem, s) for n, s in zip(names, shapes)], [("y", elem, None)])


EINSUMS = {
    "batch matmul": ("bij, bjk -> bik", [[3, 2, 4], [3, 4, 5]]),
    "B transposed": ("ik,jk->ij", [[3, 4], [5, 4]]),
    "output transposed": ("ij,jk->ki", [[3, 4], [4, 5]]),
    "inner product": ("i,i", [[6], [6]]),
    "outer product": ("i,j->ij", [[3], [4]]),
    "batch diagonal": ("...ii ->...i", [[2, 3, 3]]),
    "row sums": ("ij->i", [[3, 5]]),
    "three operands": ("ij,jk,kl->il", [[2, 3], [3, 4], [4, 2]]),
    "summed in one operand": ("ij,j->j", [[3, 4], [4]]),
    "broadcast ellipsis": ("...ij,...jk->...ik", [[2, 3, 4], [1, 4, 2]]),
}


def _inputs(model):
    out = {}
    for k, vi in enumerate(model.graph.input):
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        t = vi.type.tensor_type.elem_type
        if t == I64:
            rng = np.random.default_rng(k)
            out[vi.name] = rng.integers(-4, 4, size=shape).astype(np.int64)
        elif t == I32:
            out[vi.name] = np.random.default_rng(k).integers(0, 4, size=shape).astype(np.int32)
        else:
            out[vi.name] = _halves(shape, k, np.float16 if t == H else np.float32)
    return out


def _check(model, inputs):
    result = compile_onnx(model, device="npm_pro_x1")
    iface = result.interface
    program = {k: v.astype(np.int32) if v.dtype == np.int64 else v for k, v in inputs.items()}
    it, _ = run_compiled(result, model, inputs=program)
    want = onnxruntime_run(model, inputs)
    for name, shape, dtype in iface.outputs:
        got = it.read_tensor(name, shape, dtype)
        ref = want[iface.onnx_names[name]]
        np.testing.assert_array_equal(got, ref.astype(got.dtype), err_msg=name)


def test_topk_matches_onnxruntime_with_ties_nans_and_infinities():
    model = _topk_model()
    x = _halves([4, 7], 1)
    x[0, [1, 4]] = np.nan
    x[1, 2], x[2, 5] = np.inf, -np.inf
    _check(model, {"x": x})


def test_topk_reads_k_from_the_declared_output_shape():
    model = _topk_input_k_model()
    result = compile_onnx(model, device="npm_pro_x1")
    assert [n for n, _, _ in result.interface.inputs] == ["x"]
    x = np.array([[3, 1, 3, 0, 2], [0, 0, 0, 0, 0], [1, 2, 3, 2, 1]], np.int32)
    _check(model, {"x": x, "k": np.array([2], np.int64)})


def test_topk_with_a_run_time_k_and_no_declared_shape_is_refused():
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], name="top")]
    model = typed_model(
        nodes, [("x", F, [3, 5]), ("k", I64, [1])], [("v", F, None), ("i", I64, None)]
    )
    with pytest.raises(CompileError) as e:
        compile_onnx(model, device="npm_pro_x1")
    assert "not supported: TopK with a k computed at run time" in str(e.value)


def test_gather_elements_matches_onnxruntime():
    model = _gather_elements_model()
    inputs = _inputs(model)
    inputs["i"] = np.array([[0, 3], [-1, 1], [2, -4]], np.int64)
    _check(model, inputs)


def test_gather_elements_constant_index_out_of_range_is_an_error_at_the_node():
    idx = numpy_helper.from_array(np.array([[0, 3]], np.int64), "ci")
    node = helper.make_node("GatherElements", ["x", "ci"], ["g"], axis=0, name="ge")
    model = typed_model([node], [("x", F, [3, 2])], [("g", F, None)], [idx])
    with pytest.raises(CompileError) as e:
        compile_onnx(model, device="npm_pro_x1")
    assert "'ge' (GatherElements)" in str(e.value) and "out of range for axis 0" in str(e.value)


@pytest.mark.parametrize("case", sorted(EINSUMS))
def test_einsum_matches_onnxruntime(case):
    equation, shapes = EINSUMS[case]
    model = _einsum_model(equation, shapes)
    _check(model, _inputs(model))


def test_f16_einsum_sums_in_f32_and_rounds_once():
    """f16 row sums whose partial sums leave f16's range of exact integers
    (2048 + 1 + 1 ...): summed in f16 they would lose the ones."""
    model = _einsum_model("ij->i", [[2, 9]], elem=H)
    x = np.ones((2, 9), np.float16)
    x[:, 0] = 2048
    x[1, 1:] = -1
    result = compile_onnx(model, device="npm_pro_x1")
    it, _ = run_compiled(result, model, inputs={"x0": x})
    name, shape, dtype = result.interface.outputs[0]
    np.testing.assert_array_equal(it.read_tensor(name, shape, dtype), [2056, 2040])
