"""ONNX ops that onnx defines as a function of other ops, replaced by their
body before import (D-COMPILE-ONNX-FUNCTIONS).

onnx's operator schemas define many ops by a body of simpler ones:
GroupNormalization, RMSNormalization, Mish, Celu, Swish,
MeanVarianceNormalization, ReduceL2, ReduceLogSumExp, ReduceSumSquare,
Range, ... (a *function*; for some, built per node from its attributes and
input types: a *context-dependent* function).  onnxruntime runs such an op
by its body when it has no kernel for it; the importer does the same for
every op type it has no converter of its own for, with onnx's own bodies
(the semantics has one home, onnx's schema) and onnx's own inliner, which
binds the attributes, renames the body's values apart and, for a body
written against an older opset than the model's, converts it with onnx's
version converter (its adapters say which ops changed meaning).

Which node is replaced, by which body:

- the body of the largest opset version the schema defines one for, at
  most the model's (the one onnx would run for the model);
- every attribute the node leaves out gets its schema default first, so the
  body reads the value the op would have used;
- only nodes that read data computed at run time: one computed from
  constants and shapes alone is the simplifier's to fold (a `Range` of a
  shape inside RMSNormalization's body);
- a node onnx's inliner or version converter fails on stays as it is, and
  the importer's diagnostic names it;
- a body ill-typed for the node's f16 inputs (an f32 constant in it), where
  the schema takes f16, is the body for f32 inputs between casts, computed
  in f32 and rounded once (D-COMPILE-F16).

A body is inlined in a model of its node alone, at the body's own opset
(its inputs typed: a context-dependent body is built from their types, and
the version converter infers the body's), then converted to the model's
opset.  ONNX's shape inference (not strict: as far as it gets) types the
graph; a node whose inputs it cannot type waits for the next round, after
the bodies before it are in place (onnx does not infer through
GroupNormalization-21, for one).  Each round replaces every node it can; a
graph whose function nodes feed each other one after the other takes one
round, one inference of the graph without its large initializers, per node.

Body nodes are named `<node>/<OpType>_<k>` after the node they replace, the
values they compute `<node>/<value>`, and join the caller's `node_index`
under that node: a diagnostic about a body node names the user's node,
index and op type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx
import onnx.inliner
from onnx import version_converter

from nem.frontends.onnx.op_types import runtime_positions

DOMAIN = "nem.onnx-function"
"""The domain a node's body is given while onnx's inliner replaces the node
(a model-local function of this domain per node, removed by the inliner)."""


def expand_functions(
    model: onnx.ModelProto,
    converted: frozenset[str],
    node_index: dict[str, tuple[int, str]],
    types_of: Callable[[onnx.ModelProto], dict[str, onnx.TypeProto]],
) -> dict[str, int]:
    """Replace, in place, each node of `model`'s default domain whose op type
    is not in `converted` by its onnx function body (module docstring);
    `types_of(model)` types the graph's values.  Body nodes join
    `node_index` under their node's entry.  Returns op type -> nodes
    replaced."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    done: dict[str, int] = {}
    skip: set[str] = set()  # nodes that cannot be replaced (checked once)
    while True:
        runtime = runtime_positions(model.graph)
        candidates = [
            k
            for k, n in enumerate(model.graph.node)
            if k in runtime
            and n.domain in ("", "ai.onnx")
            and n.op_type not in converted
            and n.name not in skip
            and _schema(n.op_type, opset) is not None
        ]
        if not candidates:
            return done
        types = types_of(model)
        bodies: dict[int, list[onnx.NodeProto]] = {}
        for k in candidates:
            n = model.graph.node[k]
            if any(v and v not in types for v in n.input):
                continue  # typed in a later round, once the bodies before it are in place
            body = _body(n, opset, types)
            if body is None:
                skip.add(n.name)
                continue
            bodies[k] = body
            node_index.update((b.name, node_index[n.name]) for b in body)
            done[n.op_type] = done.get(n.op_type, 0) + 1
        if not bodies:
            return done
        nodes = [b for k, n in enumerate(model.graph.node) for b in bodies.get(k, [n])]
        del model.graph.node[:]
        model.graph.node.extend(nodes)


def _body(
    node: onnx.NodeProto, opset: int, types: dict[str, onnx.TypeProto]
) -> list[onnx.NodeProto] | None:
    """The nodes computing `node`'s outputs from its inputs by the body onnx
    defines for it at `opset` (`_inlined`), or None where there is none or
    onnx's inliner or version converter fails on it.  A body that is
    ill-typed for the node's f16 inputs (MeanVarianceNormalization's adds
    an f32 constant to f16 data: an outside user, session 66, got "inputs
    have different element types" about values of onnx's body) is the body
    for f32 inputs between casts, rounded once (`_widened`, D-COMPILE-F16)."""
    inlined = _inlined(node, opset, types)
    if inlined is None or _typed(inlined):
        return None if inlined is None else _named(node, inlined)
    widened = _widened(node, opset, types)
    return _named(node, inlined) if widened is None else widened


def _typed(model: onnx.ModelProto) -> bool:
    """Whether onnx's strict type inference accepts `model`."""
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception:  # onnx's C++ errors arrive as InferenceError, RuntimeError, ...
        return False
    return True


