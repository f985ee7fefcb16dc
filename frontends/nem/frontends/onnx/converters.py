"""One converter per ONNX op type: `CONVERTERS[op_type](importer, node)`.

A converter reads its inputs from the importer (`imp.tensor`, `imp.const`),
builds linalg on tensors with `emit`, and binds its outputs with
`imp.define`.  Unsupported attribute values raise `imp.error(...)` (a
located `OnnxImportError`).  The converters live in `ops` and `norms`;
decisions: docs/compile.md and docs/spec-decisions.md (D-COMPILE-*).
"""

from __future__ import annotations

from collections.abc import Callable

from mlir.dialects import arith, math
from nem.frontends.onnx.graph import Importer, Node
from nem.frontends.onnx.norms import layernorm, softmax
from nem.frontends.onnx.ops import (
    _binary,
    _sigmoid,
    _unary,
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
    "Relu": _unary(relu),
    "LeakyRelu": leaky_relu,
    "Clip": clip,
    "Sigmoid": _unary(wide(_sigmoid)),
    "Tanh": _unary(wide(math.tanh)),
    "Gelu": gelu,
    "Erf": _unary(wide(math.erf)),
    "Exp": _unary(wide(math.exp)),
    "Sqrt": _unary(wide(math.sqrt)),
    "Neg": _unary(arith.negf),
    "Abs": _unary(math.absf),
    "Add": _binary(arith.addf),
    "Sub": _binary(arith.subf),
    "Mul": _binary(arith.mulf),
    "Div": _binary(arith.divf),
    "Max": _binary(arith.maximumf),
    "Min": _binary(arith.minimumf),
    "MatMul": matmul,
    "Gemm": gemm,
    "MaxPool": pool("max"),
    "AveragePool": pool("avg"),
    "GlobalAveragePool": global_pool("avg"),
    "GlobalMaxPool": global_pool("max"),
    "Flatten": flatten,
    "Reshape": reshape,
    "Transpose": transpose,
    "Concat": concat,
    "Softmax": softmax,
    "LayerNormalization": layernorm,
    "Identity": identity,
    "Dropout": identity,
    "Constant": constant,
}
