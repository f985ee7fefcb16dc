"""One converter per ONNX op type: `CONVERTERS[op_type](importer, node)`.

A converter reads its inputs from the importer (`imp.tensor`, `imp.const`),
builds linalg on tensors with `emit`, and binds its outputs with
`imp.define`.  Unsupported attribute values raise `imp.error(...)` (a
located `OnnxImportError`).  The converters live in `ops`, `norms`,
`reductions` and `slices`; decisions: docs/compile.md and
docs/spec-decisions.md (D-COMPILE-*).
"""

from __future__ import annotations

from collections.abc import Callable

from mlir.dialects import arith, math
from nem.frontends.onnx.graph import Importer, Node
from nem.frontends.onnx.norms import layernorm, softmax
from nem.frontends.onnx.reductions import pow_, reduction
from nem.frontends.onnx.slices import slice_, split
from nem.frontends.onnx.ops import (
    binary,
    sigmoid,
    unary,
    batchnorm,
    clip,
    concat,
    constant,
    conv,
    flatten,
    gelu,
    gemm,
    global_pool,
    identity,
    leaky_relu,
    matmul,
    pool,
    relu,
    reshape,
    transpose,
    wide,
)

CONVERTERS: dict[str, Callable[[Importer, Node], None]] = {
    "Conv": conv,
    "BatchNormalization": batchnorm,
    "Relu": unary(relu),
    "LeakyRelu": leaky_relu,
    "Clip": clip,
    "Sigmoid": unary(wide(sigmoid)),
    "Tanh": unary(wide(math.tanh)),
    "Gelu": gelu,
    "Erf": unary(wide(math.erf)),
    "Exp": unary(wide(math.exp)),
    "Sqrt": unary(wide(math.sqrt)),
    "Neg": unary(arith.negf),
    "Abs": unary(math.absf),
    "Add": binary(arith.addf),
    "Sub": binary(arith.subf),
    "Mul": binary(arith.mulf),
    "Div": binary(arith.divf),
    "Max": binary(arith.maximumf),
    "Min": binary(arith.minimumf),
    "Pow": pow_,
    "MatMul": matmul,
    "Gemm": gemm,
    "MaxPool": pool("max"),
    "AveragePool": pool("avg"),
    "GlobalAveragePool": global_pool("avg"),
    "GlobalMaxPool": global_pool("max"),
    "ReduceSum": reduction("sum"),
    "ReduceMean": reduction("mean"),
    "ReduceMax": reduction("max"),
    "ReduceMin": reduction("min"),
    "Flatten": flatten,
    "Reshape": reshape,
    "Transpose": transpose,
    "Concat": concat,
    "Slice": slice_,
    "Split": split,
    "Softmax": softmax,
    "LayerNormalization": layernorm,
    "Identity": identity,
    "Dropout": identity,
    "Constant": constant,
}
