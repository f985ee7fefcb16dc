"""Small ONNX models and their timed runs for the roofline tests
(`test_roofline_groups.py`, `test_roofline_ideal.py`): compiled as
`nem-compile -o M.nemb` writes them, so tasks carry their ONNX nodes
(D-BC-NODES)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from nem.runtime import NemInterpreter


def small_model(name, inputs, outputs, nodes, weights):
    """A checked opset-13 model of `nodes`, its f32 weights drawn from a
    seeded normal distribution (x 0.05)."""
    rng = np.random.default_rng(19)
    inits = [
        numpy_helper.from_array((rng.standard_normal(shape) * 0.05).astype(np.float32), w)
        for w, shape in weights
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def timed_session(model, label):
    """`model` compiled as `nem-compile -o LABEL.nemb` writes it (so its
    tasks carry their ONNX nodes, D-BC-NODES), run timed to its end: the
    session and the program's text form (the lines the report gives)."""
    from nem.cli.nem_compile import nemb_bytes
    from nem.compile import compile_onnx

    result = compile_onnx(model, device="npm_pro_x1", origins=True)
    it = NemInterpreter(device="npm_pro_x1", trace=False)
    it.set_mode("timed")
    it.load_bytecode(nemb_bytes(result, f"{label}.nemb", f"{label}.onnx"), f"{label}.nemb")
    session = it.start()
    assert session.run_to_end().status == "completed"
    return session, result.nem.splitlines()


def conv_bn_relu():
    """x 1x3x16x16, Conv 3 to 8, BatchNormalization, Relu, Conv 8 to 8
    without a bias, Relu (fused into it since session 54, D-COMPILE-FUSE-L1)."""
    return small_model(
        "conv_bn",
        [("x", [1, 3, 16, 16])],
        [("y", [1, 8, 16, 16])],
        [
            helper.make_node("Conv", ["x", "C1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
            helper.make_node("Abs", ["v0"], ["v"], name="var"),
            helper.make_node("BatchNormalization", ["c1", "g", "b", "m", "v"], ["n1"], name="bn"),
            helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
            helper.make_node("Conv", ["r1", "C2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c2"], ["y"], name="relu2"),
        ],
        [("C1", (8, 3, 3, 3)), ("g", (8,)), ("b", (8,)), ("m", (8,)), ("v0", (8,))]
        + [("C2", (8, 8, 3, 3))],
    )


def conv_bn_pool():
    """`conv_bn_relu` ending in a 2x2 MaxPool instead of the last Relu: a
    node of another op type, a group of its own (the Relu is fused into the
    Conv before it since session 54)."""
    model = conv_bn_relu()
    g = model.graph
    last = g.node[len(g.node) - 1]
    last.CopyFrom(
        helper.make_node("MaxPool", ["c2"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2])
    )
    g.output[0].CopyFrom(
        helper.make_tensor_value_info("y", g.output[0].type.tensor_type.elem_type, [1, 8, 8, 8])
    )
    return model
