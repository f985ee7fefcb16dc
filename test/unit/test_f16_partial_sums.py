"""An f16 sum is not split over engines (D-COMPILE-ENGINES, session 27).

NEM's f16 `conv2d`/`matmul` sums its products wide and rounds once
(D-NUM-LINEAR-FLOAT).  The engine split along a reduction loop gave each
part a partial sum of its own, rounded to f16, then added the roundings in
f16: graph fuzz campaign seed 2602's m8, an f16 Conv over 13 input channels
cut 4, 4, 4, 1 on npm_pro_x1, was 1.06 tolerances off the exact result.
These are that Conv (and a MatMul split along K alike) cut down to one node,
with inputs whose partial sums cancel: 1000 + 0.3 in the first part, -1000
in another.  Rounded per part, 1000.3 is 1000.5 and the output 0.5, 15
tolerances from onnxruntime's 0.3; summed whole, the output is f16(0.3).

The tile stage cut such a sum alike (session 28): tiles over part of the
reduction loop, each accumulating into the f16 output tile.  NEM has no
opcode writing an f16 product into an f32 accumulator, so a cut f16 sum is
refused with a diagnostic (D-COMPILE-TILES).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from compile_runs import run_compiled
from onnx import TensorProto, helper, numpy_helper

from nem.compile import CompileError, compile_onnx
from nem.compile.check import max_violation, onnxruntime_run


def _model(node: onnx.NodeProto, x: list[int], w: np.ndarray, y: list[int]) -> onnx.ModelProto:
    g = helper.make_graph(
        [node],
        "partials",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, x)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, y)],
        [numpy_helper.from_array(w, "w")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 10
    return m


def fuzz_2602_m8_conv() -> onnx.ModelProto:
    """m8's Conv_3: 13 input channels, kernel 3x2, stride 3 (split 4, 4, 4, 1)."""
    w = np.zeros((4, 13, 3, 2), np.float16)
    w[:, 0, 0, 0], w[:, 0, 0, 1], w[:, 4, 0, 0] = 1000.0, 0.3, -1000.0
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 2], strides=[3, 1])
    return _model(node, [1, 13, 4, 6], w, [1, 4, 1, 5])


def matmul_along_k(m: int = 2, k: int = 64, n: int = 3) -> onnx.ModelProto:
    """[2, 64] x [64, 3]: split along K on npm_pro_x1 before the fix."""
    w = np.zeros((k, n), np.float16)
    w[0], w[1], w[k - 1] = 1000.0, 0.3, -1000.0
    return _model(helper.make_node("MatMul", ["x", "w"], ["y"]), [m, k], w, [m, n])


def _matches_onnxruntime(model: onnx.ModelProto, **options) -> float:
    """The compiled program's largest violation of D-COMPILE-TOL on ones."""
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    inputs = {"x": np.ones(shape, np.float16)}
    result = compile_onnx(model, device="npm_pro_x1", **options)
    it, _ = run_compiled(result, model, "npm_pro_x1", inputs=inputs)
    (name, out_shape, dtype) = result.interface.outputs[0]
    got = it.read_tensor(name, out_shape, dtype)
    want = onnxruntime_run(model, inputs)["y"]
    return max_violation(got, want)


@pytest.mark.parametrize("route", ["affine", "transform"])
@pytest.mark.parametrize("make", [fuzz_2602_m8_conv, matmul_along_k])
def test_cancelling_f16_partial_sums_match_onnxruntime(make, route):
    assert _matches_onnxruntime(make(), route=route) <= 1.0


