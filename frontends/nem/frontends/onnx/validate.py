"""Reading and validating an ONNX model before any work (D-COMPILE-VALIDATE).

`load_model` reads a model file as every tool reads files (D-FILE-PATHS: a
regular file, at most `MAX_MODEL_BYTES` with its external data), and checks
each external-data reference (a regular file beside the model, the length
its dims need, inside the file) before onnx reads it.  `validate` then
checks, in linear time and before shape inference, the simplifier or MLIR
see the model, what would otherwise end in an internal error, an abort, or a
compile that silently drops part of the graph:

* versions: the IR version and every default-domain opset within what the
  installed onnx knows (an opset of 2^62 overflowed its schema lookup), each
  domain imported once (two default-domain opsets: which one applied?);
* tensors (initializers and tensor attributes): a known element type, dims
  >= 0, at most `MAX_TENSOR_BYTES`, and data of exactly the length the dims
  need (`raw_data`, or the typed field: a short `float_data` was reshaped
  into an internal error; both at once is ambiguous, and was compiled from
  `raw_data` alone), rank at most `MAX_RANK`, external data in a file other
  than the model itself and not through a symbolic link; no sparse
  initializers (not supported: they read as undefined values);
* declared values (graph inputs, outputs, value_info): a known element type
  and a shape of at most `MAX_TENSOR_BYTES` (an input of [2^32, 2^32, 2^10]
  aborted MLIR in its strided-layout computation);
* the graph: at least one output, non-empty input, output and initializer
  names, every value written once
  (by one node, or as a graph input or initializer: a second writer was
  dropped, `Relu(x) -> x` was accepted), attributes of the type their
  schema declares (a string Softmax `axis` reached `int()`), and the
  compile budget: at most `max_nodes` nodes, `MAX_NODE_PORTS` inputs or
  outputs of a node, `MAX_NODE_PORTS` graph inputs and outputs.

Each error names the node (`node 3 'n' (Op)`) or the initializer or value
it is about; every error is reported at once (D-COMPILE-DIAG).
`onnx.checker`'s other verdicts stay a note (`prepare.py`): it rejects
models onnxruntime runs (outputs without a declared shape).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto

from nem.dialect.limits import (
    DEFAULT_MAX_NODES,
    MAX_MODEL_BYTES,
    MAX_NODE_PORTS,
    MAX_RANK,
    MAX_TENSOR_BYTES,
)
from nem.dialect.source_files import FileRefused, regular_file
from nem.frontends.onnx.diagnostics import OnnxImportError, OnnxImportErrors, shown

_T = TensorProto
_NAMES: dict[int, str] = {int(v): k for k, v in TensorProto.DataType.items()}
_BITS: dict[int, int] = {
    _T.FLOAT: 32,
    _T.UINT8: 8,
    _T.INT8: 8,
    _T.UINT16: 16,
    _T.INT16: 16,
    _T.INT32: 32,
    _T.INT64: 64,
    _T.BOOL: 8,
    _T.FLOAT16: 16,
    _T.DOUBLE: 64,
    _T.UINT32: 32,
    _T.UINT64: 64,
    _T.COMPLEX64: 64,
    _T.COMPLEX128: 128,
    _T.BFLOAT16: 16,
    **{
        getattr(_T, n): 8
        for n in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0")
        if hasattr(_T, n)
    },
    **{getattr(_T, n): 4 for n in ("UINT4", "INT4", "FLOAT4E2M1") if hasattr(_T, n)},
    **{getattr(_T, n): 2 for n in ("UINT2", "INT2") if hasattr(_T, n)},
}
"""Bits per element of the types whose raw data the checks below measure
(sub-byte types packed, the last byte padded); strings have no raw form."""

_FIELD: dict[int, tuple[str, int]] = {
    _T.FLOAT: ("float_data", 1),
    _T.COMPLEX64: ("float_data", 2),
    _T.DOUBLE: ("double_data", 1),
    _T.COMPLEX128: ("double_data", 2),
    _T.INT64: ("int64_data", 1),
    _T.UINT32: ("uint64_data", 1),
    _T.UINT64: ("uint64_data", 1),
    **{
        t: ("int32_data", 1)
        for t in (
            _T.INT32,
            _T.INT16,
            _T.INT8,
            _T.UINT16,
            _T.UINT8,
            _T.BOOL,
            _T.FLOAT16,
            _T.BFLOAT16,
        )
    },
}
"""The typed field holding a tensor's values when it has no raw_data, and
the entries per element (ONNX's TensorProto)."""


def type_name(elem: int) -> str:
    return _NAMES.get(elem, str(elem))


def _mb(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= size and n % size == 0 and n // size < 10**6:
            return f"{n} bytes ({n // size} {unit})"
    return f"{n} bytes"


def load_model(
    path: str, where: str | None = None, max_bytes: int = MAX_MODEL_BYTES
) -> onnx.ModelProto:
    """The model in file `path`, its external data loaded after every
    reference was checked (module docstring); `OnnxImportError` otherwise."""
    where = where or path
    try:
        size = regular_file(path, "model").st_size
    except FileRefused as e:
        raise OnnxImportError(str(e), where, fix=e.fix) from None
    if size == 0:
        raise OnnxImportError(
            "not an ONNX model: the file is empty",
            where,
            fix="give a .onnx file written by onnx.save",
        )
    if size > max_bytes:
        raise OnnxImportError(
            f"the model file has {_mb(size)}, above the limit of {_mb(max_bytes)} (D-LIMITS)",
            where,
            fix="raise the limit with --max-model-bytes N",
        )
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as e:  # protobuf decode errors have several types
        raise OnnxImportError(
            f"not an ONNX model: {str(e).strip() or type(e).__name__}",
            where,
            fix="give a .onnx file written by onnx.save",
        ) from e
    external = check_external_data(
        model, where, os.path.dirname(os.path.abspath(path)), max_bytes - size, path
    )
    if external:
        from onnx.external_data_helper import load_external_data_for_model

        try:
            load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
        except Exception as e:  # onnx refuses traversal and links with ValidationError
            raise OnnxImportError(
                f"cannot load the model's external data: {str(e).strip() or type(e).__name__}",
                where,
            ) from e
    return model


def tensors(model: onnx.ModelProto) -> Iterator[tuple[str, TensorProto]]:
    """(what, tensor) for every tensor of the main graph: initializers and
    the tensor attributes of its nodes (Constant's value)."""
    for t in model.graph.initializer:
        yield f"initializer '{t.name}'", t
    for k, n in enumerate(model.graph.node):
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield (
                    f"node {k} '{shown(n.name)}' ({shown(n.op_type)}): attribute '{shown(a.name)}'",
                    a.t,
                )


def external_data_files(path: str) -> list[str]:
    """The files the tensors of the ONNX model at `path` name as external
    data, beside it (none for a file that is no model): inputs of a
    compile, which no output may overwrite (D-FILE-PATHS)."""
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:  # protobuf decode errors have several types: the import reports them
        return []
    base = os.path.dirname(os.path.abspath(path))
    return [
        os.path.join(base, loc)
        for _, t in tensors(model)
        if t.data_location == TensorProto.EXTERNAL
        for e in t.external_data
        if e.key == "location" and isinstance(loc := e.value, str) and loc
    ]


def check_external_data(
    model: onnx.ModelProto, where: str, base: str, budget: int, model_path: str | None = None
) -> int:
    """Check every external-data reference of `model` (files beside the
    model other than `model_path` itself, regular, holding the bytes the
    tensor's dims need, all of them within `budget` bytes); the number of
    tensors with external data."""
    count, total = 0, 0
    for what, t in tensors(model):
        if t.data_location != TensorProto.EXTERNAL:
            continue
        count += 1
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        if isinstance(location, bytes):  # not UTF-8: protobuf gives bytes
            raise OnnxImportError(
                f"{what}: external data location {location!r} is not valid UTF-8",
                where,
                fix="name the data file in UTF-8 text",
            )
        if not location or os.path.isabs(location) or ".." in Path(location).parts:
            raise OnnxImportError(
                f"{what}: external data location {location!r} is not a file beside the model", where
            )
        try:
            offset, length = int(info.get("offset", "0")), info.get("length")
            file_size = regular_file(os.path.join(base, location), "external data").st_size
        except ValueError:
            raise OnnxImportError(
                f"{what}: external data offset {info.get('offset')!r} is not an integer", where
            ) from None
        except FileRefused as e:
            raise OnnxImportError(f"{what}: {e}", where) from None
        full = os.path.join(base, location)
        if os.path.islink(full) or not os.path.realpath(full).startswith(
            os.path.join(os.path.realpath(base), "")
        ):
            raise OnnxImportError(
                f"{what}: external data '{location}' is a symbolic link "
                "(or lies under one): onnx reads only files beside the model",
                where,
                fix="copy the data file beside the model",
            )
        if model_path is not None and os.path.samefile(full, model_path):
            raise OnnxImportError(
                f"{what}: external data location {location!r} is the model file itself",
                where,
                fix="save the weights with onnx.save(..., "
                "save_as_external_data=True, location=OTHER_FILE)",
            )
        need = _data_bytes(t)
        try:
            have = int(length) if length is not None else file_size - offset
        except ValueError:
            raise OnnxImportError(
                f"{what}: external data length {length!r} is not an integer", where
            ) from None
        if not 0 <= offset <= file_size:
            raise OnnxImportError(
                f"{what}: external data offset {offset} lies outside "
                f"'{location}' ({file_size} bytes)",
                where,
            )
        if have < 0 or offset + have > file_size:
            raise OnnxImportError(
                f"{what}: external data [{offset}, {offset + have}) lies "
                f"outside '{location}' ({file_size} bytes)",
                where,
            )
        if need is not None and have != need:
            raise OnnxImportError(
                f"{what}: external data has {have} bytes, its "
                f"{type_name(t.data_type)} dims {list(t.dims)} need {need}",
                where,
            )
        total += have
        if total > budget:
            raise OnnxImportError(
                f"the model's external data exceeds the limit of "
                f"{_mb(budget)} at {what} (D-LIMITS)",
                where,
                fix="raise the limit with --max-model-bytes N",
            )
    return count


def _data_bytes(t: TensorProto) -> int | None:
    """Bytes of `t`'s values by its dims and type (None: not measured here:
    a type of no fixed width, or a negative dimension, which the tensor
    checks report as such)."""
    bits = _BITS.get(t.data_type)
    return (
        None if bits is None or any(d < 0 for d in t.dims) else (math.prod(t.dims) * bits + 7) // 8
    )


class _Errors:
    def __init__(self, where: str):
        self.where = where
        self.errors: list[OnnxImportError] = []

    def add(
        self, message: str, node: tuple[int, onnx.NodeProto] | None = None, fix: str | None = None
    ) -> None:
        ref = (
            None
            if node is None
            else (node[0], node[1].name or f"{node[1].op_type}_{node[0]}", node[1].op_type)
        )
        # names are the model's: one with a line break must not break the headline
        self.errors.append(OnnxImportError(shown(message), self.where, ref, fix))


def validate(model: onnx.ModelProto, where: str, max_nodes: int = DEFAULT_MAX_NODES) -> None:
    """Raise every structural problem of `model` (module docstring) as one
    `OnnxImportErrors`; nothing for a valid model."""
    errs = _Errors(where)
    g = model.graph
    if len(g.node) > max_nodes:  # first: the checks below cost per node
        raise OnnxImportError(
            f"the model has {len(g.node)} nodes, above the compile budget of "
            f"{max_nodes} (D-LIMITS)",
            where,
            fix=f"raise the budget with --max-nodes {len(g.node)} "
            "(max_nodes= from Python) if that is meant",
        )
    _text_fields(model, errs)
    if errs.errors:  # every check below formats these names
        raise OnnxImportErrors(errs.errors, where)
    _versions(model, errs)
    if errs.errors:  # schema lookups below need sane opsets
        raise OnnxImportErrors(errs.errors, where)
    for sp in g.sparse_initializer:  # was "input 'w' is not produced by any earlier node"
        errs.add(
            f"not supported: sparse initializer '{shown(sp.values.name)}' (dims {list(sp.dims)})",
            fix="store it as a dense initializer (onnx.numpy_helper.from_array)",
        )
    if not g.output:
        errs.add(
            "the graph has no outputs: there is nothing to compute",
            fix="declare the values the model computes as graph outputs",
        )
    for what, ports in (("inputs", len(g.input)), ("outputs", len(g.output))):
        if ports > MAX_NODE_PORTS:
            errs.add(
                f"the graph has {ports} {what}, above the limit of {MAX_NODE_PORTS} (D-LIMITS)"
            )
    for what, t in tensors(model):
        _tensor(what, t, errs)
    for kind, values in (("input", g.input), ("output", g.output), ("value_info", g.value_info)):
        for vi in values:
            _value(kind, vi, errs)
    _graph(model, errs)
    if errs.errors:
        raise OnnxImportErrors(errs.errors, where)


def _text_fields(model: onnx.ModelProto, errs: _Errors) -> None:
    """Names and op types that are not valid UTF-8: protobuf gives such a
    string field of ONNX (proto2) as bytes, which every lookup then trips on."""

    def check(what: str, values: Sequence[str | bytes]) -> None:
        """`what` ending in a space is numbered per value.  It is formatted
        only for a bad value: a node may have thousands of inputs (a
        hostile model of 5,001 nodes of 3,001 inputs took 6 s)."""
        for j, v in enumerate(values):
            if isinstance(v, bytes):
                label = f"{what}{j}" if what.endswith(" ") else what
                errs.add(
                    f"{label} is not valid UTF-8: {v!r}",
                    fix="write names, op types and domains as UTF-8 text",
                )

    g = model.graph
    for kind, vs in (("input", g.input), ("output", g.output), ("value_info", g.value_info)):
        check(f"graph {kind} ", [v.name for v in vs])
    check("initializer ", [t.name for t in g.initializer])
    for k, n in enumerate(g.node):
        for field in ("name", "op_type", "domain"):
            check(f"node {k}: {field}", [getattr(n, field)])
        check(f"node {k}: input ", n.input)
        check(f"node {k}: output ", n.output)
        check(f"node {k}: attribute ", [a.name for a in n.attribute])
    for i, o in enumerate(model.opset_import):
        check(f"opset_import {i}: domain", [o.domain])
    if not errs.errors:  # the fields named above get their own labels
        _other_text_fields(model, "model", errs)


def _other_text_fields(msg: Any, path: str, errs: _Errors) -> None:
    """Every other string field of `msg`, recursively (the graph's name,
    doc strings, producer, denotations, ...): a tool reading any of them
    would trip on bytes where the schema says text (a graph name of 0xb9
    was an internal error of the shape inference's first step)."""
    for fd in msg.DESCRIPTOR.fields:  # (not ListFields: it would copy every raw_data)
        many = _repeated(fd)
        if fd.type == fd.TYPE_STRING:
            value = getattr(msg, fd.name)
            for j, v in enumerate(value if many else [value]):
                if isinstance(v, bytes):
                    errs.add(
                        f"{path}.{fd.name}{f'[{j}]' if many else ''} is not valid "
                        f"UTF-8: {v[:40]!r}",
                        fix="write the model's text fields as UTF-8",
                    )
        elif fd.type == fd.TYPE_MESSAGE and (many or msg.HasField(fd.name)):
            value = getattr(msg, fd.name)
            for j, m in enumerate(value if many else [value]):
                _other_text_fields(m, f"{path}.{fd.name}{f'[{j}]' if many else ''}", errs)


def _repeated(fd: Any) -> bool:
    """protobuf 5.28 added `is_repeated` and 7 removed `label`."""
    is_repeated = getattr(fd, "is_repeated", None)
    return bool(is_repeated) if is_repeated is not None else fd.label == fd.LABEL_REPEATED


def _versions(model: onnx.ModelProto, errs: _Errors) -> None:
    if not 1 <= model.ir_version <= onnx.IR_VERSION:
        errs.add(
            f"ir_version {model.ir_version} is not one onnx {onnx.__version__} knows "
            f"(1 to {onnx.IR_VERSION})",
            fix="save the model with a released onnx",
        )
    newest = onnx.defs.onnx_opset_version()
    seen: set[str] = set()
    for o in model.opset_import:
        domain = "" if o.domain == "ai.onnx" else o.domain
        if domain in seen:
            errs.add(
                f"opset_import names domain '{o.domain}' twice (versions "
                f"{[p.version for p in model.opset_import if p.domain == o.domain]})",
                fix="import each domain once, at the opset the model was written for",
            )
        seen.add(domain)
        if o.domain in ("", "ai.onnx") and not 1 <= o.version <= newest:
            errs.add(
                f"opset_import of the default domain is {o.version}; onnx "
                f"{onnx.__version__} knows opsets 1 to {newest}",
                fix="convert the model with onnx.version_converter",
            )
        elif not 0 <= o.version < 2**31:
            errs.add(f"opset_import of domain '{o.domain}' is {o.version}")


def _tensor(what: str, t: TensorProto, errs: _Errors) -> None:
    if t.data_type not in _NAMES or t.data_type == TensorProto.UNDEFINED:
        errs.add(f"{what} has data_type {t.data_type}, not an ONNX element type")
        return
    if any(d < 0 for d in t.dims):
        errs.add(f"{what} has a negative dimension: dims {list(t.dims)}")
        return
    if len(t.dims) > MAX_RANK:
        errs.add(f"{what} has rank {len(t.dims)}, above the limit of {MAX_RANK} (D-LIMITS)")
        return
    if t.data_location == TensorProto.EXTERNAL:
        return  # checked against its file by check_external_data, or not loaded
    need = _data_bytes(t)
    if need is not None and need > MAX_TENSOR_BYTES:
        errs.add(
            f"{what} has dims {list(t.dims)} ({_mb(need)}), above the limit of "
            f"{_mb(MAX_TENSOR_BYTES)} for one tensor (D-LIMITS)"
        )
        return
    count = math.prod(t.dims)
    typed = [
        f for f in sorted({f for f, _ in _FIELD.values()} | {"string_data"}) if len(getattr(t, f))
    ]
    if t.HasField("raw_data") and typed:
        errs.add(
            f"{what} has both raw_data and {typed[0]}: ONNX holds a tensor's values in one of them",
            fix="keep one (onnx.numpy_helper.from_array writes raw_data)",
        )
        return
    if t.HasField("raw_data"):
        if t.data_type == TensorProto.STRING:
            errs.add(
                f"{what} is a STRING tensor with raw_data: ONNX strings are held in "
                "string_data only",
                fix="store the strings in string_data",
            )
        elif need is not None and len(t.raw_data) != need:
            errs.add(
                f"{what}: raw_data has {len(t.raw_data)} bytes, its "
                f"{type_name(t.data_type)} dims {list(t.dims)} need {need}"
            )
        return
    field, per = _FIELD.get(t.data_type, (None, 1))
    if field is not None:
        have = len(getattr(t, field))
        if have != count * per:
            errs.add(
                f"{what}: {field} has {have} values, its {type_name(t.data_type)} dims "
                f"{list(t.dims)} need {count * per}"
            )


def _value(kind: str, vi: onnx.ValueInfoProto, errs: _Errors) -> None:
    if kind != "value_info" and not vi.name:
        errs.add(f"a graph {kind} has an empty name", fix="name every input and output")
    if not vi.type.HasField("tensor_type"):
        return
    tt = vi.type.tensor_type
    if tt.elem_type not in _NAMES:
        errs.add(f"{kind} '{vi.name}' has elem_type {tt.elem_type}, not an ONNX element type")
        return
    if len(tt.shape.dim) > MAX_RANK:
        errs.add(
            f"{kind} '{vi.name}' has rank {len(tt.shape.dim)}, above the limit of "
            f"{MAX_RANK} (D-LIMITS)"
        )
        return
    dims = [d.dim_value for d in tt.shape.dim if d.HasField("dim_value")]
    if any(d < 0 for d in dims):
        errs.add(f"{kind} '{vi.name}' has a negative dimension: {dims}")
        return
    bits = _BITS.get(tt.elem_type, 8)
    size = math.prod(dims) * bits // 8
    if size > MAX_TENSOR_BYTES:
        errs.add(
            f"{kind} '{vi.name}' has shape {dims} ({_mb(size)}), above the limit of "
            f"{_mb(MAX_TENSOR_BYTES)} for one tensor (D-LIMITS)"
        )


def _graph(model: onnx.ModelProto, errs: _Errors) -> None:
    """Every value written once; node ports and attributes."""
    g = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    writer: dict[str, str] = {}
    for i in g.input:
        if writer.get(i.name, "").startswith("graph input"):
            errs.add(
                f"graph input '{i.name}' is declared twice: a run could feed only one of them",
                fix="give each graph input its own name",
            )
        writer.setdefault(i.name, f"graph input '{i.name}'")
    for t in g.initializer:
        if not t.name:
            errs.add("an initializer has an empty name", fix="name every initializer")
            continue
        if writer.get(t.name, "").startswith("initializer"):
            errs.add(f"initializer '{t.name}' is defined twice")
        writer.setdefault(t.name, f"initializer '{t.name}'")
    for k, n in enumerate(g.node):
        if len(n.input) > MAX_NODE_PORTS or len(n.output) > MAX_NODE_PORTS:
            errs.add(
                f"{len(n.input)} inputs and {len(n.output)} outputs, above the limit of "
                f"{MAX_NODE_PORTS} per node (D-LIMITS)",
                (k, n),
            )
            continue
        if not n.op_type:
            errs.add(
                "the node has no op_type (ONNX requires one)",
                (k, n),
                fix="give the node the type of the operator it applies",
            )
        for o in n.output:
            if not o:
                continue
            if o in writer:
                errs.add(
                    f"output '{o}' is already written by {writer[o]}: every value has "
                    "one writer (ONNX graphs are in SSA form)",
                    (k, n),
                    fix="rename one of the values",
                )
            else:
                writer[o] = f"node {k} '{shown(n.name or n.op_type)}'"
        _attributes(k, n, opset, errs)


def _attributes(k: int, n: onnx.NodeProto, opset: int, errs: _Errors) -> None:
    if n.domain not in ("", "ai.onnx"):
        return
    try:
        schema = onnx.defs.get_schema(n.op_type, opset, n.domain)
    except onnx.defs.SchemaError:
        return  # an unknown op: the importer says so
    for a in n.attribute:
        if a.ref_attr_name:
            continue
        declared = schema.attributes.get(a.name)
        if declared is None:
            errs.add(
                f"attribute '{a.name}' is not an attribute of {n.op_type} (opset {opset})", (k, n)
            )
        elif int(declared.type) != a.type:  # type: ignore[call-overload]  # pybind enum
            want = _attr_type(int(declared.type))  # type: ignore[call-overload]
            errs.add(
                f"attribute '{a.name}' is {_attr_type(a.type)}, the schema of "
                f"{n.op_type} declares {want}",
                (k, n),
                fix=f"give '{a.name}' as {want}",
            )


def _attr_type(t: int) -> str:
    try:
        return str(onnx.AttributeProto.AttributeType.Name(t))
    except ValueError:
        return f"of type {t}"


def check_inferred(
    model: onnx.ModelProto, where: str, node_index: dict[str, tuple[int, str]]
) -> None:
    """Every value shape inference gave a static shape is at most
    `MAX_TENSOR_BYTES` (an Expand or MatMul can make one far larger than any
    declared value); an error names the node computing it."""
    errs = _Errors(where)
    shapes = {vi.name: vi for vi in [*model.graph.value_info, *model.graph.output]}
    for k, n in enumerate(model.graph.node):
        for o in n.output:
            vi = shapes.get(o)
            if vi is None:
                continue
            before = len(errs.errors)
            _value("value", vi, errs)
            if len(errs.errors) > before:
                index, op = node_index.get(n.name, (k, n.op_type))
                e = errs.errors.pop()
                errs.errors.append(OnnxImportError(e.message, where, (index, n.name, op)))
    if errs.errors:
        raise OnnxImportErrors(errs.errors, where)
