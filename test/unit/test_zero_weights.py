"""A model whose weights are zeros compiles and computes zeros: the compile
says so without -v, naming the weights and their nodes; zero biases,
paddings and `Max(x, 0)` are ordinary and stay silent
(D-COMPILE-ZERO-WEIGHTS)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("mlir.ir")

from doc_blocks import ROOT, blocks, run_console  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nem.frontends.onnx import import_onnx  # noqa: E402
from nem.frontends.zero_weights import SHOWN  # noqa: E402

RNG = np.random.default_rng(0)


def _model(nodes, inits, x_shape=(1, 8), y_shape=(1, 4), y="y"):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, list(y_shape))],
        [numpy_helper.from_array(a.astype(np.float32), n) for n, a in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _gemm(weight, bias):
    return _model(
        [
            helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"], name="fc"),
            helper.make_node("Relu", ["h"], ["y"], name="relu"),
        ],
        {"fc.weight": weight, "fc.bias": bias},
    )


def _warnings(model, simplify=True):
    return import_onnx(model, file="m.onnx", simplify=simplify).warnings


def test_a_zero_gemm_weight_is_named_with_its_node():
    assert _warnings(_gemm(np.zeros((8, 4)), RNG.standard_normal(4))) == [
        "m.onnx: warning: 1 node multiplies the model's data by a weight of zeros, so it "
        "computes without its input: node 0 'fc' (Gemm) by 'fc.weight'; was the model "
        "exported before its trained parameters were loaded? (D-COMPILE-ZERO-WEIGHTS)"
    ]


def test_trained_weights_and_zero_biases_say_nothing():
    assert _warnings(_gemm(RNG.standard_normal((8, 4)), np.zeros(4))) == []
    relu_as_max = _model(
        [helper.make_node("Max", ["x", "zero"], ["y"], name="m")],
        {"zero": np.zeros(())},
        y_shape=(1, 8),
    )
    assert _warnings(relu_as_max) == []


@pytest.mark.parametrize("simplify", [True, False])
def test_every_zero_multiplier_is_counted_the_first_ones_named(simplify):
    n = SHOWN + 2
    nodes, inits, prev = [], {}, "x"
    for i in range(n):
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"], name=f"mm{i}"))
        inits[f"w{i}"] = np.zeros((8, 8))
        prev = f"h{i}"
    nodes.append(helper.make_node("Mul", [prev, "scale"], ["y"], name="scale"))
    inits["scale"] = np.zeros(())
    (line,) = _warnings(_model(nodes, inits, y_shape=(1, 8)), simplify)
    # the simplifier keeps one of equal initializers: each node is named with its own
    w = ("w0", "w0", "w0") if simplify else ("w0", "w1", "w2")
    assert line.startswith(
        f"m.onnx: warning: {n + 1} nodes multiply the model's data by "
        "weights of zeros, so they compute without their inputs: "
        f"node 0 'mm0' (MatMul) by '{w[0]}'; node 1 'mm1' (MatMul) by "
        f"'{w[1]}'; node 2 'mm2' (MatMul) by '{w[2]}' and {n + 1 - SHOWN} "
        "more;"
    ), line


def test_a_zero_conv_kernel_and_batchnorm_scale():
    x = (1, 2, 5, 5)
    nodes = [
        helper.make_node("Conv", ["x", "k"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "mu", "var"], ["y"], name="bn"),
    ]
    inits = {
        "k": np.zeros((3, 2, 3, 3)),
        "s": np.zeros(3),
        "b": np.ones(3),
        "mu": np.zeros(3),
        "var": np.ones(3),
    }
    (line,) = _warnings(_model(nodes, inits, x, (1, 3, 5, 5)), simplify=False)
    assert (
        ": 2 nodes" in line
        and "node 0 'conv' (Conv) by 'k'; node 1 'bn' (BatchNormalization) by 's';" in line
    ), line
    # simplified, the BatchNormalization is folded into the Conv: one kernel of zeros
    (line,) = _warnings(_model(nodes, inits, x, (1, 3, 5, 5)))
    assert ": 1 node" in line and "'conv' (Conv) by" in line, line


@pytest.mark.slow  # a compile: 3 s
def test_the_compile_md_example_prints_it_without_v(tmp_path):
    """docs/compile.md's untrained MLP: written, compiled, the line exactly."""
    doc = (ROOT / "docs/compile.md").read_text(encoding="utf-8")
    (script,) = [b for b in blocks(doc) if b.options.get("file") == "untrained.py"]
    (console,) = [b for b in blocks(doc) if b.lang == "console" and "untrained.py" in b.text]
    (tmp_path / "untrained.py").write_text(script.text, encoding="utf-8")
    run_console(console, tmp_path, "docs/compile.md", tmp_path)


MLIR_MATMUL = """\
func.func @f(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %w = arith.constant dense<0.0> : tensor<8x4xf32>
  %z = arith.constant dense<0.0> : tensor<2x4xf32>
  %y = linalg.matmul ins(%x, %w : tensor<2x8xf32>, tensor<8x4xf32>)
                     outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
"""


def test_mlir_input_with_a_zero_matmul_weight_is_warned_at_the_op(tmp_path):
    """The same check for a `.mlir` model: the op named at its line and
    column; a zero accumulator (`outs`) and trained weights stay silent."""
    from nem.compile import compile_mlir

    f = tmp_path / "m.mlir"
    f.write_text(MLIR_MATMUL)
    assert compile_mlir(f, device="npm_pro_x1").warnings == [
        f"{f}: warning: 1 op multiplies the model's data by a weight of zeros, so it "
        f"computes without its input: 'linalg.matmul' at {f}:4:8 by operand 1; was the model "
        "exported before its trained parameters were loaded? (D-COMPILE-ZERO-WEIGHTS)"
    ]
    trained = MLIR_MATMUL.replace(
        "dense<0.0> : tensor<8x4xf32>",
        "dense<[" + ", ".join(["[1.0, 0.0, 0.0, 0.0]"] * 8) + "]> : tensor<8x4xf32>",
    )
    f.write_text(trained)
    assert compile_mlir(f, device="npm_pro_x1").warnings == []
