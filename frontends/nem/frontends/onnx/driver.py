"""Convert a prepared model node by node, collecting every error
(D-COMPILE-DIAG); `nem.frontends.onnx.entry.import_onnx` loads and
prepares it first.

Each node is converted by `converters.CONVERTERS[op_type]` under its own
location (D-COMPILE-LOC).  A node that cannot be converted is recorded and
its outputs are bound to placeholders of the shapes ONNX infers, so that
the nodes after it are still converted and their own problems found; a
node reading a value that has no placeholder (no static shape known) is
skipped, as its problem may only be the earlier one.  Then every error is
raised at once (`OnnxImportErrors`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from mlir import ir
from mlir.dialects import func
from onnx import helper, numpy_helper

from nem.frontends.onnx import emit
from nem.frontends.onnx.bind import bind_fix, formal_name, is_compile_time
from nem.frontends.onnx.diagnostics import NodeRef, OnnxImportError, OnnxImportErrors
from nem.frontends.onnx.graph import (
    ELEM_TYPE_NAMES,
    Attrs,
    ImportedModel,
    Importer,
    Node,
    Port,
    TensorVal,
    interface_names,
)
from nem.frontends.onnx.op_types import BOOL_OPS, unsupported_op_type

SHAPE_OPERANDS = {("Expand", 1), ("Reshape", 1), ("Tile", 1), ("TopK", 1)}
"""(op type, input index) of integer operands that only say the output's
shape: with the output's shape known, their values are not needed."""

INTEGER_DATA_OPS = BOOL_OPS | frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Max",
        "Min",
        "Sum",
        "Cast",
        "Gather",
        "GatherElements",
        "TopK",
        "Reshape",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Transpose",
        "Concat",
        "Slice",
        "Split",
        "Identity",
        "Expand",
        "Tile",
        "Clip",
        "CumSum",
        # data movement too (session 55: refused as "not data movement")
        "Pad",
        "DepthToSpace",
        "SpaceToDepth",
        "Shape",
        "Size",
        "SequenceConstruct",
        "SequenceInsert",
        "SequenceAt",
        "SequenceErase",
        "SequenceLength",
        "ConcatFromSequence",
        "SplitToSequence",
    }
)
"""Op types that take integer tensors computed at run time (i32, int64
demoted: D-COMPILE-I64; bools: D-COMPILE-BOOL): integer arithmetic,
comparisons, logical ops, Where, casts, gathers and moves of data.  Any
other op reading one is a located `not supported`."""


def _users(graph: onnx.GraphProto, name: str) -> list[tuple[int, onnx.NodeProto, int]]:
    return [
        (pos, n, k) for pos, n in enumerate(graph.node) for k, i in enumerate(n.input) if i == name
    ]


def unread_inputs(imp: Importer) -> set[str]:
    """Integer graph inputs only used as shape operands (SHAPE_OPERANDS) of
    nodes whose output shapes ONNX knows: the program does not read them
    (D-COMPILE-IFACE)."""
    out = set()
    floats = (
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.DOUBLE,
        onnx.TensorProto.BFLOAT16,
    )
    for vi in imp.graph.input:
        if vi.name in imp.consts or vi.type.tensor_type.elem_type in floats:
            continue
        users = _users(imp.graph, vi.name)
        if users and all(
            (n.op_type, k) in SHAPE_OPERANDS and imp.static_shape(n.output[0]) is not None
            for _, n, k in users
        ):
            out.add(vi.name)
    return out


def _integer_input_error(imp: Importer, vi: onnx.ValueInfoProto, elem: str) -> OnnxImportError:
    """Why a non-float input cannot be a program input, located at its first
    user, with a fix only where one helps (an index operand could be a
    constant; integer or string data cannot be computed with)."""
    users = _users(imp.graph, vi.name)
    ref: NodeRef | None = None
    role = ""
    fix = None
    if users:
        pos, n, k = users[0]
        index, op_type = imp.source(n, pos)
        ref = (index, n.name or f"{n.op_type}_{pos}", op_type or n.op_type)
        formal = formal_name(n, k, imp.opset)
        role = f" ({n.op_type}'s {formal})" if formal else ""
        if is_compile_time(n.op_type, formal):
            fix = bind_fix(vi.name)
    why = (
        "NEM has no 64-bit integer type (device integers are at most 32 bits)"
        if elem in ("INT64", "UINT64")
        else "the ONNX importer computes FLOAT, FLOAT16 and INT32 tensors only "
        "(DOUBLE and INT64 demoted to them)"
    )
    if elem == "INT64" and fix is None:
        fix = "import with int64 demoted to int32 (the default, D-COMPILE-I64)"
    return OnnxImportError(
        f"not supported: input '{vi.name}'{role} has element type {elem}: {why}", imp.file, ref, fix
    )


