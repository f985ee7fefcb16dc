"""One converter per ONNX op type: `CONVERTERS[op_type](importer, node)`.

A converter reads its inputs from the importer (`imp.tensor`, `imp.const`),
builds linalg on tensors with `emit`, and binds its outputs with
`imp.define`.  Unsupported attribute values raise `imp.error(...)` (a
located `OnnxImportError`).  The converters live in `ops` (elementwise,
matrix products, layouts), `convs`, `pools`, `norms`, `reductions`,
`slices`, `shapes`, `einsum`, `activations` and `sequences`; decisions:
docs/compile.md (its coverage table lists every op type here) and
docs/spec-decisions.md (D-COMPILE-*).
"""

from __future__ import annotations

from collections.abc import Callable

from mlir.dialects import arith, math

from nem.frontends.onnx import activations as act
from nem.frontends.onnx import logic, shapes
from nem.frontends.onnx import sequences as seq
from nem.frontends.onnx.conv_transpose import conv_transpose
from nem.frontends.onnx.convs import batchnorm, conv
from nem.frontends.onnx.einsum import einsum
from nem.frontends.onnx.graph import Importer, Node
from nem.frontends.onnx.norms import instance_norm, layernorm, log_softmax, lrn, softmax
from nem.frontends.onnx.op_types import SUPPORTED
from nem.frontends.onnx.ops import (
    binary,
    clip,
    concat,
    constant,
    dropout,
    flatten,
    gelu,
    gemm,
    identity,
    leaky_relu,
    matmul,
    relu,
    reshape,
    sigmoid,
    transpose,
    unary,
    wide,
)
from nem.frontends.onnx.pools import global_pool, pool
from nem.frontends.onnx.reductions import (
    arg_extreme,
    cumsum,
    log_sum_exp,
    pow_,
    reduction,
    topk,
)
from nem.frontends.onnx.resize import resize
from nem.frontends.onnx.slices import slice_, split

CONVERTERS: dict[str, Callable[[Importer, Node], None]] = {
    "Conv": conv,
    "ConvTranspose": conv_transpose,
    "BatchNormalization": batchnorm,
    "InstanceNormalization": instance_norm,
    "LRN": lrn,
    "Relu": unary(relu),
    "LeakyRelu": leaky_relu,
    "PRelu": act.prelu,
    "Elu": act.elu,
    "Selu": act.selu,
    "Softplus": act.softplus,
    "Softsign": act.softsign,
    "HardSigmoid": act.hard_sigmoid,
    "HardSwish": act.hard_swish,
    "Sign": act.sign,
    "Shrink": act.shrink,
    "ThresholdedRelu": act.thresholded_relu,
    "Clip": clip,
    "Sigmoid": unary(wide(sigmoid)),
    "Tanh": unary(wide(math.tanh)),
    "Gelu": gelu,
    "Erf": unary(wide(math.erf)),
    "Exp": unary(wide(math.exp)),
    "Log": unary(wide(math.log)),
    "Sqrt": unary(wide(math.sqrt)),
    "Reciprocal": act.reciprocal,
    "Neg": unary(arith.negf),
    "Abs": unary(math.absf),
    "Floor": unary(math.floor),
    "Ceil": unary(math.ceil),
    "Round": unary(math.roundeven),
    "Add": binary(arith.addf),
    "Sub": binary(arith.subf),
    "Mul": binary(arith.mulf),
    "Div": binary(arith.divf),
    "Max": act.variadic(arith.maximumf),
    "Min": act.variadic(arith.minimumf),
    "Sum": act.variadic(arith.addf),
    "Mean": act.variadic(arith.addf, mean=True),
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
    "ReduceLogSumExp": log_sum_exp,
    "ReduceSumSquare": reduction("sumsquare"),
    "ReduceL1": reduction("l1"),
    "ReduceL2": reduction("l2"),
    "ReduceLogSum": reduction("logsum"),
    "ArgMax": arg_extreme("max"),
    "ArgMin": arg_extreme("min"),
    "CumSum": cumsum,
    "TopK": topk,
    "Einsum": einsum,
    "Flatten": flatten,
    "Reshape": reshape,
    "Transpose": transpose,
    "Concat": concat,
    "Slice": slice_,
    "Split": split,
    "Squeeze": shapes.squeeze,
    "Unsqueeze": shapes.unsqueeze,
    "Expand": shapes.expand,
    "Tile": shapes.tile,
    "Resize": resize,
    "Gather": shapes.gather,
    "GatherElements": shapes.gather_elements,
    "Pad": shapes.pad,
    "DepthToSpace": shapes.depth_to_space,
    "SpaceToDepth": shapes.space_to_depth,
    "Cast": shapes.cast,
    "Equal": logic.compare,
    "Less": logic.compare,
    "LessOrEqual": logic.compare,
    "Greater": logic.compare,
    "GreaterOrEqual": logic.compare,
    "And": logic.logical(arith.andi),
    "Or": logic.logical(arith.ori),
    "Xor": logic.logical(arith.xori),
    "Not": logic.not_,
    "IsNaN": logic.is_nan,
    "IsInf": logic.is_inf,
    "Where": logic.where,
    "Shape": shapes.shape,
    "Size": shapes.size,
    "ConstantOfShape": shapes.constant_of_shape,
    "Softmax": softmax,
    "LogSoftmax": log_softmax,
    "LayerNormalization": layernorm,
    "Identity": identity,
    "Dropout": dropout,
    "Constant": constant,
    "SequenceEmpty": seq.sequence_empty,
    "SequenceConstruct": seq.sequence_construct,
    "SequenceInsert": seq.sequence_insert,
    "SequenceErase": seq.sequence_erase,
    "SequenceAt": seq.sequence_at,
    "SequenceLength": seq.sequence_length,
    "ConcatFromSequence": seq.concat_from_sequence,
    "SplitToSequence": seq.split_to_sequence,
}

assert frozenset(CONVERTERS) == SUPPORTED, "op_types.SUPPORTED lists CONVERTERS' keys"
