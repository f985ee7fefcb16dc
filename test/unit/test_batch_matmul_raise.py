"""Batched matmuls raised one matrix per tile (D-COMPILE-BATCH-TILE).

An ONNX MatMul with batch dimensions (`linalg.batch_matmul`) split over
npm_pro_x1's 4 engines left 2 or more matrices in one engine's tile when the
batch exceeded 4; the lowering raises one matrix product per tile (a `conv2d`
of one group: the batch dimension is not next to a channel dimension,
D-LOW-GROUPCONV), so the whole MatMul ran as escape-hatch kernels (0% of its
FLOPs raised on e6acd13) and the reason named a grouped convolution.  The
tiling now cuts a batch loop by 1: every matrix is one `conv2d` + `add`.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlir.ir")
pytest.importorskip("onnx")

from compile_runs import DEVICE, run_compiled  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from nem.compile import compile_onnx, nest_ir, tiling  # noqa: E402
from nem.compile.check import onnxruntime_run  # noqa: E402
from nem.runtime.api import NemInterpreter  # noqa: E402


def bmm_model(a_shape: tuple[int, ...], b_shape: tuple[int, ...], f16: bool = False):
    """y = MatMul(a, b), both inputs of the graph."""
    t = TensorProto.FLOAT16 if f16 else TensorProto.FLOAT
    g = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
        "g",
        [
            helper.make_tensor_value_info("a", t, list(a_shape)),
            helper.make_tensor_value_info("b", t, list(b_shape)),
        ],
        [helper.make_tensor_value_info("y", t, None)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.slow  # 4 compiles and runs: 19 s
@pytest.mark.parametrize(
    "a_shape, b_shape, f16",
    [
        ((8, 64, 64), (8, 64, 64), False),
        ((2, 4, 64, 64), (2, 4, 64, 64), False),
        ((6, 32, 16), (6, 16, 24), False),
        ((8, 64, 64), (8, 64, 64), True),
    ],
)
def test_batched_matmul_is_raised_one_matrix_per_tile(a_shape, b_shape, f16):
    """All of the MatMul's FLOPs raised, one `conv2d` per matrix, results
    within tolerance of onnxruntime's (f16: NEM sums in f32 and rounds
    once, D-NUM-LINEAR-FLOAT), race-free and alike under 2 schedules."""
    model = bmm_model(a_shape, b_shape, f16)
    result = compile_onnx(model, device=DEVICE)
    assert result.flops is not None and result.flops.share == 1.0, result.flops.remark()
    assert 'op="mlir.kernel"' not in result.nem
    it, inputs = run_compiled(result, model)
    ((name, shape, dtype),) = result.interface.outputs
    again = NemInterpreter(device=DEVICE)  # the tasks of one run, by opcode
    again.load_string(result.nem, file="m.nem")
    for arg, _, _ in result.interface.inputs:
        again.write_tensor(arg, inputs[result.interface.onnx_names[arg]])
    assert again.run().counts["conv2d"] == int(np.prod(a_shape[:-2]))
    want = onnxruntime_run(model, inputs)["y"]
    tol = 4e-3 if f16 else 1e-5
    np.testing.assert_allclose(
        it.read_tensor(name, shape, dtype).astype(np.float32),
        want.astype(np.float32),
        rtol=tol,
        atol=tol,
    )


BMM = """
func.func @f(%a: memref<8x64x32xf32>, %b: memref<8x32x16xf32>, %c: memref<8x64x16xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<8x64x32xf32>, memref<8x32x16xf32>)
                      outs(%c : memref<8x64x16xf32>)
  return
}
"""
MM = """
func.func @f(%a: memref<64x32xf32>, %b: memref<32x16xf32>, %c: memref<64x16xf32>) {
  linalg.matmul ins(%a, %b : memref<64x32xf32>, memref<32x16xf32>) outs(%c : memref<64x16xf32>)
  return
}
"""
ADD = """
func.func @f(%a: memref<8x64x32xf32>, %c: memref<8x64x32xf32>) {
  linalg.add ins(%a, %a : memref<8x64x32xf32>, memref<8x64x32xf32>)
             outs(%c : memref<8x64x32xf32>)
  return
}
"""
CONV = """
func.func @f(%x: memref<4x10x10x8xf32>, %w: memref<3x3x8x16xf32>, %y: memref<4x8x8x16xf32>) {
  linalg.conv_2d_nhwc_hwcf ins(%x, %w : memref<4x10x10x8xf32>, memref<3x3x8x16xf32>)
                           outs(%y : memref<4x8x8x16xf32>)
  return
}
"""

POOL = """
func.func @f(%x: memref<4x10x10x8xf32>, %k: memref<3x3xf32>, %y: memref<4x8x8x8xf32>) {
  linalg.pooling_nhwc_sum ins(%x, %k : memref<4x10x10x8xf32>, memref<3x3xf32>)
                          outs(%y : memref<4x8x8x8xf32>)
  return
}
"""


def _band(text: str):
    from mlir import ir
    from mlir.passmanager import PassManager

    ctx = ir.Context()
    module = ir.Module.parse(text, ctx)
    PassManager.parse("builtin.module(func.func(convert-linalg-to-affine-loops))", ctx).run(
        module.operation
    )
    fn = module.body.operations[0]
    (root,) = nest_ir.top_level_nests(fn)
    band = nest_ir.analyze_band(root)
    assert band is not None
    return module, band


@pytest.mark.parametrize(
    "text, units",
    [(BMM, {0}), (MM, set()), (ADD, set()), (CONV, set()), (POOL, set())],
    ids=["batch_matmul", "matmul", "add", "conv", "sum_pool"],
)
def test_batch_loops(text, units):
    """Only a batch of contractions has a batch loop (a batched elementwise
    op has no reduction, a convolution's batch does not index its weights,
    a window sum reads one operand), and the tile sizes cut it by 1 whatever
    the budget."""
    module, band = _band(text)
    assert nest_ir.batch_loops(band) == units
    sizes = tiling.choose_tile_sizes(band, 1 << 20)
    assert all(sizes[i] == 1 for i in units)
    if units:
        assert sizes[1:] == band.extents[1:]  # the rest whole: it fits