def _port(imp: Importer, vi: onnx.ValueInfoProto, name: str, what: str) -> Port:
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        kind = vi.type.WhichOneof("value")
        what_it_is = f"is a {kind.replace('_type', '')}" if kind else "has no type"
        raise OnnxImportError(
            f"not supported: {what} '{vi.name}' {what_it_is} (program "
            "inputs and outputs are tensors)",
            imp.file,
        )
    if tt.elem_type not in imp.elem_types:
        elem = onnx.TensorProto.DataType.Name(tt.elem_type)
        if what == "input":
            raise _integer_input_error(imp, vi, elem)
        fix = {
            "DOUBLE": "import with f64 demoted to f32 (the default, D-COMPILE-F64)",
            "INT64": "import with int64 demoted to int32 (the default, D-COMPILE-I64)",
        }.get(elem)
        raise OnnxImportError(
            f"not supported: output '{vi.name}' has element type {elem}; "
            "program outputs are FLOAT, FLOAT16 or INT32",
            imp.file,
            fix=fix,
        )
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value") and d.dim_value == 0:
            raise OnnxImportError(
                f"not supported: {what} '{vi.name}' is empty (a dimension of size 0)",
                imp.file,
                fix="remove the empty tensor and what computes it",
            )
        if not d.HasField("dim_value") or d.dim_value < 0:
            raise OnnxImportError(
                f"{what} '{vi.name}' has a dynamic dimension "
                f"'{d.dim_param or '?'}'; only static shapes are supported",
                imp.file,
                fix="fix the dimension, e.g. onnx.tools.update_model_dims."
                "update_inputs_outputs_dims(model, {...}, {...})",
            )
        dims.append(d.dim_value)
    return _typed_port(imp, name, vi.name, tuple(dims), tt.elem_type)


def _typed_port(
    imp: Importer, name: str, onnx_name: str, shape: tuple[int, ...], elem: int
) -> Port:
    """A port of the program's element type for ONNX type `elem`, with the
    model's where it differs."""
    dtype = np.dtype(imp.elem_types[elem][1])
    model = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    return Port(name, onnx_name, shape, dtype, model if model != dtype else None)


def _output_port(imp: Importer, vi: onnx.ValueInfoProto, name: str) -> Port:
    """A model output: as the model declares it, or, where the declaration
    leaves the shape open (a sequence's element, a concatenation of one),
    as the importer computed it (static: D-COMPILE-SEQ)."""
    tv = imp.vals.get(vi.name)
    tt = vi.type.tensor_type
    declared = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    if (
        tv is not None
        and tt.elem_type in imp.elem_types
        and (None in declared or not tt.HasField("shape"))
    ):
        if tt.HasField("shape") and (
            len(declared) != tv.rank
            or any(d is not None and d != s for d, s in zip(declared, tv.shape))
        ):
            raise OnnxImportError(
                f"output '{vi.name}' has shape {list(tv.shape)}, the model declares {declared}",
                imp.file,
            )
        return _typed_port(imp, name, vi.name, tv.shape, tt.elem_type)
    return _port(imp, vi, name, "output")


