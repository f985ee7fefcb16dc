"""Small real ONNX models built with the `onnx` helper API.

The tests, `bench/bench_compile.py` and the README's quick start use these:
an MLP, a CNN (conv/bn/relu/pool/flatten/gemm), a residual block (global
pooling, softmax) and a transformer-style block (matmul, softmax,
layernorm), each in float32 or float16, with seeded random weights.

    python -m nem.frontends.onnx.samples mlp -o mlp.onnx [--dtype f16] [--input x.npy]

writes the model (and, with `--input`, a random input for it); `mbv2_block`,
a MobileNetV2 block at 56x56, is the model of docs/compile.md's roofline
example (`EXAMPLES`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OnnxAttrValue = Any
"""A node attribute's value as `onnx.helper.make_node` takes it (an int, float,
string, tensor, graph or a list of them; onnx types it Any)."""

OPSET = 20  # Gelu and LayerNormalization are default-domain ops from here on
DTYPES = {"f32": (np.float32, TensorProto.FLOAT), "f16": (np.float16, TensorProto.FLOAT16)}


class GraphBuilder:
    """Nodes, initializers and value names of one graph in construction."""

    def __init__(self, dtype: str, seed: int = 0):
        self.np_dtype, self.onnx_dtype = DTYPES[dtype]
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def init(self, name: str, array: np.ndarray, exact_dtype: bool = False) -> str:
        arr = array if exact_dtype else array.astype(self.np_dtype)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def rand(self, name: str, shape: Sequence[int], scale: float = 1.0) -> str:
        return self.init(name, self.rng.uniform(-scale, scale, size=shape))

    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        n_out: int = 1,
        name: str | None = None,
        **attrs: OnnxAttrValue,
    ) -> str:
        name = name or self.fresh(op_type.lower())
        outs = [f"{name}_out{k}" if k else f"{name}_out" for k in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs[0]

    def model(
        self, name: str, inputs: dict[str, Sequence[int]], outputs: dict[str, str]
    ) -> onnx.ModelProto:
        """The model; `outputs` maps output names to the values they expose
        (through Identity nodes; their types come from ONNX's inference)."""
        ins = [
            helper.make_tensor_value_info(k, self.onnx_dtype, list(v)) for k, v in inputs.items()
        ]
        probe = helper.make_model(
            helper.make_graph(self.nodes, name, ins, [], self.inits),
            opset_imports=[helper.make_opsetid("", OPSET)],
        )
        probe.ir_version = 9
        probe = onnx.shape_inference.infer_shapes(probe, strict_mode=True)
        types = {v.name: v.type for v in probe.graph.value_info}
        outs = []
        for out, value in outputs.items():
            self.nodes.append(helper.make_node("Identity", [value], [out], name=f"{out}_id"))
            vi = onnx.ValueInfoProto(name=out)
            vi.type.CopyFrom(types[value])
            outs.append(vi)
        g = helper.make_graph(self.nodes, name, ins, outs, self.inits)
        m = helper.make_model(
            g,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="nem.frontends.onnx.samples",
        )
        m.ir_version = 9
        onnx.checker.check_model(m, full_check=True)
        return m

    # composite layers
    def linear(self, x: str, k: int, n: int, relu: bool = False, name: str = "fc") -> str:
        w = self.rand(f"{name}_w", (k, n), 1.0 / np.sqrt(k))
        b = self.rand(f"{name}_b", (n,), 0.1)
        y = self.op("Gemm", [x, w, b], name=name)
        return self.op("Relu", [y], name=f"{name}_relu") if relu else y

    def conv_bn_relu(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int = 3,
        stride: int = 1,
        relu: bool = True,
        name: str = "conv",
    ) -> str:
        w = self.rand(f"{name}_w", (cout, cin, k, k), 1.0 / np.sqrt(cin * k * k))
        b = self.rand(f"{name}_b", (cout,), 0.1)
        y = self.op("Conv", [x, w, b], name=name, pads=[k // 2] * 4, strides=[stride] * 2)
        bn = [
            self.init(f"{name}_bn_scale", self.rng.uniform(0.5, 1.5, cout)),
            self.rand(f"{name}_bn_bias", (cout,), 0.1),
            self.rand(f"{name}_bn_mean", (cout,), 0.1),
            self.init(f"{name}_bn_var", self.rng.uniform(0.5, 1.5, cout)),
        ]
        y = self.op("BatchNormalization", [y, *bn], name=f"{name}_bn", epsilon=1e-5)
        return self.op("Relu", [y], name=f"{name}_relu") if relu else y


def mlp(
    dtype: str = "f32", batch: int = 4, sizes: Sequence[int] = (64, 128, 64, 10)
) -> onnx.ModelProto:
    """Gemm + Relu layers, the last without Relu."""
    g = GraphBuilder(dtype, seed=1)
    x = "x"
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        x = g.linear(x, k, n, relu=i < len(sizes) - 2, name=f"fc{i + 1}")
    return g.model("mlp", {"x": (batch, sizes[0])}, {"y": x})


def cnn(dtype: str = "f32", batch: int = 1, hw: int = 16, classes: int = 10) -> onnx.ModelProto:
    """conv-bn-relu, maxpool, conv-bn-relu, avgpool, flatten, gemm."""
    g = GraphBuilder(dtype, seed=2)
    x = g.conv_bn_relu("x", 3, 8, name="conv1")
    x = g.op("MaxPool", [x], name="pool1", kernel_shape=[2, 2], strides=[2, 2])
    x = g.conv_bn_relu(x, 8, 16, name="conv2")
    x = g.op("AveragePool", [x], name="pool2", kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Flatten", [x], name="flatten", axis=1)
    side = hw // 4
    x = g.linear(x, 16 * side * side, classes, name="fc")
    return g.model("cnn", {"x": (batch, 3, hw, hw)}, {"logits": x})


def resblock(
    dtype: str = "f32", batch: int = 1, hw: int = 8, ch: int = 8, classes: int = 10
) -> onnx.ModelProto:
    """A residual block (two conv-bn, skip add, relu), global average
    pooling, flatten, gemm and softmax."""
    g = GraphBuilder(dtype, seed=3)
    stem = g.conv_bn_relu("x", 3, ch, name="stem")
    y = g.conv_bn_relu(stem, ch, ch, name="res_a")
    y = g.conv_bn_relu(y, ch, ch, relu=False, name="res_b")
    y = g.op("Add", [y, stem], name="skip")
    y = g.op("Relu", [y], name="skip_relu")
    y = g.op("GlobalAveragePool", [y], name="gap")
    y = g.op("Flatten", [y], name="flatten")
    y = g.linear(y, ch, classes, name="fc")
    y = g.op("Softmax", [y], name="softmax", axis=-1)
    return g.model("resblock", {"x": (batch, 3, hw, hw)}, {"probs": y})


def transformer(
    dtype: str = "f32", seq: int = 8, dim: int = 16, hidden: int = 32
) -> onnx.ModelProto:
    """Single-head self-attention and an MLP with residuals and layer norms
    (MatMul, Transpose, Mul, Softmax, Add, LayerNormalization, Gelu)."""
    g = GraphBuilder(dtype, seed=4)
    x = "x"
    ln1 = g.op(
        "LayerNormalization",
        [x, g.init("ln1_g", g.rng.uniform(0.5, 1.5, dim)), g.rand("ln1_b", (dim,), 0.1)],
        name="ln1",
        axis=-1,
    )
    q = g.op("MatMul", [ln1, g.rand("wq", (dim, dim), dim**-0.5)], name="q")
    k = g.op("MatMul", [ln1, g.rand("wk", (dim, dim), dim**-0.5)], name="k")
    v = g.op("MatMul", [ln1, g.rand("wv", (dim, dim), dim**-0.5)], name="v")
    kt = g.op("Transpose", [k], name="kt", perm=[0, 2, 1])
    s = g.op("MatMul", [q, kt], name="scores")
    s = g.op("Mul", [s, g.init("scale", np.array(dim**-0.5))], name="scaled")
    p = g.op("Softmax", [s], name="attn", axis=-1)
    a = g.op("MatMul", [p, v], name="ctx")
    o = g.op("MatMul", [a, g.rand("wo", (dim, dim), dim**-0.5)], name="proj")
    x1 = g.op("Add", [x, o], name="res1")
    ln2 = g.op(
        "LayerNormalization",
        [x1, g.init("ln2_g", g.rng.uniform(0.5, 1.5, dim)), g.rand("ln2_b", (dim,), 0.1)],
        name="ln2",
        axis=-1,
    )
    h = g.op("MatMul", [ln2, g.rand("w1", (dim, hidden), dim**-0.5)], name="ff1")
    h = g.op("Add", [h, g.rand("b1", (hidden,), 0.1)], name="ff1_bias")
    h = g.op("Gelu", [h], name="gelu")
    h = g.op("MatMul", [h, g.rand("w2", (hidden, dim), hidden**-0.5)], name="ff2")
    y = g.op("Add", [x1, h], name="res2")
    return g.model("transformer", {"x": (1, seq, dim)}, {"y": y})


def mbv2_block(dtype: str = "f32", hw: int = 56, ch: int = 32, expand: int = 3) -> onnx.ModelProto:
    """A MobileNetV2 inverted residual block: 1x1 expand, depthwise 3x3 and
    1x1 project convolutions, each with its BatchNormalization, ReLU6
    (Clip 0..6) after the first two, and the residual Add of the input:
    the model of docs/compile.md's worked roofline example with `--onnx`
    (an outside reviewer's, session 26; shipped since session 55, when a
    second reviewer could not reproduce the example without it)."""
    g = GraphBuilder(dtype, seed=6)
    wide = ch * expand
    lo, hi = g.init("relu6_lo", np.array(0.0)), g.init("relu6_hi", np.array(6.0))

    def conv_bn(x: str, cin: int, cout: int, k: int, group: int, name: str) -> str:
        w = g.rand(f"{name}_w", (cout, cin // group, k, k), (cin // group * k * k) ** -0.5)
        y = g.op("Conv", [x, w], name=name, pads=[k // 2] * 4, group=group)
        bn = [
            g.init(f"{name}_bn_scale", g.rng.uniform(0.5, 1.5, cout)),
            g.rand(f"{name}_bn_bias", (cout,), 0.1),
            g.rand(f"{name}_bn_mean", (cout,), 0.1),
            g.init(f"{name}_bn_var", g.rng.uniform(0.5, 1.5, cout)),
        ]
        return g.op("BatchNormalization", [y, *bn], name=f"{name}_bn", epsilon=1e-5)

    y = g.op("Clip", [conv_bn("x", ch, wide, 1, 1, "expand"), lo, hi], name="relu6_1")
    y = g.op("Clip", [conv_bn(y, wide, wide, 3, wide, "dw"), lo, hi], name="relu6_2")
    y = conv_bn(y, wide, ch, 1, 1, "project")
    y = g.op("Add", ["x", y], name="residual")
    return g.model("mbv2_block", {"x": (1, ch, hw, hw)}, {"y": y})


def single_op(
    op_type: str,
    inputs: dict[str, Sequence[int]],
    dtype: str = "f32",
    consts: dict[str, np.ndarray] | None = None,
    n_out: int = 1,
    **attrs: OnnxAttrValue,
) -> onnx.ModelProto:
    """A one-node model: `inputs` are graph inputs, `consts` initializers
    (fed in order after the inputs; a name mapping to None is an absent
    optional input)."""
    g = GraphBuilder(dtype, seed=5)
    names = list(inputs)
    for name, arr in (consts or {}).items():
        names.append("" if arr is None else g.init(name, arr, exact_dtype=arr.dtype.kind in "iu"))
    y = g.op(op_type, names, name="node", **attrs)
    return g.model(op_type.lower(), inputs, {"out": y})


MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "mlp": mlp,
    "cnn": cnn,
    "resblock": resblock,
    "transformer": transformer,
}
"""The samples the tests and benches compile (each in every dtype)."""

EXAMPLES: dict[str, Callable[..., onnx.ModelProto]] = {"mbv2_block": mbv2_block}
"""Models of the documentation's worked examples: written by `main` like
the samples, not compiled by every test as those are (56x56 inputs)."""


def listed(known: Sequence[str], what: str, source: str) -> Callable[[str], list[str]]:
    """The argparse type of a bench flag naming some of `known`, comma-separated
    (`--models mlp,cnn`, `--dtypes f32`, `--cnns squeezenet`): an unknown name
    is a usage error that names the set (`--cnns alexnet` said "cannot read
    model" for a file that is `light_bvlc_alexnet.onnx`, session 41; `--models
    cnn_f32` stopped with a KeyError traceback, session 42)."""

    def names(text: str) -> list[str]:
        got = [n for n in text.split(",") if n]
        unknown = [n for n in got if n not in known]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"not {what}: {', '.join(unknown)} ({source} {', '.join(known)})"
            )
        return got

    return names


model_names = listed(list(MODELS), "a sample model", "the samples are")
"""`--models` of the benches that compile the samples."""

dtype_names = listed(list(DTYPES), "a sample dtype", "the samples come in")
"""`--dtypes` of the same benches."""


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Uniform [-1, 1) inputs for every graph input that is not an initializer."""
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        out[vi.name] = rng.uniform(-1, 1, [d.dim_value for d in tt.shape.dim]).astype(dtype)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m nem.frontends.onnx.samples", description="write a sample ONNX model"
    )
    p.add_argument("model", choices=sorted({**MODELS, **EXAMPLES}))
    p.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    p.add_argument("--input", metavar="FILE.npy", help="also write a random input here")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    model = {**MODELS, **EXAMPLES}[args.model](args.dtype)
    onnx.save(model, args.output)
    if args.input:
        (arr,) = random_inputs(model, args.seed).values()
        np.save(args.input, arr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
