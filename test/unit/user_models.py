"""Models written from the README and docs/compile.md alone (outsider acceptance, issues 16/12).

Each builder returns an ONNX ``ModelProto`` made with the ``onnx`` helper API and
differs from the bundled samples (``nem.frontends.onnx.samples``): odd spatial
sizes that no tile divides, batch > 1, grouped/depthwise convolutions with
batch norms, constants on the left of Sub/Div, broadcast constants of shape
``[C]`` and ``[1, C, 1, 1]``, Gemm with ``transB``/``alpha``/``beta``, gated
activations, multi-head attention with a scale Div, LayerNormalization on the
last axis with a non-default epsilon.

``python test/unit/user_models.py DIR`` writes every model in f32 and f16 with
an input ``.npy`` next to it, for trying the command-line tools by hand.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 20  # Gelu is opset 20; LayerNormalization 17; Softmax single-axis 13


def _elem(dtype: str) -> int:
    return TensorProto.FLOAT if dtype == "f32" else TensorProto.FLOAT16


def _np(dtype: str) -> type:
    return np.float32 if dtype == "f32" else np.float16


class _Graph:
    """A tiny helper around onnx.helper: nodes, initializers, one input, one output."""

    def __init__(self, dtype: str, seed: int) -> None:
        self.dtype = dtype
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def const(
        self, name: str, shape: tuple[int, ...], scale: float = 0.3, value: np.ndarray | None = None
    ) -> str:
        arr = (value if value is not None else self.rng.standard_normal(shape) * scale).astype(
            _np(self.dtype)
        )
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def ints(self, name: str, values: list[int]) -> str:
        self.inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def node(self, op: str, inputs: list[str], out: str | None = None, **attrs: object) -> str:
        self.count += 1
        out = out or f"{op.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{op}_{self.count}", **attrs))
        return out

    def model(
        self, name: str, inp: tuple[str, list[int]], out: tuple[str, list[int]]
    ) -> onnx.ModelProto:
        e = _elem(self.dtype)
        graph = helper.make_graph(
            self.nodes,
            name,
            [helper.make_tensor_value_info(inp[0], e, inp[1])],
            [helper.make_tensor_value_info(out[0], e, out[1])],
            initializer=self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 10
        onnx.checker.check_model(model, full_check=True)
        return model


def mobilenet_block(dtype: str) -> onnx.ModelProto:
    """Depthwise 3x3 (groups=C) + BN + Clip(0,6), pointwise 1x1 + BN + Clip(0,6); 2x8x17x13."""
    g = _Graph(dtype, 1)
    c, f = 8, 12

    def bn(x: str, ch: int, tag: str) -> str:
        return g.node(
            "BatchNormalization",
            [
                x,
                g.const(f"{tag}_s", (ch,), value=1 + 0.1 * g.rng.standard_normal(ch)),
                g.const(f"{tag}_b", (ch,), 0.1),
                g.const(f"{tag}_m", (ch,), 0.1),
                g.const(f"{tag}_v", (ch,), value=0.5 + g.rng.random(ch)),
            ],
            epsilon=1e-3,
        )

    lo, hi = g.const("lo", (), value=np.array(0.0)), g.const("hi", (), value=np.array(6.0))
    y = g.node("Conv", ["x", g.const("dw_w", (c, 1, 3, 3), 0.5)], group=c, pads=[1, 1, 1, 1])
    y = g.node("Clip", [bn(y, c, "bn1"), lo, hi])
    y = g.node("Conv", [y, g.const("pw_w", (f, c, 1, 1), 0.4), g.const("pw_b", (f,), 0.1)])
    g.node("Clip", [bn(y, f, "bn2"), lo, hi], out="y")
    return g.model("mobilenet_block", ("x", [2, c, 17, 13]), ("y", [2, f, 17, 13]))


def unet_block(dtype: str) -> onnx.ModelProto:
    """Encoder conv, AveragePool 3x3 s1 p1, Concat of the skip connection, 1x1 fuse; 1x4x11x9."""
    g = _Graph(dtype, 2)
    e = g.node(
        "Relu",
        [
            g.node(
                "Conv",
                ["x", g.const("e_w", (6, 4, 3, 3), 0.3), g.const("e_b", (6,), 0.1)],
                pads=[1, 1, 1, 1],
            )
        ],
    )
    p = g.node(
        "AveragePool",
        [e],
        kernel_shape=[3, 3],
        strides=[1, 1],
        pads=[1, 1, 1, 1],
        count_include_pad=0,
    )
    cat = g.node("Concat", [p, "x", e], axis=1)
    g.node("Conv", [cat, g.const("f_w", (5, 16, 1, 1), 0.3), g.const("f_b", (5,), 0.1)], out="y")
    return g.model("unet_block", ("x", [1, 4, 11, 9]), ("y", [1, 5, 11, 9]))


def gated_mlp(dtype: str) -> onnx.ModelProto:
    """Gemm(transB=1, alpha, beta) -> x*Sigmoid(x) gate -> Gemm -> Gelu(tanh) -> Gemm; batch 3."""
    g = _Graph(dtype, 3)
    h = g.node(
        "Gemm",
        ["x", g.const("w1", (24, 10), 0.3), g.const("b1", (24,), 0.2)],
        transB=1,
        alpha=0.5,
        beta=2.0,
    )
    u = g.node("Gemm", ["x", g.const("wu", (10, 24), 0.3), g.const("bu", (1, 24), 0.2)])
    gate = g.node("Mul", [h, g.node("Sigmoid", [h])])
    m = g.node("Mul", [gate, u])
    m = g.node("Gelu", [m], approximate="tanh")
    g.node(
        "Gemm",
        [m, g.const("w2", (7, 24), 0.3), g.const("b2", (7,), 0.1)],
        out="y",
        transB=1,
        beta=0.5,
    )
    return g.model("gated_mlp", ("x", [3, 10]), ("y", [3, 7]))


def attention(dtype: str) -> onnx.ModelProto:
    """Two-head self-attention, batch 2, 5 tokens of 8: Reshape/Transpose/MatMul/Div/Softmax, LayerNorm."""
    g = _Graph(dtype, 4)
    b, s, d, h = 2, 5, 8, 2

    def heads(w: str) -> str:
        t = g.node("MatMul", ["x", g.const(w, (d, d), 0.4)])
        t = g.node("Reshape", [t, g.ints(f"{w}_shape", [b, s, h, d // h])])
        return g.node("Transpose", [t], perm=[0, 2, 1, 3])

    q, k, v = heads("wq"), heads("wk"), heads("wv")
    kt = g.node("Transpose", [k], perm=[0, 1, 3, 2])
    sc = g.node("Div", [g.node("MatMul", [q, kt]), g.const("scale", (), value=np.array(2.0))])
    a = g.node("MatMul", [g.node("Softmax", [sc], axis=-1), v])
    a = g.node("Transpose", [a], perm=[0, 2, 1, 3])
    a = g.node("Reshape", [a, g.ints("flat_shape", [b, s, d])])
    r = g.node("Add", [a, "x"])
    g.node(
        "LayerNormalization",
        [
            r,
            g.const("ln_g", (d,), value=1 + 0.1 * g.rng.standard_normal(d)),
            g.const("ln_b", (d,), 0.1),
        ],
        out="y",
        axis=-1,
        epsilon=1e-3,
    )
    return g.model("attention", ("x", [b, s, d]), ("y", [b, s, d]))


def eltwise_mix(dtype: str) -> onnx.ModelProto:
    """Broadcast Add of [1,C,1,1] and of [W], Sub/Div with the constant on the left, LeakyRelu, Gelu."""
    g = _Graph(dtype, 5)
    a = g.node("Add", ["x", g.const("cb", (1, 3, 1, 1), 0.5)])
    a = g.node("Add", [a, g.const("wb", (13,), 0.5)])
    s = g.node("Sub", [g.const("one", (), value=np.array(1.0)), a])
    s = g.node("LeakyRelu", [s], alpha=0.2)
    den = g.node(
        "Add",
        [g.node("Mul", [s, s]), g.const("two", (1, 3, 1, 1), value=np.full((1, 3, 1, 1), 2.0))],
    )
    q = g.node(
        "Div", [g.const("num", (3, 1, 1), value=np.array([1.0, -2.0, 3.0]).reshape(3, 1, 1)), den]
    )
    g.node("Gelu", [g.node("Mul", [q, a])], out="y")
    return g.model("eltwise_mix", ("x", [2, 3, 17, 13]), ("y", [2, 3, 17, 13]))


def grouped_cnn(dtype: str) -> onnx.ModelProto:
    """Strided conv, grouped conv (groups=2) + BN + LeakyRelu, MaxPool 3x3 s2 (non-dividing),
    GlobalAveragePool, Flatten, Gemm, Softmax; batch 2, 3x17x13."""
    g = _Graph(dtype, 6)
    y = g.node("Conv", ["x", g.const("c1_w", (8, 3, 3, 3), 0.3)], strides=[2, 1], pads=[1, 0, 1, 2])
    y = g.node(
        "Conv",
        [y, g.const("c2_w", (8, 4, 3, 3), 0.3), g.const("c2_b", (8,), 0.1)],
        group=2,
        pads=[1, 1, 1, 1],
        dilations=[1, 1],
    )
    y = g.node(
        "BatchNormalization",
        [
            y,
            g.const("bn_s", (8,), value=1 + 0.1 * g.rng.standard_normal(8)),
            g.const("bn_b", (8,), 0.1),
            g.const("bn_m", (8,), 0.1),
            g.const("bn_v", (8,), value=0.5 + g.rng.random(8)),
        ],
        epsilon=1e-5,
    )
    y = g.node("LeakyRelu", [y], alpha=0.1)
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2])
    y = g.node("Flatten", [g.node("GlobalAveragePool", [y])], axis=1)
    y = g.node("Gemm", [y, g.const("fc_w", (8, 6), 0.5), g.const("fc_b", (6,), 0.1)])
    g.node("Softmax", [y], out="y", axis=1)
    return g.model("grouped_cnn", ("x", [2, 3, 17, 13]), ("y", [2, 6]))


MODELS: dict[str, Callable[[str], onnx.ModelProto]] = {
    "mobilenet_block": mobilenet_block,
    "unet_block": unet_block,
    "gated_mlp": gated_mlp,
    "attention": attention,
    "eltwise_mix": eltwise_mix,
    "grouped_cnn": grouped_cnn,
}


def input_array(model: onnx.ModelProto, seed: int = 0) -> tuple[str, np.ndarray]:
    """The model's one input, random normal, in its element type."""
    inp = model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    dtype = np.float32 if inp.type.tensor_type.elem_type == TensorProto.FLOAT else np.float16
    return inp.name, np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, build in MODELS.items():
        for dtype in ("f32", "f16"):
            model = build(dtype)
            onnx.save(model, out / f"{name}_{dtype}.onnx")
            np.save(out / f"{name}_{dtype}.x.npy", input_array(model)[1])


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