def _placeholders(imp: Importer, node: Node, poisoned: set[str]) -> None:
    """Bind the outputs of a node that failed to `tensor.empty`s of their
    inferred shapes, so later nodes are still converted; poison the others."""
    for name in node.outputs:
        if not name or name in imp.vals or name in imp.consts:
            continue
        shape = imp.static_shape(name)
        info = imp.inferred.get(name)
        elem = info.type.tensor_type.elem_type if info is not None else None
        if shape is None or elem not in imp.elem_types or 0 in shape:
            poisoned.add(name)
            continue
        mlir_elem = ir.Type.parse(imp.elem_types[elem][0])
        imp.vals[name] = TensorVal(emit.empty(shape, mlir_elem), shape, tuple(range(len(shape))))


def _convert_node(imp: Importer, node: Node, poisoned: set[str]) -> OnnxImportError | None:
    from nem.frontends.onnx.converters import CONVERTERS

    proto = node.proto
    unsupported = unsupported_op_type(proto, imp.file, node.ref())
    if unsupported is not None:
        return unsupported
    conv = CONVERTERS[proto.op_type]
    if any(i in poisoned for i in node.inputs):
        poisoned.update(o for o in node.outputs if o)
        return None  # its inputs come from a node already reported
    ints = [
        i
        for k, i in enumerate(node.inputs)
        if i in imp.vals
        and isinstance(imp.vals[i].elem, ir.IntegerType)
        and not is_compile_time(proto.op_type, formal_name(proto, k, imp.opset))
    ]  # an index operand computed at run time is the converter's located error
    if ints and proto.op_type not in INTEGER_DATA_OPS:
        return imp.error(
            f"not supported: {proto.op_type} of integer data ('{ints[0]}', "
            f"{imp.vals[ints[0]].elem}): integer tensors computed at run time "
            "take arithmetic (Add, Sub, Mul, Div, Max, Min, Sum, Clip, CumSum), Cast, "
            "Gather and data movement only",
            # (an outside user: no fix line; session 55)
            fix=f"Cast '{ints[0]}' to FLOAT before the {proto.op_type} (and back after it, "
            "if the model needs integers; exact for integers of up to 24 bits)",
        )
    try:
        imp.check_operand_types(node)
        node.read_inputs.clear()
        with node.location(imp.file):
            conv(imp, node)
    except OnnxImportError as e:
        return e
    ignored = [
        (k, name) for k, name in enumerate(proto.input) if name and k not in node.read_inputs
    ]
    if ignored:
        k, name = ignored[0]
        formal = formal_name(proto, k, imp.opset)
        return imp.error(
            f"not supported: {proto.op_type} input {k} '{name}'"
            + (f" ({formal})" if formal else "")
            + ": the importer does not read it (D-COMPILE-ATTRS)",
            fix=f"remove the input '{name}', if the model allows",
        )
    unread = unread_attributes(node, imp.opset)
    if unread:
        name, value = unread[0]
        return imp.error(
            f"not supported: {proto.op_type} attribute '{name}' = {value!r}: the importer "
            "does not implement it (D-COMPILE-ATTRS)",
            fix=f"remove '{name}' or give it its default, if the model allows",
        )
    return None


IGNORED_ATTRIBUTES: dict[tuple[str, str], str] = {
    ("BatchNormalization", "momentum"): "updates running statistics in training only",
    ("Dropout", "seed"): "inference Dropout is the identity",
    ("Cast", "round_mode"): "applies to float8 targets only, which are refused",
    ("Cast", "saturate"): "applies to float8 targets only, which are refused",
    ("TopK", "sorted"): "sorted=0 leaves the order open; the sorted order is one",
    ("SequenceEmpty", "dtype"): "an empty sequence's element type is never read",
}
"""(op type, attribute) a converter need not read: why its value cannot
change the result (D-COMPILE-ATTRS)."""


