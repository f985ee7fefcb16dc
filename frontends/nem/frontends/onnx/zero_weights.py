"""Weights of zeros that make nodes ignore their inputs (D-COMPILE-ZERO-WEIGHTS).

A model whose trained parameters never reached the file (exported before
the checkpoint was loaded, initializers zeroed by a tool, a weight read
from the wrong place) is a valid model: it compiles, runs and computes
zeros, or its biases, whatever its input.  Nothing fails, so the importer
says so: a node that multiplies run-time data by a constant of zeros
(`MULTIPLIED_BY`) computes an output that does not depend on that data,
which no trained model does on purpose.  Zero biases, zero paddings and
`Max(x, 0)` are ordinary and not reported: adding or comparing with zeros
keeps the data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import onnx

from nem.frontends.onnx.diagnostics import NodeRef, node_name, shown
from nem.frontends.zero_weights import warning as line

MULTIPLIED_BY: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "Conv": ((1,), (0,)),
    "ConvTranspose": ((1,), (0,)),
    "MatMul": ((0, 1), (0, 1)),
    "Gemm": ((0, 1), (0, 1)),
    "Mul": ((0, 1), (0, 1)),
    "BatchNormalization": ((1,), (0,)),
    "InstanceNormalization": ((1,), (0,)),
    "LayerNormalization": ((1,), (0,)),
}
"""Op type -> (the inputs that multiply the data, the data inputs): a node
whose multiplier is a constant of zeros while one of its data inputs other
than that multiplier is computed at run time computes without that data."""


def zero_weights(
    graph: onnx.GraphProto,
    consts: Mapping[str, np.ndarray],
    source: Callable[[onnx.NodeProto, int], tuple[int | None, str | None]],
) -> list[tuple[str, NodeRef]]:
    """Each (constant, user's node) where the node multiplies data computed
    at run time by that constant and the constant is all zeros.  `consts`:
    the compile-time values (initializers, Constant outputs, folded
    values); `source(node, pos)`: the user's node index and op type."""
    found: list[tuple[str, NodeRef]] = []
    for pos, node in enumerate(graph.node):
        spec = MULTIPLIED_BY.get(node.op_type)
        if spec is None:
            continue
        factors, data = spec
        for k in factors:
            name = node.input[k] if k < len(node.input) else ""
            value = consts.get(name) if name else None
            if value is None or value.size == 0 or np.any(value):
                continue
            if any(
                j != k and j < len(node.input) and node.input[j] and node.input[j] not in consts
                for j in data
            ):
                index, op_type = source(node, pos)
                found.append((name, (index, node.name, op_type or node.op_type)))
                break  # one line per node
    return found


def warning(file: str, found: list[tuple[str, NodeRef]]) -> str | None:
    """One line naming the first `SHOWN` nodes and their zero weights, or
    None when there are none."""
    return line(file, [f"{node_name(ref)} by '{shown(w)}'" for w, ref in found])
