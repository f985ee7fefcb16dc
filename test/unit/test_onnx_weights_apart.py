"""The importer's handling of large weights (issue 30: VGG-19's import):
the simplifier's computed initializers are handed over as arrays instead of
being serialized into the model and decoded back (`prepare.kept_apart`),
and a transposed Gemm weight is copied into C order block by block
(`graph.c_order`).  Both give the module and weights of the plain way."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxscript")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nem.frontends.onnx import import_onnx, prepare  # noqa: E402
from nem.frontends.onnx.graph import TRANSPOSE_BLOCK, c_order  # noqa: E402

N, K = 300, 517  # neither a multiple of the block


def _gemm() -> onnx.ModelProto:
    """Y = X B^T + C with B = R * ConstantOfShape(2) (computed by the
    simplifier, large) and C a plain initializer."""
    rng = np.random.default_rng(0)
    r = rng.standard_normal((N, K)).astype(np.float32)
    nodes = [
        helper.make_node(
            "ConstantOfShape",
            ["shape"],
            ["two"],
            value=numpy_helper.from_array(np.array([2.0], np.float32)),
        ),
        helper.make_node("Mul", ["r", "two"], ["b"]),
        helper.make_node("Gemm", ["x", "b", "c"], ["y"], transB=1),
    ]
    g = helper.make_graph(
        nodes,
        "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, N])],
        [
            numpy_helper.from_array(r, "r"),
            numpy_helper.from_array(np.array([N, K], np.int64), "shape"),
            numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "c"),
        ],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _imported(model: onnx.ModelProto) -> tuple[str, dict[str, bytes]]:
    im = import_onnx(model)
    return str(im.module), {k: np.ascontiguousarray(a).tobytes() for k, a in im.weights.items()}


def test_computed_weights_kept_apart_import_the_same(monkeypatch):
    model = _gemm()
    prepared = prepare.prepare(model)
    (b,) = [i for i in prepared.model.graph.initializer if i.dims == [N, K]]
    assert b.data_location == TensorProto.EXTERNAL and not b.raw_data
    assert list(prepared.arrays) == [b.name]
    assert np.array_equal(
        prepared.arrays[b.name], 2 * numpy_helper.to_array(model.graph.initializer[0])
    )
    apart = _imported(model)
    monkeypatch.setattr(prepare, "kept_apart", lambda mir, arrays: None)
    assert not prepare.prepare(model).arrays
    assert _imported(model) == apart


@pytest.mark.parametrize("shape", [(N, K), (TRANSPOSE_BLOCK, 1), (1, 3 * TRANSPOSE_BLOCK + 1)])
def test_c_order_of_a_transposed_matrix(shape):
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    got = c_order(a.T)
    assert got.flags.c_contiguous and np.array_equal(got, a.T)
    assert c_order(a) is a  # already in C order: not copied
