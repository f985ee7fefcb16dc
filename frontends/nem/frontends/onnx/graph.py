"""ONNX graph -> one `func.func` of linalg on tensors (upstream MLIR bindings):
the importer's state (`Importer`: values, constants, weights, layouts) and
the program's interface.

The model is prepared first (`prepare.py`, D-COMPILE-SIMPLIFY); `driver.py`
then converts each node in topological order with the converter
`converters.CONVERTERS[op_type]`, which builds linalg-on-tensors IR with
`emit.py`, collecting every error (D-COMPILE-DIAG).

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
element type the program cannot hold is an `OnnxImportError` naming the
model file, the node's index in the user's model, its name and op type
(`diagnostics.py`).
"""

from __future__ import annotations

import re
from collections.abc import ItemsView, Iterator, Sequence, ValuesView
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from mlir import ir

from nem.dialect.diagnostics import LAYOUT
from nem.dialect.elements import ELEM_DTYPES
from nem.dialect.reserved_words import RESERVED
from nem.frontends.onnx import emit
from nem.frontends.onnx.bind import bind_fix
from nem.frontends.onnx.diagnostics import NodeRef, OnnxImportError

NHWC = (0, 2, 3, 1)
"""The physical order of an NCHW activation: N, H, W, C."""

ELEM_TYPES: dict[int, tuple[str, np.dtype]] = {
    t: (n, ELEM_DTYPES[n])
    for t, n in (
        (onnx.TensorProto.FLOAT, "f32"),
        (onnx.TensorProto.FLOAT16, "f16"),
        (onnx.TensorProto.INT32, "i32"),
    )
}
"""ONNX element types the importer takes: spec name and dtype (nem.dialect.elements);
DOUBLE and INT64 are demoted to f32 and i32 by default (D-COMPILE-F64, D-COMPILE-I64)."""


def program_elem_types(
    demote_f64: bool = True, demote_i64: bool = True
) -> dict[int, tuple[str, np.dtype]]:
    """ONNX element type -> the program's (spec name, dtype): `ELEM_TYPES`,
    with DOUBLE computed as FLOAT (`demote_f64`, D-COMPILE-F64), INT64 as
    INT32 (`demote_i64`, D-COMPILE-I64) and BOOL as an INT32 0 or 1
    (D-COMPILE-BOOL)."""
    types = dict(ELEM_TYPES)
    types[onnx.TensorProto.BOOL] = ELEM_TYPES[onnx.TensorProto.INT32]
    if demote_f64:
        types[onnx.TensorProto.DOUBLE] = ELEM_TYPES[onnx.TensorProto.FLOAT]
    if demote_i64:
        types[onnx.TensorProto.INT64] = ELEM_TYPES[onnx.TensorProto.INT32]
    return types


TRANSPOSE_BLOCK = 256
"""Side of the square blocks in which `c_order` copies a transposed matrix."""


def c_order(array: np.ndarray) -> np.ndarray:
    """`array` C-contiguous.  A matrix in another order (a Gemm weight with
    transB, read transposed: VGG-19's fc6 is 4096x25088 f32) is copied block
    by block: numpy's one-pass copy walks the source a column at a time and
    misses the cache on every element (1.2 s CPU for fc6; 0.37 s in blocks
    of 256x256, same bytes)."""
    if array.ndim != 2 or array.flags.c_contiguous:
        return np.ascontiguousarray(array)
    out = np.empty(array.shape, array.dtype)
    b = TRANSPOSE_BLOCK
    for i in range(0, array.shape[0], b):
        for j in range(0, array.shape[1], b):
            out[i : i + b, j : j + b] = array[i : i + b, j : j + b]
    return out


@dataclass(frozen=True)
class Port:
    """A model input or output: its NEM name, ONNX name, shape and dtype
    (the program's), and the model's element type where the program holds
    another (int64 as int32, D-COMPILE-I64; f64 as f32; bool as int32)."""

    name: str
    onnx_name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    onnx_dtype: np.dtype | None = None


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
    notes: list[str] = field(default_factory=list)
    """What preparing the model did (D-COMPILE-SIMPLIFY), one line each."""
    warnings: list[str] = field(default_factory=list)
    """What the model's author should know without -v: weights of zeros that
    make nodes ignore their inputs (D-COMPILE-ZERO-WEIGHTS)."""
    fused: dict[str, list[NodeRef]] = field(default_factory=dict)
    """Per converted node (name), the user's nodes whose work is in it
    though preparing the model removed them (`fusions.fused_into`)."""

    @property
    def arg_names(self) -> list[str]:
        return [p.name for p in self.inputs] + list(self.weights) + [p.name for p in self.outputs]


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


