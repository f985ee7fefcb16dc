"""ONNX graph -> one `func.func` of linalg on tensors (upstream MLIR bindings).

The `onnx` package reads the model and infers its shapes; each node is then
converted in topological order by the converter `converters.CONVERTERS[op_type]`,
which builds linalg-on-tensors IR with `emit.py`.

Interface (docs/compile.md, D-COMPILE-IFACE): the function's arguments are
the model's inputs (graph inputs that are not initializers) in the model's
order, then the weights (initializers used as tensors, after the importer's
compile-time rewrites such as OIHW -> HWCF and batch-norm folding), in first
use order; its results are the model's outputs.  Inputs and outputs have the
model's names (sanitized to NEM identifiers), shapes and layout: any layout
change (NCHW -> NHWC for convolutions and pooling) happens inside.

Layouts (D-COMPILE-LAYOUT): a value is a `TensorVal` whose MLIR tensor holds
the logical (ONNX) dimensions in the order `perm` (physical dimension i is
logical dimension `perm[i]`).  Convolutions and pooling want NHWC
activations (`perm = (0, 2, 3, 1)`), elementwise ops take any layout
(broadcasting maps follow `perm`), `Transpose` only changes `perm`, and a
value is made physical-equals-logical (`linalg.transpose`, or a reshape when
only size-1 dimensions move) where an op needs the logical order: model
outputs, `Reshape`, `Flatten`, `MatMul`.

Errors: an unsupported op type or attribute value, a dynamic shape or an
element type other than f32/f16 is an `OnnxImportError` naming the model
file, the node's index and name and its op type.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from mlir import ir
from mlir.dialects import func
from nem.dialect.semantics import ELEM_DTYPES
from nem.frontends.onnx import emit
from onnx import helper, numpy_helper, shape_inference

NHWC = (0, 2, 3, 1)
"""The physical order of an NCHW activation: N, H, W, C."""

ELEM_TYPES: dict[int, tuple[str, np.dtype]] = {
    t: (n, ELEM_DTYPES[n]) for t, n in ((onnx.TensorProto.FLOAT, "f32"),
                                        (onnx.TensorProto.FLOAT16, "f16"))}
"""ONNX element types the importer takes: spec name and dtype (nem.dialect.semantics)."""


class OnnxImportError(Exception):
    """A model the importer cannot convert: where (file, node index, name,
    op type), what, and how to fix it."""

    def __init__(self, message: str, file: str, node: tuple[int, str, str] | None = None,
                 fix: str | None = None):
        self.message, self.file, self.node, self.fix = message, file, node, fix
        super().__init__(self.render())

    def render(self) -> str:
        where = self.file
        if self.node is not None:
            index, name, op_type = self.node
            where += f": node {index} '{name}' ({op_type})"
        text = f"{where}: error: {self.message}"
        return text + (f"\nfix: {self.fix}" if self.fix else "")


@dataclass(frozen=True)
class Port:
    """A model input or output: its NEM name, ONNX name, shape and dtype."""

    name: str
    onnx_name: str
    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass
class ImportedModel:
    """The imported program: `module` holds one public `func.func` named
    `func_name` whose arguments are `inputs` then `weights` and whose
    results are `outputs` (names in that order: `arg_names`)."""

    context: ir.Context
    module: ir.Module
    func_name: str
    inputs: list[Port]
    weights: dict[str, np.ndarray]
    outputs: list[Port]

    @property
    def arg_names(self) -> list[str]:
        return [p.name for p in self.inputs] + list(self.weights) + \
               [p.name for p in self.outputs]


@dataclass(frozen=True)
class TensorVal:
    """An ONNX tensor as MLIR: `value` holds logical dimension `perm[i]` as
    its dimension i; `shape` is the logical (ONNX) shape."""

    value: ir.Value
    shape: tuple[int, ...]
    perm: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def elem(self) -> ir.Type:
        return emit.elem_type(self.value)


_KEYWORDS = {"const", "let", "buffer", "region", "loop", "endloop", "wait", "in", "out",
             "device", "include", "program", "deps", "type_family", "elem", "shape",
             "layout", "strides", "quant"}


def nem_name(name: str, taken: set[str]) -> str:
    """A NEM identifier for an ONNX name (`input.1` -> `input1`), unique in
    `taken`.  A trailing `_<digits>` is avoided (xDSL reads it as a
    uniquing suffix of the name hint)."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_") or "t"
    if base[0].isdigit():
        base = "t" + base
    base = re.sub(r"_(\d+)$", r"\1", base)
    if base in _KEYWORDS:
        base += "_t"
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}v{k}"
    taken.add(out)
    return out


