"""Graph patterns the importer converts as one ONNX op (D-COMPILE-GELU-ERF),
and where the work of the user's nodes that are gone from the converted
graph went (`fused_into`).

A GELU written out by hand (what exporters emit for `nn.GELU()` before
opset 20, and what users write) is five nodes:

    y = Mul(Mul(x, Add(Erf(Div(x, sqrt(2))), 1)), 0.5)

(`Mul(x, 1/sqrt(2))` for the Div; `Mul(Mul(x, 0.5), Add(...))` for the
order of the two products; every binary op's operands in either order).
Converted node by node, each is its own `linalg.generic`, and the `erf` one
cannot be raised to a NEM opcode; as one ONNX `Gelu` (approximate="none")
it is one body the lowering raises to `gelu` (D-LOW-GELU-ERF).  The fused
node takes the name of the chain's `Erf` node (its diagnostics name it), and
each intermediate value must have no other user and be no graph output.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import onnx
from onnx import numpy_helper

SQRT2 = math.sqrt(2.0)
TOLERANCE = 1e-6
"""How close (relatively) a constant must be to sqrt(2), 1/sqrt(2), 1 or 0.5,
rounded to the constant's own type (an f16 model's sqrt(2) is 1.4140625,
as onnxruntime's GeluFusion compares f16 constants: an outside user's f16
GELU ran its erf as an escape-hatch kernel, session 66)."""


class Scalar(NamedTuple):
    """A single-element float constant: its value, whether it is f16."""

    value: float
    half: bool


def _scalars(graph: onnx.GraphProto) -> dict[str, Scalar]:
    """Single-element float constants by tensor name (initializers and
    Constant nodes)."""
    found: dict[str, Scalar] = {}
    tensors = [(t.name, t) for t in graph.initializer]
    tensors += [
        (n.output[0], a.t)
        for n in graph.node
        if n.op_type == "Constant"
        for a in n.attribute
        if a.name == "value"
    ]
    for name, t in tensors:
        if (
            t.data_type
            in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE)
            and math.prod(t.dims) == 1
        ):
            value = float(np.asarray(numpy_helper.to_array(t)).reshape(()))
            found[name] = Scalar(value, t.data_type == onnx.TensorProto.FLOAT16)
    return found


def _near(found: Scalar | None, want: float) -> bool:
    """Whether the constant `found` is `want` rounded to its type (TOLERANCE)."""
    if found is None:
        return False
    want = float(np.float16(want)) if found.half else want
    return abs(found.value - want) <= TOLERANCE * abs(want)


def fuse_erf_gelu(graph: onnx.GraphProto) -> int:
    """Replace every hand-written erf GELU of `graph` (in place) by one
    `Gelu` node; returns how many."""
    scalars = _scalars(graph)
    producer = {out: n for n in graph.node for out in n.output}
    users: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for i in n.input:
            users.setdefault(i, []).append(n)
    outputs = {o.name for o in graph.output}

    def sole_user(value: str) -> onnx.NodeProto | None:
        u = users.get(value, [])
        return u[0] if len(u) == 1 and value not in outputs else None

    def other(node: onnx.NodeProto, value: str) -> str | None:
        """The operand of binary `node` that is not `value`."""
        ins: list[str] = list(node.input)
        if len(ins) != 2 or value not in ins:
            return None
        return ins[1] if ins[0] == value else ins[0]

    def scaled_input(node: onnx.NodeProto | None) -> str | None:
        """x of `Div(x, sqrt 2)` or `Mul(x, 1/sqrt 2)`."""
        if node is None:
            return None
        ins: list[str] = list(node.input)
        if node.op_type == "Div" and len(ins) == 2 and _near(scalars.get(ins[1]), SQRT2):
            return ins[0]
        if node.op_type == "Mul" and len(ins) == 2:
            for a, b in (ins, ins[::-1]):
                if _near(scalars.get(b), 1 / SQRT2):
                    return a
        return None

    fused = 0
    erfs: list[onnx.NodeProto] = [n for n in graph.node if n.op_type == "Erf"]
    for erf in erfs:
        scale = producer.get(erf.input[0])
        x = scaled_input(scale)
        add = sole_user(erf.output[0])
        if x is None or scale is None or add is None or add.op_type != "Add":
            continue
        if sole_user(scale.output[0]) is not erf or not _near(
            scalars.get(other(add, erf.output[0]) or ""), 1.0
        ):
            continue
        prod = sole_user(add.output[0])
        if prod is None or prod.op_type != "Mul":
            continue
        factor = other(prod, add.output[0])
        chain = [scale, erf, add, prod]
        last: onnx.NodeProto = prod
        if factor == x:  # (x * (1 + erf)) * 0.5
            times_half = sole_user(prod.output[0])
            if (
                times_half is None
                or times_half.op_type != "Mul"
                or not _near(scalars.get(other(times_half, prod.output[0]) or ""), 0.5)
            ):
                continue
            chain.append(times_half)
            last = times_half
        else:  # (x * 0.5) * (1 + erf)
            half = producer.get(factor or "")
            if (
                half is None
                or half.op_type != "Mul"
                or x not in half.input
                or sole_user(half.output[0]) is not prod
                or not _near(scalars.get(other(half, x) or ""), 0.5)
            ):
                continue
            chain.append(half)
        gelu = onnx.helper.make_node(
            "Gelu", [x], [last.output[0]], name=erf.name, approximate="none"
        )
        at = max(list(graph.node).index(n) for n in chain)
        graph.node.insert(at + 1, gelu)
        for n in chain:
            graph.node.remove(n)
        fused += 1
    return fused


def fused_into(
    user: list[tuple[str, list[str], list[str]]], graph: onnx.GraphProto
) -> dict[str, list[str]]:
    """Per node of `graph` (the model the importer converts), the user's
    nodes (`Prepared.flow`: name, inputs, outputs, in order) that are gone
    from it because their work is in it: a BatchNormalization or Pad the
    simplifier folded into a Conv, the parts of a hand-written GELU
    (`fuse_erf_gelu`, which names the `Gelu` after the `Erf`).  A node that
    does not compute its outputs in `graph` any more has its work in the
    node of `graph` that computes one of them, else where the changed nodes
    reading them have theirs; a node whose outputs nothing computes any more
    and no changed node reads (constants folded, an Identity removed) does
    no work in the program.  One pass over the user's nodes, last first,
    so each is decided once (D-RT-ROOFLINE: the report says where each
    node's work went)."""
    made_by = {o: n.name for n in graph.node for o in n.output}
    readers: dict[str, list[int]] = {}
    for k, (_name, ins, _outs) in enumerate(user):
        for i in ins:
            readers.setdefault(i, []).append(k)
    into: dict[int, str] = {}  # a node not kept as it was: the node its work is in
    for k in reversed(range(len(user))):
        name, _ins, outs = user[k]
        maker = next((made_by[o] for o in outs if o in made_by), None)
        if maker == name:
            continue
        found = maker or next(
            (into[r] for o in outs for r in readers.get(o, ()) if r in into), None
        )
        if found is not None:
            into[k] = found
    out: dict[str, list[str]] = {}
    for k in sorted(into):
        if into[k] != user[k][0]:
            out.setdefault(into[k], []).append(user[k][0])
    return out
