"""Elementwise producers are fused into their only consumer before
bufferization (D-COMPILE-FUSE): a BatchNormalization that no Conv absorbs and
the Relu after it are one `linalg.generic`, one nest, raised op by op, and the
result still matches onnxruntime; a value with two users is not fused."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from compile_runs import run_api  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _model(two_users: bool = False):
    """MaxPool -> BatchNormalization -> Relu (the BN follows no Conv: the
    importer keeps it as a scale-and-shift), DenseNet's pattern."""
    rng = np.random.default_rng(7)
    c = 8
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("s", rng.uniform(0.5, 1.5, c)), ("b", rng.normal(size=c)),
        ("m", rng.normal(size=c)), ("v", rng.uniform(0.5, 2.0, c)))]
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("BatchNormalization", ["p", "s", "b", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 4, 4])]
    if two_users:
        outputs.append(helper.make_tensor_value_info("n", TensorProto.FLOAT, [1, c, 4, 4]))
    graph = helper.make_graph(nodes, "bn_relu", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, c, 8, 8])], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _generics(result) -> int:
    return result.stage("bufferize").text.count("linalg.generic")


def test_batchnorm_and_relu_are_one_generic():
    result = run_api(_model())                      # compiled, run, vs onnxruntime
    assert _generics(result) == 1
    assert " = relu." in result.nem and result.flops is not None and result.flops.share == 1.0


def test_a_value_with_two_users_is_not_fused():
    result = run_api(_model(two_users=True))
    assert _generics(result) == 2