def _widened(
    node: onnx.NodeProto, opset: int, types: dict[str, onnx.TypeProto]
) -> list[onnx.NodeProto] | None:
    """`node`'s body for its f16 inputs as f32 ones, between casts of those
    inputs to f32 and of its outputs back to f16; None when `node` has no
    f16 input, or the f32 body is ill-typed too or has an output of another
    type than f32."""
    f16, f32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    half = [v for v in dict.fromkeys(node.input) if v and types[v].tensor_type.elem_type == f16]
    outs = [v for v in node.output if v]
    if not half or not _takes_f16(node, opset):
        return None
    wide = {v: f"{node.name}/{v}:f32" for v in (*half, *outs)}
    call = onnx.NodeProto()
    call.CopyFrom(node)
    call.input[:] = [wide.get(v, v) for v in node.input]
    call.output[:] = [wide.get(v, v) for v in node.output]
    wide_types = dict(types)
    for v in half:
        wide_types[wide[v]] = t = onnx.TypeProto()
        t.CopyFrom(types[v])
        t.tensor_type.elem_type = f32
    inlined = _inlined(call, opset, wide_types)
    if inlined is None or not _typed(inlined):
        return None
    inferred = onnx.shape_inference.infer_shapes(inlined).graph.output
    if any(v.type.tensor_type.elem_type != f32 for v in inferred):
        return None
    make = onnx.helper.make_node
    ins = [
        make("Cast", [v], [wide[v]], f"{node.name}/Cast_in_{k}", to=f32) for k, v in enumerate(half)
    ]
    back = [
        make("Cast", [wide[v]], [v], f"{node.name}/Cast_out_{k}", to=f16)
        for k, v in enumerate(outs)
    ]
    return [*ins, *_named(call, inlined), *back]


def _takes_f16(node: onnx.NodeProto, opset: int) -> bool:
    """Whether the schema of `node` at `opset` allows f16 for each of its
    inputs whose type is a type variable (Celu's does not: an f16 Celu is
    invalid ONNX, refused as before)."""
    s = _schema(node.op_type, opset)
    allowed = {c.type_param_str: c.allowed_type_strs for c in s.type_constraints}
    formals = list(s.inputs)
    return all(
        "tensor(float16)"
        in allowed.get(formals[min(k, len(formals) - 1)].type_str, ["tensor(float16)"])
        for k, v in enumerate(node.input)
        if v and formals
    )


def _inlined(
    node: onnx.NodeProto, opset: int, types: dict[str, onnx.TypeProto]
) -> onnx.ModelProto | None:
    """The model of `node` alone with its body inlined, at the body's own
    opset, then converted to `opset`; None as `_body` says."""
    function = _function(node, opset, types)
    if function is None:
        return None
    written = next((o.version for o in function.opset_import if o.domain in ("", "ai.onnx")), opset)
    function.domain, function.name = DOMAIN, node.op_type
    call = onnx.NodeProto()
    call.CopyFrom(node)
    call.domain = DOMAIN
    alone = onnx.helper.make_model(
        onnx.helper.make_graph(
            [call],
            "alone",
            [onnx.helper.make_value_info(v, types[v]) for v in dict.fromkeys(node.input) if v],
            [onnx.helper.make_empty_tensor_value_info(v) for v in node.output if v],
        ),
        opset_imports=[onnx.helper.make_opsetid("", written), onnx.helper.make_opsetid(DOMAIN, 1)],
        functions=[function],
    )
    try:
        inlined = onnx.inliner.inline_local_functions(alone)
        if written != opset:
            inlined = version_converter.convert_version(inlined, opset)
    except Exception:  # onnx's C++ errors arrive as RuntimeError, ValueError, ...
        return None
    if inlined.graph.initializer or any(n.domain == DOMAIN for n in inlined.graph.node):
        return None
    return inlined


def _named(node: onnx.NodeProto, inlined: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The nodes of `node`'s `inlined` body, its values other than the
    node's inputs and outputs renamed `<node>/<value>`, its nodes
    `<node>/<OpType>_<k>`."""
    own = {v for v in (*node.input, *node.output) if v}
    renamed = {
        v: f"{node.name}/{v}"
        for n in inlined.graph.node
        for v in (*n.input, *n.output)
        if v and v not in own
    }
    out = []
    for k, n in enumerate(inlined.graph.node):
        n.name = f"{node.name}/{n.op_type}_{k}"
        n.input[:] = [renamed.get(v, v) for v in n.input]
        n.output[:] = [renamed.get(v, v) for v in n.output]
        out.append(n)
    return out


def _schema(op_type: str, opset: int) -> Any:
    """The schema of `op_type` at `opset` if it defines a function body, or
    None (an `onnx.defs.OpSchema`: onnx's type stub lacks the function
    accessors used here)."""
    try:
        s: Any = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None
    return s if s.has_function or s.has_context_dependent_function else None


def _function(
    node: onnx.NodeProto, opset: int, types: dict[str, onnx.TypeProto]
) -> onnx.FunctionProto | None:
    """The body onnx defines for `node` at `opset` (its inputs typed in
    `types`), with the node's attribute defaults filled in (in place)."""
    s = _schema(node.op_type, opset)
    if s is None:
        return None
    given = {a.name for a in node.attribute}
    for name, attr in s.attributes.items():
        if name not in given and attr.default_value.type != onnx.AttributeProto.UNDEFINED:
            filled = onnx.AttributeProto()
            filled.CopyFrom(attr.default_value)
            filled.name = name
            node.attribute.append(filled)
    context = [v for v in s.context_dependent_function_opset_versions if v <= opset]
    plain = [v for v in s.function_opset_versions if v <= opset]
    if context:
        empty = onnx.TypeProto()
        arg_types = [(types[v] if v else empty).SerializeToString() for v in node.input]
        raw = s.get_context_dependent_function_with_opset_version(
            max(context), node.SerializeToString(), arg_types
        )
    elif plain:
        raw = s.get_function_with_opset_version(max(plain))
    else:
        return None
    body = onnx.FunctionProto()
    body.ParseFromString(raw)
    return body