# the tile stage (D-COMPILE-TILES, session 28): tiles over part of the
# reduction each added their f16 rounding into the output tile (the MatMul:
# 0.5 for 0.3 before the fix, both routes)
@pytest.mark.parametrize("route", ["affine", "transform"])
@pytest.mark.parametrize(
    "make, sizes, cut, whole",
    [
        (matmul_along_k, (2, 3, 16), "loop 2 (64 iterations) into pieces of 16", "2,3,64"),
        (
            fuzz_2602_m8_conv,
            (1, 1, 5, 4, 3, 2, 4),
            "loop 6 (13 iterations) into pieces of 4",
            "1,1,5,4,3,2,13",
        ),
    ],
)
def test_tile_sizes_cutting_an_f16_sum_are_refused(make, sizes, cut, whole, route):
    """The fix gives the user's sizes with the reduction whole, not the
    device's L1, which is not what cut it (an outside user, session 62)."""
    with pytest.raises(CompileError) as e:
        compile_onnx(make(), device="npm_pro_x1", route=route, tile_sizes=sizes)
    msg = str(e.value)
    first = make().graph.node[0]
    node = f"node 0 '{first.name or f'{first.op_type}_0'}' ({first.op_type}): error: not supported"
    assert msg.startswith(f"<model>: {node}"), msg
    assert f"reduction {cut}" in msg, msg
    assert "D-COMPILE-TILES" in msg and f"fix: give --tile-sizes {whole} (reduction" in msg, msg
    assert "l1_size_bytes" not in msg, msg


def test_a_resize_cut_by_tile_sizes_says_it_is_a_matrix_product():
    """An f16 linear Resize of 7 elements to 13 (the outside user's model,
    session 62): refused for its cut sum, which a Resize has none of to the
    reader: the message says it is one matrix product per resized axis."""
    f16 = TensorProto.FLOAT16
    g = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")],
        "resize",
        [helper.make_tensor_value_info("x", f16, [1, 1, 7])],
        [helper.make_tensor_value_info("y", f16, [1, 1, 14])],
        [numpy_helper.from_array(np.array([1, 1, 2], np.float32), "s")],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    with pytest.raises(CompileError) as e:
        compile_onnx(model, device="npm_pro_x1", tile_sizes=(2, 3, 5))
    msg = str(e.value)
    assert "(Resize): error: not supported: its tiles cut reduction loop" in msg, msg
    assert "a Resize is one matrix product per resized axis, D-COMPILE-RESIZE" in msg, msg


def test_an_f16_sum_larger_than_l1_is_refused():
    """[1, 262144] x [262144, 1]: one output's operands are 1 MiB, twice the
    budget of npm_pro_x1's L1 (half of 1 MiB): K is cut whatever the sizes."""
    with pytest.raises(CompileError, match=r"reduction loop 2 \(262144 iterations\)"):
        compile_onnx(matmul_along_k(1, 262144, 1), device="npm_pro_x1", engines=1)


@pytest.mark.parametrize("route", ["affine", "transform"])
def test_tile_sizes_leaving_an_f16_sum_whole_compile(route):
    """Tiles over the rows and columns only: each output's sum whole."""
    assert _matches_onnxruntime(matmul_along_k(), route=route, tile_sizes=(1, 1, 64)) <= 1.0


@pytest.mark.parametrize("route", ["affine", "transform"])
def test_tile_sizes_cutting_an_f16_max_compile(route):
    """A max is exact in f16, cut or not: GlobalMaxPool's window loops may
    be tiled (graph fuzz seed 2802's m2 with `--tile-sizes 2,2,2,2`)."""
    node = helper.make_node("GlobalMaxPool", ["x"], ["y"])
    g = helper.make_graph(
        [node],
        "max",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 3, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 3, 1, 1])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    inputs = {"x": np.random.default_rng(0).standard_normal((1, 3, 5, 5)).astype(np.float16)}
    result = compile_onnx(model, device="npm_pro_x1", route=route, tile_sizes=(1, 2, 2, 2))
    it, _ = run_compiled(result, model, "npm_pro_x1", inputs=inputs)
    (name, out_shape, dtype) = result.interface.outputs[0]
    got = it.read_tensor(name, out_shape, dtype)
    np.testing.assert_array_equal(got, onnxruntime_run(model, inputs)["y"])


def test_an_f32_sum_is_still_cut():
    """f32 partial sums differ from the whole sum by f32 ulps (D-COMPILE-TOL)."""
    model = matmul_along_k()
    for t in (*model.graph.input, *model.graph.output):
        t.type.tensor_type.elem_type = TensorProto.FLOAT
    model.graph.initializer[0].CopyFrom(
        numpy_helper.from_array(
            numpy_helper.to_array(model.graph.initializer[0]).astype(np.float32), "w"
        )
    )
    result = compile_onnx(model, device="npm_pro_x1", tile_sizes=(2, 3, 16))
    assert "matmul.async" in result.nem