@dataclass(frozen=True)
class InterfaceNames:
    """The buffer name of each model input and output, as (ONNX name, NEM
    name) pairs in the model's order (D-COMPILE-IFACE), and every name
    they take."""

    inputs: tuple[tuple[str, str], ...]
    outputs: tuple[tuple[str, str], ...]
    taken: frozenset[str]


def interface_names(graph: onnx.GraphProto) -> InterfaceNames:
    """The one name table of a model's interface: the inputs that are not
    initializers, then the outputs, each `nem_name`d in order, so a
    collision suffixes the later one (`a.b`, `a_b` -> `a_b`, `a_bv2`).  The
    importer names its arguments with it and `nem.compile.check` maps
    command-line names through it."""
    inits = {i.name for i in graph.initializer}
    taken: set[str] = set()
    inputs = tuple((v.name, nem_name(v.name, taken)) for v in graph.input
                   if v.name not in inits)
    outputs = tuple((v.name, nem_name(v.name, taken)) for v in graph.output)
    return InterfaceNames(inputs, outputs, frozenset(taken))


def _perm_inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


@dataclass
class Node:
    """A node being converted: its inputs ('' for an absent optional one),
    outputs and attributes (Python values)."""

    index: int
    proto: onnx.NodeProto
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    @property
    def name(self) -> str:
        return self.proto.name or f"{self.op_type}_{self.index}"

    @property
    def inputs(self) -> list[str]:
        return list(self.proto.input)

    @property
    def outputs(self) -> list[str]:
        return list(self.proto.output)

    def input(self, k: int) -> str:
        return self.proto.input[k] if k < len(self.proto.input) else ""