def nem_name(name: str, taken: set[str]) -> str:
    """A NEM identifier for an ONNX name (`input.1` -> `input1`), unique in
    `taken`.  A trailing `_<digits>` is avoided (xDSL reads it as a
    uniquing suffix of the name hint): every `_` in a tail of digits and
    underscores goes (`input_1:0` -> `input10`; one `_0` removed, it was
    `input_10`, which the program named `input`: an outside user, session
    55, ran inputs written to each other's buffers)."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_") or "t"
    if base[0].isdigit():
        base = "t" + base
    base = re.sub(r"_+(?=[0-9_]*$)", "", base)
    if base in RESERVED:
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
    inputs = tuple((v.name, nem_name(v.name, taken)) for v in graph.input if v.name not in inits)
    outputs = tuple((v.name, nem_name(v.name, taken)) for v in graph.output)
    return InterfaceNames(inputs, outputs, frozenset(taken))


def _perm_inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


class Attrs(dict[str, Any]):
    """A node's attributes, remembering which ones its converter looked at:
    an attribute it never read, set to another value than its default, is
    an error (`driver.unread_attributes`), not a silent miscompile
    (D-COMPILE-ATTRS)."""

    def __init__(self, values: dict[str, Any] | None = None) -> None:
        super().__init__(values or {})
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self.read.update(self.keys())
        return super().__iter__()

    def items(self) -> ItemsView[str, Any]:  # type: ignore[override]
        self.read.update(self.keys())
        return super().items()

    def values(self) -> ValuesView[Any]:  # type: ignore[override]
        self.read.update(self.keys())
        return super().values()


@dataclass
class Node:
    """A node being converted: its position `index` in the graph the
    importer converts, its index in the user's model (`source_index`, None
    for a node the simplifier made: D-COMPILE-SIMPLIFY), its inputs ('' for
    an absent optional one), outputs and attributes (Python values)."""

    index: int
    proto: onnx.NodeProto
    attrs: Attrs = field(default_factory=Attrs)
    source_index: int | None = None
    source_op_type: str | None = None
    """The op type of the user's node (a Conv the simplifier rebuilt, or a
    Flatten it made a Reshape, is named as the user wrote it)."""
    read_inputs: set[int] = field(default_factory=set)
    """The positions of the inputs its converter looked at (`input`,
    `inputs`): one never looked at is refused (D-COMPILE-ATTRS)."""

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    @property
    def name(self) -> str:
        return self.proto.name or f"{self.op_type}_{self.index}"

    @property
    def inputs(self) -> list[str]:
        self.read_inputs.update(range(len(self.proto.input)))
        return list(self.proto.input)

    @property
    def outputs(self) -> list[str]:
        return list(self.proto.output)

    def read_elsewhere(self) -> None:
        """Every input counts as looked at: another node's converter read
        them (a BatchNormalization folded into its Conv)."""
        self.read_inputs.update(range(len(self.proto.input)))

    def input(self, k: int) -> str:
        self.read_inputs.add(k)
        return self.proto.input[k] if k < len(self.proto.input) else ""

    def ref(self) -> NodeRef:
        return (self.source_index, self.name, self.source_op_type or self.op_type)

    def location(self, file: str) -> ir.Location:
        """Where the ops built for this node are (D-COMPILE-LOC):
        `loc("<name>"("<op type>"("<file>":<line>:1)))`, the user's node
        (name, op type, line = its 1-based position in the model), line 0
        for a node the simplifier made without a user's node to name."""
        index, name, op_type = self.ref()
        line = index + 1 if index is not None else 0
        return ir.Location.name(
            name, childLoc=ir.Location.name(op_type, childLoc=ir.Location.file(file, line, 1))
        )


