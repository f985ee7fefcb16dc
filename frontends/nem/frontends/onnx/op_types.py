"""Which ONNX op types the importer converts, and the nodes of the others
that a report can name before the graph simplifier runs
(D-COMPILE-EARLY-UNSUPPORTED).

A model with an op type the importer has no converter for cannot compile
whatever the simplifier does, if the node survives simplification.
`early_unsupported` decides that on the model as `prepare` has it before
the simplifier (shapes inferred, nodes named, opset upgraded), so that such
a report needs neither onnxscript/onnx_ir (0.6 s to import) nor the MLIR
bindings: only `onnx`.  A node survives onnxscript's optimizer when

- it is live: a graph output depends on it (else dead-code removal drops it);
- it reads data computed at run time: one of its inputs depends on a graph
  input (not an initializer) other than through `Shape`/`Size`, whose
  outputs are constants for the static shapes the importer requires (else
  constant folding evaluates it, ConstantOfShape subgraphs included);
- its op type is not one of `SIMPLIFIER_OP_TYPES`, which onnxscript's
  rewrite rules or partial evaluators can replace or remove even when it
  reads run-time data.

When a live run-time node of an unsupported type is one of
`SIMPLIFIER_OP_TYPES`, or a node calls a model-local function (which the
optimizer inlines), the verdict waits for the full import.
"""

from __future__ import annotations

import onnx

from nem.frontends.onnx.diagnostics import NodeRef, OnnxImportError

BOOL_OPS: frozenset[str] = frozenset(
    {
        "Equal",
        "Less",
        "LessOrEqual",
        "Greater",
        "GreaterOrEqual",
        "And",
        "Or",
        "Xor",
        "Not",
        "Where",
    }
)
"""Comparisons, logical ops and Where: they make or read bools, which are
i32 0/1 data (D-COMPILE-BOOL), and take i32 operands."""

SUPPORTED: frozenset[str] = BOOL_OPS | frozenset(
    {
        "Conv",
        "ConvTranspose",
        "BatchNormalization",
        "InstanceNormalization",
        "LRN",
        "Relu",
        "LeakyRelu",
        "PRelu",
        "Elu",
        "Selu",
        "Softplus",
        "Softsign",
        "HardSigmoid",
        "HardSwish",
        "Sign",
        "Shrink",
        "ThresholdedRelu",
        "Clip",
        "Sigmoid",
        "Tanh",
        "Gelu",
        "Erf",
        "Exp",
        "Log",
        "Sqrt",
        "Reciprocal",
        "Neg",
        "Abs",
        "Floor",
        "Ceil",
        "Round",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Max",
        "Min",
        "Sum",
        "Mean",
        "Pow",
        "MatMul",
        "Gemm",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "ReduceSum",
        "ReduceMean",
        "ReduceLogSumExp",
        "ReduceSumSquare",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceMax",
        "ReduceMin",
        "ArgMax",
        "ArgMin",
        "CumSum",
        "TopK",
        "Einsum",
        "Flatten",
        "Reshape",
        "Transpose",
        "Concat",
        "Slice",
        "Split",
        "Squeeze",
        "Unsqueeze",
        "Expand",
        "Tile",
        "Resize",
        "Gather",
        "GatherElements",
        "Pad",
        "DepthToSpace",
        "SpaceToDepth",
        "Cast",
        "IsNaN",
        "IsInf",
        "Shape",
        "Size",
        "ConstantOfShape",
        "Softmax",
        "LogSoftmax",
        "LayerNormalization",
        "Identity",
        "Dropout",
        "Constant",
        "SequenceEmpty",
        "SequenceConstruct",
        "SequenceInsert",
        "SequenceErase",
        "SequenceAt",
        "SequenceLength",
        "ConcatFromSequence",
        "SplitToSequence",
    }
)
"""The op types of the default domain `converters.CONVERTERS` converts (its
keys: converters.py checks the two agree when it is imported)."""

SIMPLIFIER_OP_TYPES: frozenset[str] = frozenset(
    {
        # onnxscript 0.7.2 optimizer/_constant_folding.py partial evaluators
        "Abs",
        "Add",
        "Cast",
        "CastLike",
        "Concat",
        "ConcatFromSequence",
        "Dropout",
        "Expand",
        "Gather",
        "Identity",
        "If",
        "Reshape",
        "SequenceAt",
        "SequenceConstruct",
        "Shape",
        "Size",
        "SplitToSequence",
        "Squeeze",
        # op types in the patterns of its default rewrite rules (rewriter/rules/common)
        "And",
        "BatchNormalization",
        "BitShift",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "Clip",
        "Constant",
        "ConstantOfShape",
        "Conv",
        "ConvInteger",
        "ConvTranspose",
        "Div",
        "Equal",
        "Flatten",
        "Gemm",
        "Greater",
        "GreaterOrEqual",
        "HardSigmoid",
        "HardSwish",
        "Less",
        "LessOrEqual",
        "MatMul",
        "Max",
        "Min",
        "Mod",
        "Mul",
        "Or",
        "PRelu",
        "Pad",
        "Pow",
        "QLinearConv",
        "Range",
        "Relu",
        "ScatterND",
        "Slice",
        "Split",
        "Sub",
        "Transpose",
        "Unsqueeze",
        "Xor",
    }
)
"""Op types onnxscript's optimizer may replace or remove although they read
run-time data (`test_onnx_early_unsupported.py` checks the installed
onnxscript's sources name no other)."""

