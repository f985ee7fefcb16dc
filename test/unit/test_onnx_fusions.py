"""A hand-written erf GELU is one `gelu` task (D-COMPILE-GELU-ERF), in the
forms exporters and users write; a chain whose intermediate has another
user is left as it is."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("mlir.ir")

from compile_runs import run_api  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from nem.frontends.onnx.fusions import fuse_erf_gelu, fused_into  # noqa: E402


def _model(form: str, extra_user: bool = False):
    c = {"div": ("Div", 1.4142135381698608), "mul": ("Mul", 0.7071067690849304)}[form[:3]]
    inits = [
        numpy_helper.from_array(np.array(v, np.float32), n)
        for n, v in (("c", c[1]), ("one", 1.0), ("half", 0.5))
    ]
    nodes = [
        helper.make_node(
            c[0], ["x", "c"] if form[:3] == "div" else ["c", "x"], ["d"], name="scale"
        ),
        helper.make_node("Erf", ["d"], ["e"], name="erf"),
        helper.make_node("Add", ["one", "e"], ["a"], name="add"),
    ]
    if form.endswith("half_last"):
        nodes += [
            helper.make_node("Mul", ["a", "x"], ["m"], name="mul"),
            helper.make_node("Mul", ["m", "half"], ["y"], name="half"),
        ]
    else:
        nodes += [
            helper.make_node("Mul", ["half", "x"], ["h"], name="half"),
            helper.make_node("Mul", ["h", "a"], ["y"], name="mul"),
        ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 20])]
    if extra_user:
        outputs.append(helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 20]))
    graph = helper.make_graph(
        nodes,
        "gelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 20])],
        outputs,
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("form", ["div_half_last", "mul_half_first"])
def test_erf_gelu_is_one_gelu(form):
    model = _model(form)
    graph = onnx.GraphProto()
    graph.CopyFrom(model.graph)
    assert fuse_erf_gelu(graph) == 1
    assert [(n.op_type, n.name, list(n.input), list(n.output)) for n in graph.node] == [
        ("Gelu", "erf", ["x"], ["y"])
    ]
    result = run_api(model)  # compiled, run, vs onnxruntime
    assert " = gelu." in result.nem and result.flops is not None and result.flops.share == 1.0


def test_a_shared_intermediate_keeps_the_nodes():
    graph = _model("div_half_last", extra_user=True).graph
    assert fuse_erf_gelu(graph) == 0 and len(graph.node) == 5


def test_a_removed_node_goes_to_the_node_that_computes_its_output():
    """`fused_into` (D-BC-NODES, for the roofline report): a node folded
    into the one now computing its output (BatchNormalization into its
    Conv), a chain of removed nodes into the node computing the chain's
    end (a GELU's parts into the `Gelu` named after its Erf, which itself
    changed); a removed Identity whose readers kept theirs, nowhere."""
    user = [
        ("conv", ["x", "w"], ["c"]),
        ("bn", ["c", "s", "b", "m", "v"], ["n"]),
        ("div", ["n", "k"], ["g0"]),
        ("erf", ["g0"], ["g1"]),
        ("add", ["g1", "one"], ["g2"]),
        ("mul", ["n", "g2"], ["g"]),
        ("id", ["g"], ["i"]),
        ("relu", ["i"], ["y"]),
    ]
    final = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w2"], ["n"], name="conv"),
            helper.make_node("Gelu", ["n"], ["g"], name="erf"),
            helper.make_node("Relu", ["g"], ["y"], name="relu"),
        ],
        "g",
        [],
        [],
    )
    assert fused_into(user, final) == {"conv": ["bn"], "erf": ["div", "add", "mul"]}