class Importer:
    """Converts one ONNX model; see the module docstring."""

    def __init__(self, model: onnx.ModelProto, file: str, func_name: str = "main",
                 softmax_types: frozenset[str] = frozenset()):
        self.file = file
        self.func_name = func_name
        self.softmax_types = softmax_types
        """Element types imported as `linalg.softmax` (the target runs NEM
        `softmax` on them, D-COMPILE-SOFTMAX); others are decomposed here."""
        try:
            self.model = shape_inference.infer_shapes(model, strict_mode=True)
        except Exception as e:  # onnx raises several unrelated types
            raise OnnxImportError(f"ONNX shape inference failed: {str(e).strip()}", file,
                                  fix="check the model with onnx.checker.check_model") from e
        self.graph = self.model.graph
        self.opset = next((o.version for o in self.model.opset_import
                           if o.domain in ("", "ai.onnx")), 1)
        self.consts: dict[str, np.ndarray] = {}
        self.vals: dict[str, TensorVal] = {}
        self.node: Node | None = None
        self.names: set[str] = set()
        self.weights: dict[str, np.ndarray] = {}
        self.weight_names: dict[str, str] = {}
        self.inferred: dict[str, onnx.ValueInfoProto] = {
            v.name: v for v in [*self.graph.value_info, *self.graph.output]}

    # ---------------------------------------------------------- diagnostics
    def error(self, message: str, fix: str | None = None) -> OnnxImportError:
        """An error at the node being converted (raise the result)."""
        where = None
        if self.node is not None:
            where = (self.node.index, self.node.name, self.node.op_type)
        return OnnxImportError(message, self.file, where, fix)

    def check_operand_types(self, node: Node) -> None:
        """The inputs that the op's ONNX schema (at the model's opset) binds
        to one type variable have one element type: Add's A and B (T),
        Concat's inputs, MatMul's, Gemm's and Conv's operands, Clip's bounds,
        ... (Pow's exponent is T1: any).  Checked here, once for every
        converter, because the converters combine operands assuming it: a
        model that breaks it (invalid ONNX, which onnxruntime refuses and
        strict shape inference lets through) otherwise reaches MLIR's
        verifier (`arith.addf` of f32 and f16) as an internal error."""
        try:
            schema = onnx.defs.get_schema(node.op_type, self.opset, "")
        except onnx.defs.SchemaError:
            return   # no schema at this opset: the converter judges the node
        params = {c.type_param_str for c in schema.type_constraints}
        formals = list(schema.inputs)
        groups: dict[str, list[tuple[str, str]]] = {}
        for k, name in enumerate(node.inputs):
            formal = formals[min(k, len(formals) - 1)] if formals else None
            if not name or formal is None or formal.type_str not in params:
                continue
            elem = self.elem_name(name)
            if elem is not None:
                groups.setdefault(formal.type_str, []).append((name, elem))
        for param, operands in groups.items():
            if len({e for _, e in operands}) > 1:
                listed = ", ".join(f"'{n}' {e}" for n, e in operands)
                raise self.error(
                    f"inputs have different element types: {listed} (the ONNX schema of "
                    f"{node.op_type} gives them one type {param})",
                    fix="make the model one element type throughout (float32 or float16); "
                        "onnx.checker.check_model(model, full_check=True) reports such "
                        "type errors")

    def elem_name(self, name: str) -> str | None:
        """The element type of ONNX value `name` as the importer holds it
        (`f32`, `f16`, or a constant's numpy dtype: `int64`), None when no
        earlier node produced it."""
        if name in self.vals:
            return str(self.vals[name].elem)
        if name in self.consts:
            dtype = self.consts[name].dtype
            return ELEM_TYPE_NAMES.get(dtype, dtype.name)
        return None

    def axis(self, a: int, rank: int) -> int:
        """ONNX axis `a` (negative: from the end) of a rank-`rank` tensor,
        in 0..rank-1; out of range is an error at the node."""
        if not -rank <= a < rank:
            raise self.error(f"axis {a} out of range for rank {rank}")
        return a % rank

    def const_ints(self, node: Node, k: int, what: str) -> list[int] | None:
        """Input `k` of `node` (index operands: Slice starts, Split sizes,
        reduction axes) as a list of ints, None when absent; one computed at
        run time is an error at the node."""
        name = node.input(k)
        if not name:
            return None
        c = self.const(name)
        if c is None:
            raise self.error(f"not supported: {node.op_type} {what} '{name}' computed at run "
                             "time", fix=f"make the {what} an initializer or Constant "
                             "(e.g. fold the shape subgraph with onnx-simplifier)")
        return [int(v) for v in c.reshape(-1)]

    # ---------------------------------------------------------- values
    def has(self, name: str) -> bool:
        return bool(name) and (name in self.vals or name in self.consts)

    def const(self, name: str) -> np.ndarray | None:
        """The compile-time value of `name` (initializer or Constant), else None."""
        return self.consts.get(name) if name else None

    def tensor(self, name: str) -> TensorVal:
        """The tensor `name`; a compile-time constant becomes a weight argument."""
        if name in self.vals:
            return self.vals[name]
        if name in self.consts:
            return self.weight(self.consts[name], name)
        raise self.error(f"input '{name}' is not produced by any earlier node")

    def weight(self, array: np.ndarray, name: str, perm: Sequence[int] | None = None
               ) -> TensorVal:
        """A weight argument holding `array` (already in its physical order;
        `perm` as in TensorVal, default identity), named after `name`."""
        key = (name, tuple(perm) if perm is not None else None)
        cached = self.weight_names.get(repr(key))
        if cached is not None and cached in self.vals:
            return self.vals[cached]
        array = self.check_float(np.ascontiguousarray(array), name)
        arg_name = nem_name(name, self.names)
        elem = ir.Type.parse(ELEM_TYPE_NAMES[array.dtype])
        arg = self.block.add_argument(emit.tensor_type(array.shape, elem),
                                      ir.Location.name(arg_name))
        self.weights[arg_name] = array
        perm = tuple(perm) if perm is not None else tuple(range(array.ndim))
        shape = [0] * array.ndim
        for i, p in enumerate(perm):
            shape[p] = array.shape[i]
        tv = TensorVal(arg, tuple(shape), perm)
        self.weight_names[repr(key)] = arg_name
        self.vals[arg_name] = tv
        return tv

    def check_float(self, array: np.ndarray, name: str) -> np.ndarray:
        if array.dtype not in ELEM_TYPE_NAMES:
            raise self.error(f"tensor '{name}' has element type {array.dtype}; only float32 "
                             "and float16 tensors are supported",
                             fix="convert the model to float32 or float16")
        return array

    def in_perm(self, tv: TensorVal, perm: Sequence[int]) -> ir.Value:
        """`tv` as an MLIR tensor whose dimension i is logical dimension `perm[i]`."""
        perm = tuple(perm)
        if tv.perm == perm:
            return tv.value
        # physical dim j of the result = logical perm[j] = current physical inv[perm[j]]
        inv = _perm_inverse(tv.perm)
        moved = [inv[p] for p in perm]
        phys = emit.shape_of(tv.value)
        big = [d for d in moved if phys[d] != 1]
        if big == sorted(big):   # only size-1 dimensions move: a reshape of the same bytes
            return emit.reshape(tv.value, [tv.shape[p] for p in perm])
        return emit.transpose(tv.value, moved)

    def logical(self, tv: TensorVal) -> ir.Value:
        return self.in_perm(tv, tuple(range(tv.rank)))

    def define(self, name: str, value: ir.Value, perm: Sequence[int] | None = None) -> TensorVal:
        """Bind ONNX value `name` to `value` (physical order `perm`) and check
        the shape against ONNX's inference."""
        phys = emit.shape_of(value)
        perm = tuple(perm) if perm is not None else tuple(range(len(phys)))
        shape = [0] * len(phys)
        for i, p in enumerate(perm):
            shape[p] = phys[i]
        tv = TensorVal(value, tuple(shape), perm)
        info = self.inferred.get(name)
        if info is not None and info.type.tensor_type.HasField("shape"):
            dims = info.type.tensor_type.shape.dim
            want = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
            if -1 not in want and want != tv.shape:
                raise self.error(f"internal: output '{name}' has shape {list(tv.shape)} but "
                                 f"ONNX infers {list(want)}")
        self.vals[name] = tv
        return tv

    # ---------------------------------------------------------- driver
    def _port(self, vi: onnx.ValueInfoProto, name: str, what: str) -> Port:
        tt = vi.type.tensor_type
        if tt.elem_type not in ELEM_TYPES:
            # located at the first node reading it: an integer input is most
            # often an index operand (Slice starts, Reshape shape) fed at run time
            user = next(((k, Node(k, n).name, n.op_type) for k, n in enumerate(self.graph.node)
                         if what == "input" and vi.name in n.input), None)
            raise OnnxImportError(
                f"not supported: {what} '{vi.name}' has element type "
                f"{onnx.TensorProto.DataType.Name(tt.elem_type)}; only FLOAT and FLOAT16 are "
                "supported", self.file, user,
                fix="convert the model to float32 or float16; integer operands (Slice "
                    "starts, Split sizes, Reshape shape, axes) must be initializers or "
                    "Constant nodes")
        dims = []
        for d in tt.shape.dim:
            if d.HasField("dim_value") and d.dim_value == 0:
                raise OnnxImportError(f"not supported: {what} '{vi.name}' is empty (a dimension "
                                      "of size 0)", self.file,
                                      fix="remove the empty tensor and what computes it")
            if not d.HasField("dim_value") or d.dim_value < 0:
                raise OnnxImportError(
                    f"{what} '{vi.name}' has a dynamic dimension "
                    f"'{d.dim_param or '?'}'; only static shapes are supported", self.file,
                    fix="fix the dimension, e.g. onnx.tools.update_model_dims."
                        "update_inputs_outputs_dims(model, {...}, {...})")
            dims.append(d.dim_value)
        return Port(name, vi.name, tuple(dims),
                    np.dtype(ELEM_TYPES[tt.elem_type][1]))

    def run(self) -> ImportedModel:
        from nem.frontends.onnx.converters import CONVERTERS

        for init in self.graph.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)
        from nem.frontends.onnx.ops import plan_batchnorm_folds

        self.bn_folds = plan_batchnorm_folds(self)
        table = interface_names(self.graph)
        self.names.update(table.taken)   # weights are named after these
        ins = [vi for vi in self.graph.input if vi.name not in self.consts]
        inputs = [self._port(vi, name, "input") for vi, (_, name) in zip(ins, table.inputs)]
        outputs = [self._port(vi, name, "output")
                   for vi, (_, name) in zip(self.graph.output, table.outputs)]
        self.context = ctx = ir.Context()
        with ctx, ir.Location.file(self.file, 0, 0):
            module = ir.Module.create()
            with ir.InsertionPoint(module.body):
                in_types = [emit.tensor_type(p.shape, ir.Type.parse(ELEM_TYPE_NAMES[p.dtype]))
                            for p in inputs]
                fn = func.FuncOp(self.func_name, (in_types, []))
                self.block = fn.add_entry_block()
            for p, arg in zip(inputs, self.block.arguments):
                arg.set_location(ir.Location.name(p.name))
                self.vals[p.onnx_name] = TensorVal(arg, p.shape, tuple(range(len(p.shape))))
            with ir.InsertionPoint(self.block):
                for index, proto in enumerate(self.graph.node):
                    node = Node(index, proto, {a.name: helper.get_attribute_value(a)
                                               for a in proto.attribute})
                    self.node = node
                    if proto.domain not in ("", "ai.onnx"):
                        raise self.error(f"not supported: operator domain '{proto.domain}'")
                    conv = CONVERTERS.get(proto.op_type)
                    if conv is None:
                        raise self.error(f"not supported: op type {proto.op_type}",
                                         fix="supported op types: " + ", ".join(sorted(
                                             CONVERTERS)))
                    self.check_operand_types(node)
                    with ir.Location.name(node.name):
                        conv(self, node)
                self.node = None
                results = []
                for p in outputs:
                    if p.onnx_name in self.consts and p.onnx_name not in self.vals:
                        self.tensor(p.onnx_name)
                    value = self.logical(self.tensor(p.onnx_name))
                    if value in results:     # one value, two outputs: each its own buffer
                        shape = emit.shape_of(value)   # (returned twice, bufferization crashes)
                        value = emit.broadcast(value, range(len(shape)), shape)
                    results.append(value)
                    if emit.elem_type(results[-1]) != ir.Type.parse(ELEM_TYPE_NAMES[p.dtype]):
                        raise OnnxImportError(f"output '{p.onnx_name}' element type mismatch",
                                              self.file)
                func.ReturnOp(results)
            arg_types = [a.type for a in self.block.arguments]
            fn.attributes["function_type"] = ir.TypeAttr.get(
                ir.FunctionType.get(arg_types, [r.type for r in results]))
            if not module.operation.verify():
                raise OnnxImportError("internal: the imported module does not verify",
                                      self.file)
        return ImportedModel(ctx, module, self.func_name, inputs, self.weights, outputs)


ELEM_TYPE_NAMES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}


def import_onnx(model: str | Path | onnx.ModelProto, func_name: str = "main",
                file: str | None = None, softmax_types: frozenset[str] = frozenset()
                ) -> ImportedModel:
    """Import an ONNX model (a path or a `ModelProto`) as linalg on tensors;
    a Softmax over one axis of an element type in `softmax_types` is one
    `linalg.softmax` (D-COMPILE-SOFTMAX), else its decomposition."""
    if isinstance(model, onnx.ModelProto):
        return Importer(model, file or "<model>", func_name, softmax_types).run()
    path = str(model)
    try:
        proto = onnx.load(path)
    except FileNotFoundError as e:
        raise OnnxImportError("no such file", path) from e
    except Exception as e:  # protobuf decode errors have several types
        raise OnnxImportError(f"not an ONNX model: {str(e).strip() or type(e).__name__}",
                              path, fix="give a .onnx file written by onnx.save") from e
    return Importer(proto, file or path, func_name, softmax_types).run()
