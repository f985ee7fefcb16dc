"""`import_onnx`: load, validate (D-COMPILE-VALIDATE), prepare
(D-COMPILE-SIMPLIFY) and convert a model (`driver.convert`).

A model with nodes of op types the importer does not convert, which the
simplifier cannot remove, is reported before the simplifier and the
converters are loaded (D-COMPILE-EARLY-UNSUPPORTED: `op_types`): this
module and the steps before conversion need only `onnx`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import onnx

from nem.dialect.limits import DEFAULT_MAX_NODES, MAX_MODEL_BYTES
from nem.frontends.onnx.bind import bind_inputs
from nem.frontends.onnx.diagnostics import OnnxImportError, OnnxImportErrors
from nem.frontends.onnx.prepare import NOT_SIMPLIFIED, ShapeInferenceError, prepare
from nem.frontends.onnx.validate import check_inferred, load_model, tensors, validate

if TYPE_CHECKING:
    from nem.frontends.onnx.graph import ImportedModel

EARLY_NOTE = (
    "the graph was not simplified (D-COMPILE-EARLY-UNSUPPORTED): errors of nodes "
    "the simplifier may fold or rewrite are checked once the ones above are fixed"
)


def import_onnx(
    model: str | Path | onnx.ModelProto,
    func_name: str = "main",
    file: str | None = None,
    softmax_types: frozenset[str] = frozenset(),
    simplify: bool = True,
    demote_f64: bool = True,
    demote_i64: bool = True,
    max_nodes: int = DEFAULT_MAX_NODES,
    max_model_bytes: int = MAX_MODEL_BYTES,
    bind: Mapping[str, object] | None = None,
) -> ImportedModel:
    """Import an ONNX model (a path or a `ModelProto`, which is not modified)
    as linalg on tensors: prepared (D-COMPILE-SIMPLIFY; `simplify=False`
    skips the graph simplifier), f64 computed in f32 unless `demote_f64` is
    False (D-COMPILE-F64), int64 data in i32 unless `demote_i64` is False
    (D-COMPILE-I64); a Softmax over one axis of an element type in
    `softmax_types` is one `linalg.softmax` (D-COMPILE-SOFTMAX), else its
    decomposition.  The model is validated first (D-COMPILE-VALIDATE): at
    most `max_nodes` nodes, a file of at most `max_model_bytes` with its
    external data.  The graph inputs named in `bind` are constants of
    the given values (D-COMPILE-BIND)."""
    if isinstance(model, onnx.ModelProto):
        proto, where = model, file or "<model>"
        unloaded = [
            what for what, t in tensors(proto) if t.data_location == onnx.TensorProto.EXTERNAL
        ]
        if unloaded:
            raise OnnxImportError(
                f"{unloaded[0]} has its data in an external file that is not loaded",
                where,
                fix="pass the model's path, or load it with onnx.load(path) first",
            )
    else:
        path = str(model)
        where = file or path
        proto = load_model(path, where, max_model_bytes)
    validate(proto, where, max_nodes)
    if bind:
        proto = bind_inputs(proto, bind, where)

    early: list[OnnxImportError] = []

    def check_op_types(m: onnx.ModelProto, node_index: dict[str, tuple[int, str]]) -> bool:
        from nem.frontends.onnx.op_types import early_unsupported

        early.extend(early_unsupported(m, where, node_index, simplify))
        return bool(early)  # the model fails whatever the simplifier does: not loaded

    try:
        prepared = prepare(proto, simplify, check_op_types)
    except ShapeInferenceError as e:
        failed = f"ONNX shape inference failed: {e}"
        # an op type onnx cannot infer (a function op whose body onnx cannot build,
        # GroupNormalization-21 before a Relu)
        # is most often one the importer does not take either: name it
        unsupported = _unsupported_op_types(proto, where)
        if unsupported:
            errors = OnnxImportErrors(unsupported, where)
            errors.notes.append(failed)
            raise errors from e
        raise OnnxImportError(
            failed,
            where,
            fix="check the model with onnx.checker.check_model(model, full_check=True)",
        ) from e
    check_inferred(prepared.model, where, prepared.node_index)
    from nem.frontends.onnx.driver import convert
    from nem.frontends.onnx.fusions import fuse_erf_gelu, fused_into
    from nem.frontends.onnx.graph import Importer

    fuse_erf_gelu(prepared.model.graph)  # one Gelu, raised as NEM gelu (D-COMPILE-GELU-ERF)
    imp = Importer(
        prepared.model,
        where,
        func_name,
        softmax_types,
        prepared.node_index,
        demote_f64,
        demote_i64,
        prepared.arrays,
        prepared.source_opset,
    )
    try:
        im = convert(imp)
    except OnnxImportError as e:
        if early and isinstance(e, OnnxImportErrors):
            e = _surviving(e, prepared.model, where)
        if prepared.checker is not None:
            e.notes.append(f"onnx.checker.check_model rejects the model: {prepared.checker}")
        # why the simplifier's graph was not taken: an error such as "a shape
        # computed at run time" may be one it would have folded
        e.notes += [n for n in prepared.notes if n.startswith(NOT_SIMPLIFIED)]
        raise e from None
    ports = {
        v.type.tensor_type.elem_type
        for v in [*imp.graph.input, *imp.graph.output]
        if v.name not in imp.consts and v.name not in imp.unread_inputs
    }
    im.notes = (
        prepared.notes
        + [
            f"{what} computed in {narrow} ({rule})"
            for elem, what, narrow, rule, on in (
                (onnx.TensorProto.DOUBLE, "f64", "f32", "D-COMPILE-F64", demote_f64),
                (onnx.TensorProto.INT64, "int64 data", "i32", "D-COMPILE-I64", demote_i64),
            )
            if on and elem in ports
        ]
        + [
            f"input '{n}' is not a program buffer: its values only fix shapes the model declares"
            for n in imp.unread_inputs
        ]
    )
    from nem.frontends.onnx import zero_weights

    zeros = zero_weights.warning(
        where, zero_weights.zero_weights(imp.graph, imp.consts, imp.source)
    )
    im.warnings = [zeros] if zeros else []
    index = prepared.node_index
    im.fused = {
        into: [(index[n][0], n, index[n][1]) for n in gone]
        for into, gone in fused_into(prepared.flow, prepared.model.graph).items()
    }
    return im


def _unsupported_op_types(model: onnx.ModelProto, where: str) -> list[OnnxImportError]:
    """The 'not supported: op type' errors of `model`'s nodes, in node order
    (D-COMPILE-EARLY-UNSUPPORTED, without the simplifier's view: a model
    that strict shape inference rejects is not simplified)."""
    from nem.frontends.onnx.op_types import early_unsupported
    from nem.frontends.onnx.prepare import name_nodes

    return early_unsupported(model, where, name_nodes(model.graph), False)


def _surviving(e: OnnxImportErrors, model: onnx.ModelProto, where: str) -> OnnxImportErrors:
    """The errors of the conversion of the unsimplified `model` that the
    simplifier could not have avoided (D-COMPILE-EARLY-UNSUPPORTED): those
    of nodes it would keep as they are, and those of no node."""
    from nem.frontends.onnx.op_types import kept_by_simplifier

    kept = kept_by_simplifier(model)
    errors = [x for x in e.errors if x.node is None or x.node[1] in kept]
    out = OnnxImportErrors(errors, where)
    out.notes = [*e.notes, *([EARLY_NOTE] if len(kept) < len(model.graph.node) else [])]
    return out
