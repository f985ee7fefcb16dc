"""What the ONNX nodes of a model must move and compute at the least: the
tensors a group of nodes reads from outside it and writes for outside it,
each once, and the multiply-accumulates of its Conv, ConvTranspose, MatMul
and Gemm nodes (D-RT-ROOFLINE, "Ideal bound", session 26).

The roofline report's bound counts the program as compiled: a transfer
made twice counts twice, so a compile that moves more bytes raises its own
bound and looks closer to it (an outside review, session 25: a MobileNetV2
block's 1x1 conv at 1.77x its bound moved its input four times; moving
each tensor once it is 3.13x).  `NodeTraffic` gives the work of the
model's nodes themselves, which the report prices with the same
throughputs (`nem.runtime.roofline.ideal_bound`) beside the compiled bound.

The nodes are the user's, named as the compiled program's locations name
them (`prepare.user_graph`): a group is a node and the nodes fused into it
(D-BC-NODES), so a Conv with its BatchNormalization and Relu moves its
input, its weights, the normalization's parameters and the Relu's output,
not the values passed between them.  Element sizes are the program's: f64
and int64 are computed in f32 and i32 (D-COMPILE-F64, D-COMPILE-I64).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import onnx

from nem.frontends.onnx.graph import interface_names, program_elem_types
from nem.frontends.onnx.prepare import user_graph, value_types

PROGRAM_ELEM = program_elem_types()
"""ONNX element type -> the program's element type and dtype (the
importer's defaults: f64 and int64 demoted)."""


@dataclass(frozen=True)
class Traffic:
    """The least work of a group of nodes: `moved` bytes (its boundary's
    tensors once), `by_type` its multiply-accumulates per input element
    type (None where ONNX gives none), each node's at its own (an outside
    review, session 63: the program's group of an f32 and an f16 MatMul was
    priced all at the f32 rate, an ideal above the cycles it ran in)."""

    moved: int
    by_type: tuple[tuple[str | None, int], ...]

    @property
    def macs(self) -> int:
        """All its multiply-accumulates."""
        return sum(k for _, k in self.by_type)


@dataclass(frozen=True)
class Port:
    """A model input or output as the program holds it: its ONNX name, the
    buffer the importer names it (D-COMPILE-IFACE), its element type and
    bytes in the program's types (None where it has no static shape or a
    type the program does not hold)."""

    onnx_name: str
    buffer: str
    elem: str | None
    nbytes: int | None


class NodeTraffic:
    """The nodes of one model, asked per group (`of`): built once in time
    linear in the graph; a query costs the group's nodes and their uses."""

    def __init__(self, model: onnx.ModelProto) -> None:
        m, self._index, _ = user_graph(model)
        self._types = value_types(m)
        self._nodes = {n.name: n for n in m.graph.node}
        self._users: dict[str, set[str]] = {}
        for n in m.graph.node:
            for v in n.input:
                self._users.setdefault(v, set()).add(n.name)
        self._outputs = {o.name for o in m.graph.output}
        names = interface_names(m.graph)
        self.ports = [
            Port(name, buffer, self._elem(name), self._bytes(name))
            for name, buffer in (*names.inputs, *names.outputs)
        ]
        """The model's inputs and outputs (`Port`), in the model's order."""
        self.nodes = [(n.name, self.op_type(n.name) or n.op_type) for n in m.graph.node]
        """The model's nodes as (name, op type as the user wrote it), in its order."""

    def op_type(self, name: str) -> str | None:
        """The op type of the model's node `name` as the user wrote it (a
        function op's body nodes, `celu/Div_1`, are the user's Celu, as the
        program's locations name them: `--onnx` refused a model with a Celu
        as another model, a review, session 55), None if it has none."""
        entry = self._index.get(name)
        return entry[1] if entry is not None else None

    def of(self, names: Iterable[str]) -> Traffic | None:
        """The least work of the nodes `names` run as one group; None when one
        is not a node of the model or a tensor it moves has no static shape
        or a type the program does not hold."""
        group = list(dict.fromkeys(names))
        if not group or any(g not in self._nodes for g in group):
            return None
        nodes = [self._nodes[g] for g in group]
        made = {o for n in nodes for o in n.output if o}
        read = {i for n in nodes for i in n.input if i and i not in made}
        written = {o for o in made if o in self._outputs or self._users.get(o, set()) - set(group)}
        moved = 0
        for v in read | written:
            size = self._bytes(v)
            if size is None:
                return None
            moved += size
        by_type: dict[str | None, int] = {}
        for n in nodes:
            k = self._macs(n)
            if k is None:
                return None
            if k:
                elem = self._elem(n.input[0])
                by_type[elem] = by_type.get(elem, 0) + k
        return Traffic(moved, tuple(by_type.items()))

    def _shape(self, v: str) -> list[int] | None:
        t = self._types.get(v)
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            return None
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.tensor_type.shape.dim]
        return None if any(d < 0 for d in dims) else dims

    def _program_type(self, v: str) -> tuple[str, np.dtype] | None:
        """The program's element type and dtype of value `v`, None if none."""
        t = self._types.get(v)
        return PROGRAM_ELEM.get(t.tensor_type.elem_type) if t is not None else None

    def _elem(self, v: str) -> str | None:
        known = self._program_type(v)
        return known[0] if known else None

    def _bytes(self, v: str) -> int | None:
        shape, known = self._shape(v), self._program_type(v)
        if shape is None or known is None:
            return None
        return math.prod(shape) * known[1].itemsize

    def _macs(self, n: onnx.NodeProto) -> int | None:
        """The node's multiply-accumulates; 0 for an op without; None when a
        shape they need is unknown."""
        if n.op_type not in ("Conv", "ConvTranspose", "MatMul", "Gemm"):
            return 0
        a, b = self._shape(n.input[0]), self._shape(n.input[1])
        y = self._shape(n.output[0])
        if a is None or b is None or y is None:
            return None
        if n.op_type == "Conv":  # each output element: C/group x the window
            return math.prod(y) * math.prod(b[1:])
        if n.op_type == "ConvTranspose":  # each input element: M/group x the window
            return math.prod(a) * math.prod(b[1:])
        trans_a = any(at.name == "transA" and at.i for at in n.attribute)
        k = a[0] if n.op_type == "Gemm" and trans_a else a[-1]
        return math.prod(y) * k