class Importer:
    """Converts one ONNX model; see the module docstring."""

    def __init__(
        self,
        model: onnx.ModelProto,
        file: str,
        func_name: str = "main",
        softmax_types: frozenset[str] = frozenset(),
        node_index: dict[str, tuple[int, str]] | None = None,
        demote_f64: bool = False,
        demote_i64: bool = False,
        arrays: dict[str, np.ndarray] | None = None,
        source_opset: int | None = None,
    ):
        self.file = file
        self.arrays = arrays or {}
        """Initializer values kept out of `model` (`prepare.Prepared.arrays`):
        read from here, not from the model's external-data stubs."""
        self.func_name = func_name
        self.softmax_types = softmax_types
        """Element types imported as `linalg.softmax` (the target runs NEM
        `softmax` on them, D-COMPILE-SOFTMAX); others are decomposed here."""
        self.node_index = node_index
        """Node name -> index in the user's model (`prepare.Prepared`); None:
        the graph converted is the user's, positions are indices."""
        self.elem_types = program_elem_types(demote_f64, demote_i64)
        from nem.frontends.onnx.prepare import ShapeInferenceError, infer_shapes_strict, with_shapes

        try:
            inferred = infer_shapes_strict(model)
        except ShapeInferenceError as e:
            raise OnnxImportError(
                f"ONNX shape inference failed: {e}",
                file,
                fix="check the model with onnx.checker.check_model",
            ) from e
        with_shapes(model, inferred)  # the prepared model: the importer's own copy
        self.model = model
        self.graph = self.model.graph
        self.opset = next(
            (o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx")), 1
        )
        self.source_opset = source_opset if source_opset is not None else self.opset
        """The user's model's opset before the version converter upgraded it
        (`prepare.Prepared.source_opset`)."""
        self.consts: dict[str, np.ndarray] = {}
        self.vals: dict[str, TensorVal] = {}
        self.permuted: dict[tuple[ir.Value, tuple[int, ...], tuple[int, ...]], ir.Value] = {}
        """Each value in another order, as `in_perm` made it: keyed by the
        MLIR value, the order it holds and the order wanted, for a Transpose
        shares its input's MLIR value in another order (`TensorVal.perm`), and
        x and Transpose(x) each read by a Conv need two copies, not one."""
        self.graph_inputs: dict[ir.Value, str] = {}
        """Each graph input's value (a function argument) -> its ONNX name:
        its change of layout is located at the input (`LAYOUT`)."""
        self.pads: dict[tuple[ir.Value, tuple[int, ...], tuple[int, ...], float], ir.Value] = {}
        """Each value padded, as `pad` made it."""
        self.seqs: dict[str, list[str]] = {}
        """Sequences of known length: value name -> the names of its tensors
        (`sequences.py`, D-COMPILE-SEQ)."""
        self.node: Node | None = None
        self.names: set[str] = set()
        self.weights: dict[str, np.ndarray] = {}
        self.weight_names: dict[str, list[str]] = {}
        self.inferred: dict[str, onnx.ValueInfoProto] = {
            v.name: v for v in [*self.graph.value_info, *self.graph.output]
        }
        self.bn_folds: dict[int, int] = {}
        """Conv node position -> the BatchNormalization folded into it."""
        self.context: ir.Context
        self.block: ir.Block
        """The entry function's block (set by `driver.convert`)."""
        self.unread_inputs: list[str] = []
        """Integer inputs whose values only fix shapes the model declares
        (`shape_only_inputs`): not program buffers (D-COMPILE-IFACE)."""

    def source(self, proto: onnx.NodeProto, pos: int) -> tuple[int | None, str | None]:
        """(index, op type) of the user's node `proto` stands for."""
        if self.node_index is None:
            return pos, proto.op_type
        return self.node_index.get(proto.name, (None, None))

    # ---------------------------------------------------------- diagnostics
    def error(self, message: str, fix: str | None = None) -> OnnxImportError:
        """An error at the node being converted (raise the result)."""
        where = self.node.ref() if self.node is not None else None
        return OnnxImportError(message, self.file, where, fix)

    def error_at_reader(self, value: str, message: str, fix: str | None = None) -> OnnxImportError:
        """`error`, or outside a node's conversion (an initializer read
        before any) at the first node reading `value`, as the user's model
        names it (an outside user's f64 refusal named no node, session 55)."""
        if self.node is not None:
            return self.error(message, fix)
        reader = next((n for n in self.graph.node if value in n.input), None)
        where = None
        if reader is not None:
            index, op_type = (self.node_index or {}).get(reader.name, (None, reader.op_type))
            where = (index, reader.name, op_type)
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
            return  # no schema at this opset: the converter judges the node
        given = max((k + 1 for k, v in enumerate(node.inputs) if v), default=0)
        if given > schema.max_input:
            raise self.error(
                f"{node.op_type} takes at most {schema.max_input} input(s) at the model's opset "
                f"{self.opset} (its schema of opset {schema.since_version}); the node has {given}",
                fix=f"drop the extra inputs (onnx.defs.get_schema('{node.op_type}', "
                f"{self.opset}) lists what it takes, attributes included), or set the "
                f"model's opset to one whose {node.op_type} takes them",
            )
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
                    "type errors",
                )

    def elem_name(self, name: str) -> str | None:
        """The element type of ONNX value `name` as the importer holds it
        (`f32`, `f16`, or a constant's numpy dtype: `int64`), None when no
        earlier node produced it."""
        if name in self.vals:
            return str(self.vals[name].elem)
        if name in self.consts:
            dtype = self.data_dtype(self.consts[name].dtype)
            return ELEM_TYPE_NAMES.get(dtype, dtype.name)
        return None

    def data_dtype(self, dtype: np.dtype) -> np.dtype:
        """The dtype a constant of `dtype` has as program data (a weight):
        int64 is int32 when the model's int64 is demoted (D-COMPILE-I64); a
        bool is an i32 0 or 1 (D-COMPILE-BOOL)."""
        if dtype == np.int64 and onnx.TensorProto.INT64 in self.elem_types:
            return np.dtype(np.int32)
        if dtype == np.bool_:
            return np.dtype(np.int32)
        return np.dtype(dtype)

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
            raise self.error(
                f"not supported: {node.op_type} {what} '{name}' computed at run time",
                fix=self.run_time_fix(name, what),
            )
        return [int(v) for v in c.reshape(-1)]

    def const_scalar(self, node: Node, k: int, what: str) -> float | None:
        """Input `k` of `node` read at compile time as one number (a Clip
        bound, Dropout's ratio), None when absent; one computed at run time,
        or a constant of another size than one, is an error at the node."""
        name = node.input(k)
        if not name:
            return None
        c = self.const(name)
        if c is None:
            raise self.error(
                f"not supported: {node.op_type} {what} '{name}' computed at run time",
                fix=self.run_time_fix(name, what),
            )
        if c.size != 1:
            raise self.error(f"{node.op_type} {what} '{name}' has {c.size} elements, not one")
        if c.dtype.kind in "iu":  # as data would be: in int32's range (D-COMPILE-I64)
            return int(self.check_data(c.reshape(()), name))
        return float(c.reshape(()))

    def run_time_fix(self, name: str, what: str) -> str:
        """How to make the compile-time operand `name` known: a graph input
        is bound (D-COMPILE-BIND), any other value computed from constants."""
        if any(i.name == name for i in self.graph.input):
            return bind_fix(name)
        return (
            f"make the {what} an initializer or Constant, or compute it from static "
            "shapes only (the importer folds those, D-COMPILE-SIMPLIFY)"
        )

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

    def weight(self, array: np.ndarray, name: str, perm: Sequence[int] | None = None) -> TensorVal:
        """A weight argument holding `array` (already in its physical order;
        `perm` as in TensorVal, default identity), named after `name`; the
        same argument for the same values under that name and `perm`.  A
        converter may derive an array from the initializer `name` (reshaped,
        cast), so a name alone does not say the values: two
        InstanceNormalizations sharing a scale, on inputs of ranks 3 and 4,
        read the first one's [C, 1] scale for the second's [C, 1, 1], a wrong
        result (an outside user, session 63)."""
        key = repr((name, tuple(perm) if perm is not None else None))
        array = self.check_data(c_order(array), name)
        for cached in self.weight_names.get(key, []):
            held = self.weights.get(cached)
            if held is not None and held.dtype == array.dtype and np.array_equal(held, array):
                return self.vals[cached]
        arg_name = nem_name(name, self.names)
        elem = ir.Type.parse(ELEM_TYPE_NAMES[array.dtype])
        arg = self.block.add_argument(
            emit.tensor_type(array.shape, elem), ir.Location.name(arg_name)
        )
        self.weights[arg_name] = array
        perm = tuple(perm) if perm is not None else tuple(range(array.ndim))
        shape = [0] * array.ndim
        for i, p in enumerate(perm):
            shape[p] = array.shape[i]
        tv = TensorVal(arg, tuple(shape), perm)
        self.weight_names.setdefault(key, []).append(arg_name)
        self.vals[arg_name] = tv
        return tv

    def check_data(self, array: np.ndarray, name: str) -> np.ndarray:
        """`array` as a weight's contents: f32, f16 or i32 (int64 demoted,
        its values checked to fit, D-COMPILE-I64; bool as 0 and 1,
        D-COMPILE-BOOL)."""
        dtype = self.data_dtype(array.dtype)
        if dtype != array.dtype and dtype == np.int32:
            info = np.iinfo(np.int32)
            if array.dtype != np.bool_ and (
                array.size and (array.min() < info.min or array.max() > info.max)
            ):
                raise self.error(
                    f"constant '{name}' has int64 values outside int32's range: "
                    "NEM has no 64-bit integers (D-COMPILE-I64)",
                    fix="the program holds int64 data as int32: keep the constant within "
                    "-2147483648..2147483647 (a sentinel such as int64's maximum: int32's)",
                )
            array = array.astype(np.int32)
        if array.dtype not in ELEM_TYPE_NAMES:
            raise self.error(
                f"not supported: constant '{name}' of element type {array.dtype} "
                "used as data: NEM computes with f32, f16 and i32 tensors"
            )
        return array

    def in_perm(self, tv: TensorVal, perm: Sequence[int]) -> ir.Value:
        """`tv` as an MLIR tensor whose dimension i is logical dimension
        `perm[i]`: made once per value and order (a graph input's NHWC copy
        serves every convolution and pooling that reads it)."""
        perm = tuple(perm)
        if tv.perm == perm:
            return tv.value
        key = (tv.value, tuple(tv.perm), perm)
        made = self.permuted.get(key)
        if made is None:
            name = self.graph_inputs.get(tv.value)
            with self.layout_of(name) if name is not None else nullcontext():
                made = self.permuted[key] = self._permute(tv, perm)
        return made

    def layout_of(self, name: str) -> ir.Location:
        """The location of a graph input's or output's change of layout:
        `loc("<name>"("layout"("<model file>":0:1)))` (`LAYOUT`)."""
        return ir.Location.name(
            name, childLoc=ir.Location.name(LAYOUT, childLoc=ir.Location.file(self.file, 0, 1))
        )

    def pad(self, value: ir.Value, low: Sequence[int], high: Sequence[int], x: float) -> ir.Value:
        """`emit.pad`, made once per value, borders and padding value: two
        convolutions of one input with the same padding (two 3x3 branches
        of one tensor) read one padded tensor."""
        key = (value, tuple(low), tuple(high), x)
        made = self.pads.get(key)
        if made is None:
            made = self.pads[key] = emit.pad(value, low, high, x)
        return made

    def _permute(self, tv: TensorVal, perm: tuple[int, ...]) -> ir.Value:
        # physical dim j of the result = logical perm[j] = current physical inv[perm[j]]
        inv = _perm_inverse(tv.perm)
        moved = [inv[p] for p in perm]
        phys = emit.shape_of(tv.value)
        big = [d for d in moved if phys[d] != 1]
        if big == sorted(big):  # only size-1 dimensions move: a reshape of the same bytes
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
                raise self.error(
                    f"internal: output '{name}' has shape {list(tv.shape)} but "
                    f"ONNX infers {list(want)}"
                )
        self.vals[name] = tv
        return tv

    def set_const(self, name: str, array: np.ndarray) -> None:
        """Bind ONNX value `name` to a compile-time constant (f64 demoted to
        f32 when the model's f64 is, D-COMPILE-F64: a finite value beyond
        f32's range is an error, as in an input, not an infinity; an outside
        user's `(1 - mask) * finfo(float64).min` became -inf, then 0 * -inf
        a NaN in every softmax output, session 55)."""
        if array.dtype == np.float64 and onnx.TensorProto.DOUBLE in self.elem_types:
            with np.errstate(over="ignore"):
                demoted = array.astype(np.float32)
            beyond = np.isinf(demoted) & np.isfinite(array)
            if beyond.any():
                value = array[beyond].reshape(-1)[0]
                raise self.error_at_reader(
                    name,
                    f"constant '{name}' (float64) holds {value:.6g}, beyond float32's range: "
                    "the program computes float64 in float32 (D-COMPILE-F64)",
                    fix="use a value within float32's range (a mask's fill value: "
                    "numpy.finfo(numpy.float32).min, or -1e9)",
                )
            array = demoted
        self.consts[name] = array

    def static_shape(self, name: str) -> tuple[int, ...] | None:
        """The shape ONNX's inference (or the model's declaration) gives
        value `name`, when every dimension is known."""
        info = self.inferred.get(name)
        if info is None or not info.type.tensor_type.HasField("shape"):
            return None
        dims = info.type.tensor_type.shape.dim
        if not all(d.HasField("dim_value") for d in dims):
            return None
        return tuple(d.dim_value for d in dims)


ELEM_TYPE_NAMES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    np.dtype(np.int32): "i32",
}