def unread_attributes(node: Node, opset: int) -> list[tuple[str, Any]]:
    """The attributes of `node` its converter did not read whose values are
    not the schema's default (D-COMPILE-ATTRS), in the node's order."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        schema = None
    out = []
    for a in node.proto.attribute:
        if a.name in node.attrs.read or (node.op_type, a.name) in IGNORED_ATTRIBUTES:
            continue
        value = helper.get_attribute_value(a)
        declared = schema.attributes.get(a.name) if schema is not None else None
        if declared is not None and declared.default_value.name:
            if value == helper.get_attribute_value(declared.default_value):
                continue
        out.append((a.name, value))
    return out


def convert(imp: Importer) -> ImportedModel:
    """The imported program of `imp`'s model (module docstring)."""
    from nem.frontends.onnx.convs import plan_batchnorm_folds

    for init in imp.graph.initializer:
        kept = imp.arrays.get(init.name)
        if kept is not None:  # computed by the simplifier (prepare.kept_apart)
            imp.set_const(init.name, kept)
            continue
        try:
            array = numpy_helper.to_array(init)
        except Exception as e:  # onnx's decoders raise ValueError, TypeError, KeyError
            raise OnnxImportError(
                f"initializer '{init.name}': cannot read its data: "
                f"{str(e).strip() or type(e).__name__}",
                imp.file,
            ) from e
        imp.set_const(init.name, array)
    imp.bn_folds = plan_batchnorm_folds(imp)
    table = interface_names(imp.graph)
    imp.names.update(table.taken)  # weights are named after these
    unread = unread_inputs(imp)
    imp.unread_inputs = sorted(unread)
    errors: list[OnnxImportError] = []
    poisoned: set[str] = set()
    inputs: list[Port] = []
    for vi, (_, name) in zip(
        [v for v in imp.graph.input if v.name not in imp.consts], table.inputs
    ):
        if vi.name in unread:
            continue
        try:
            inputs.append(_port(imp, vi, name, "input"))
        except OnnxImportError as e:
            errors.append(e)
            poisoned.add(vi.name)
    imp.context = ctx = ir.Context()
    with ctx, ir.Location.file(imp.file, 0, 0):
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            in_types = [
                emit.tensor_type(p.shape, ir.Type.parse(ELEM_TYPE_NAMES[p.dtype])) for p in inputs
            ]
            fn = func.FuncOp(imp.func_name, (in_types, []))
            imp.block = fn.add_entry_block()
        for p, arg in zip(inputs, imp.block.arguments):
            arg.set_location(ir.Location.name(p.name))
            imp.vals[p.onnx_name] = TensorVal(arg, p.shape, tuple(range(len(p.shape))))
            imp.graph_inputs[arg] = p.onnx_name
        with ir.InsertionPoint(imp.block):
            for pos, proto in enumerate(imp.graph.node):
                node = Node(
                    pos,
                    proto,
                    Attrs({a.name: helper.get_attribute_value(a) for a in proto.attribute}),
                    *imp.source(proto, pos),
                )
                imp.node = node
                error = _convert_node(imp, node, poisoned)
                if error is not None:
                    errors.append(error)
                    _placeholders(imp, node, poisoned)
            imp.node = None
            outputs: list[Port] = []
            for vi, (_, name) in zip(imp.graph.output, table.outputs):
                if vi.name in poisoned:
                    continue  # made by a node already reported
                try:
                    outputs.append(_output_port(imp, vi, name))
                except OnnxImportError as e:
                    errors.append(e)
            if errors:
                raise OnnxImportErrors(errors, imp.file)
            results = _results(imp, outputs)
            func.ReturnOp(results)
        arg_types = [a.type for a in imp.block.arguments]
        fn.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, [r.type for r in results])
        )
        if not module.operation.verify():
            raise OnnxImportError("internal: the imported module does not verify", imp.file)
    return ImportedModel(ctx, module, imp.func_name, inputs, imp.weights, outputs)


def _results(imp: Importer, outputs: list[Port]) -> list[ir.Value]:
    results = []
    for p in outputs:
        if p.onnx_name in imp.seqs:
            raise OnnxImportError(f"not supported: output '{p.onnx_name}' is a sequence", imp.file)
        with imp.layout_of(p.onnx_name):
            value = imp.logical(imp.tensor(p.onnx_name))
        if value in results:  # one value, two outputs: each its own buffer
            shape = emit.shape_of(value)  # (returned twice, bufferization crashes)
            value = emit.broadcast(value, range(len(shape)), shape)
        results.append(value)
        if emit.elem_type(results[-1]) != ir.Type.parse(ELEM_TYPE_NAMES[p.dtype]):
            raise OnnxImportError(
                f"internal: output '{p.onnx_name}' element type mismatch", imp.file
            )
    return results
