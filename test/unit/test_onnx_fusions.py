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
from onnx import helper, numpy_helper  # noqa: E402

from nem.frontends.onnx.fusions import fuse_erf_gelu, fused_into  # noqa: E402


def _model(form: str, extra_user: bool = False, dtype=np.float32, scale: float | None = None):
    """The GELU chain of `form` over x [3, 20] of `dtype`, its constants
    that type (the Div's or Mul's `scale`, default sqrt 2 or 1 / sqrt 2)."""
    c = {"div": ("Div", np.sqrt(2.0)), "mul": ("Mul", 1 / np.sqrt(2.0))}[form[:3]]
    inits = [
        numpy_helper.from_array(np.array(v, dtype), n)
        for n, v in (("c", c[1] if scale is None else scale), ("one", 1.0), ("half", 0.5))
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
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    outputs = [helper.make_tensor_value_info("y", elem, [3, 20])]
    if extra_user:
        outputs.append(helper.make_tensor_value_info("e", elem, [3, 20]))
    graph = helper.make_graph(
        nodes,
        "gelu",
        [helper.make_tensor_value_info("x", elem, [3, 20])],
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


@pytest.mark.parametrize("form", ["div_half_last", "mul_half_first"])
def test_an_f16_erf_gelu_is_one_gelu(form):
    """An f16 model's sqrt 2 is 1.4140625 (1 / sqrt 2: 0.70703125), 1e-4 off:
    the chain is a GELU where its constants are the f16 roundings, as
    onnxruntime's GeluFusion compares f16 constants (an outside user's f16
    encoder ran its GELU's erf as an escape-hatch kernel, 6.2k of 33.1k
    cycles, session 66); an f32 constant that far off is no GELU."""
    graph = onnx.GraphProto()
    graph.CopyFrom(_model(form, dtype=np.float32, scale=float(np.float16(np.sqrt(2.0)))).graph)
    assert fuse_erf_gelu(graph) == 0
    model = _model(form, dtype=np.float16)
    graph.CopyFrom(model.graph)
    assert fuse_erf_gelu(graph) == 1
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