SHAPE_ONLY = frozenset({"Shape", "Size"})
"""Op types whose output depends only on the (static) shape of their input."""

UNSUPPORTED_FIX = "express it with the supported op types (docs/compile.md, 'Supported ONNX')"

REWRITES = {
    "Upsample": "nearest upsampling by whole factors is Reshape + Expand + Reshape, exactly",
    "GroupNormalization": "Reshape to [N, groups, -1], InstanceNormalization with scale 1 and "
    "bias 0, Reshape back, then Mul and Add the per-channel scale and bias",
}
"""Op types without a converter whose rewrite into supported ones is exact
and short (outside users found each, session 8): the fix names it, where
it computes what the node does (`_rewrite`)."""


def _rewrite(node: onnx.NodeProto) -> str | None:
    """`REWRITES`' fix for `node`, or None where the rewrite would compute
    something else: an Upsample that is not nearest (linear or cubic: an
    outside user's report on Resize, session 22, which converts since
    session 25, D-COMPILE-RESIZE)."""
    if node.op_type == "Upsample":
        mode = next((a.s for a in node.attribute if a.name == "mode"), b"nearest")
        if mode != b"nearest":
            return None
    return REWRITES.get(node.op_type)


def unsupported_op_type(node: onnx.NodeProto, where: str, ref: NodeRef) -> OnnxImportError | None:
    """The importer's error for a node of a domain or op type it has no
    converter for, or None (one wording, early or in the full import)."""
    if node.domain not in ("", "ai.onnx"):
        return OnnxImportError(
            f"not supported: operator domain '{node.domain}' (op {node.op_type})", where, ref
        )
    if node.op_type not in SUPPORTED:
        return OnnxImportError(
            f"not supported: op type {node.op_type}",
            where,
            ref,
            fix=_rewrite(node) or UNSUPPORTED_FIX,
        )
    return None


def early_unsupported(
    model: onnx.ModelProto, where: str, node_index: dict[str, tuple[int, str]], simplified: bool
) -> list[OnnxImportError]:
    """The errors of the nodes of `model` (before simplification) whose op
    type or domain the importer does not convert and which survive the
    simplifier (module docstring; all of them when `simplified` is False),
    in node order; [] when there are none or the verdict must wait."""
    g = model.graph
    local = {(f.domain, f.name) for f in model.functions}
    if any((n.domain, n.op_type) in local for n in g.node):
        return []
    every = set(range(len(g.node)))
    live = _live(g) if simplified else every
    runtime = runtime_positions(g) if simplified else every
    errors = []
    for k, n in enumerate(g.node):
        index, op_type = node_index.get(n.name, (None, n.op_type))
        error = unsupported_op_type(n, where, (index, n.name, op_type))
        if error is None or k not in live or k not in runtime:
            continue
        if simplified and n.op_type in SIMPLIFIER_OP_TYPES:
            return []
        errors.append(error)
    return errors


def kept_by_simplifier(model: onnx.ModelProto) -> set[str]:
    """The names of the nodes of `model` (before simplification) that the
    simplifier keeps as they are: live, reading run-time data, of an op type
    it does not rewrite (module docstring)."""
    g = model.graph
    both = _live(g) & runtime_positions(g)
    return {
        n.name for k, n in enumerate(g.node) if k in both and n.op_type not in SIMPLIFIER_OP_TYPES
    }


def _live(g: onnx.GraphProto) -> set[int]:
    """The positions of the nodes some graph output depends on (protobuf
    hands out a new wrapper object per access: positions, not ids)."""
    producer = {o: k for k, n in enumerate(g.node) for o in n.output if o}
    todo = [o.name for o in g.output]
    seen: set[str] = set()
    live: set[int] = set()
    while todo:
        name = todo.pop()
        if name in seen or name not in producer:
            continue
        seen.add(name)
        live.add(producer[name])
        todo += [i for i in g.node[producer[name]].input if i]
    return live


def runtime_positions(g: onnx.GraphProto) -> set[int]:
    """The positions of the nodes with an input computed from a graph input
    at run time (not through `SHAPE_ONLY` ops); ONNX lists nodes in
    topological order."""
    consts = {i.name for i in g.initializer}
    values = {i.name for i in g.input if i.name not in consts}
    nodes: set[int] = set()
    for k, n in enumerate(g.node):
        if any(i in values for i in n.input if i):
            nodes.add(k)
            if n.op_type not in SHAPE_ONLY:
                values.update(o for o in n.output if o)
    return nodes
