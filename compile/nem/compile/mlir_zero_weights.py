"""Weights of zeros in MLIR input (D-COMPILE-ZERO-WEIGHTS): the ONNX
importer's check (`nem.frontends.onnx.zero_weights`) for a `.mlir` model.

A linalg op that multiplies its inputs (`MULTIPLYING`: matmuls,
convolutions, `linalg.mul`) one of which is an `arith.constant` of zeros
while another is computed at run time computes without that input; the
warning names the op at its `file:line:col`.  Constants reached through
`memref.global` and products written as `linalg.generic` bodies are not
inspected.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from nem.frontends.upstream_dialects.upstream_ops import upstream_diagnostic
from nem.frontends.zero_weights import warning

if TYPE_CHECKING:
    from mlir import ir

MULTIPLYING_PREFIXES = (
    "linalg.matmul",
    "linalg.batch_matmul",
    "linalg.matvec",
    "linalg.vecmat",
    "linalg.batch_matvec",
    "linalg.batch_vecmat",
    "linalg.conv_",
    "linalg.depthwise_conv_",
    "linalg.mul",
    "linalg.batch_reduce_matmul",
    "linalg.contract",
    "linalg.dot",
)
"""Named linalg ops whose inputs are factors of one product (the op names
start with one of these)."""


def _ops(op: ir.Operation) -> Iterator[ir.Operation]:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                yield inner
                yield from _ops(inner)


def _zero_constant(value: ir.Value) -> bool | None:
    """Whether `value` is an `arith.constant` of zeros (None: not a constant)."""
    from mlir import ir

    owner = value.owner
    op = owner.operation if hasattr(owner, "operation") else owner
    if not isinstance(op, ir.Operation) or op.name != "arith.constant":
        return None
    attr = op.attributes["value"]  # downcast by the bindings
    if not isinstance(attr, ir.DenseFPElementsAttr | ir.DenseIntElementsAttr):
        return False  # a scalar or an opaque constant: not inspected
    if attr.is_splat:
        zero: bool = attr.get_splat_value().value == 0
        return zero
    return not np.any(np.array(attr))


def _inputs(op: ir.Operation) -> list[ir.Value]:
    """The `ins` operands of a destination-style op."""
    from mlir import ir

    seg = op.attributes["operandSegmentSizes"] if "operandSegmentSizes" in op.attributes else None
    n = ir.DenseI32ArrayAttr(seg)[0] if seg is not None else len(op.operands) - 1
    return list(op.operands)[:n]


def zero_weight_warning(func: ir.Operation | ir.OpView, file: str) -> str | None:
    """The warning line for the ops of `func` (an `mlir.ir` func.func) that
    multiply run-time data by a constant of zeros, or None."""
    subjects = []
    for op in _ops(func.operation):
        if not op.name.startswith(MULTIPLYING_PREFIXES):
            continue
        ins = _inputs(op)
        kinds = [_zero_constant(v) for v in ins]
        if any(kinds) and any(k is None for k in kinds):
            where = upstream_diagnostic(str(op.location), "", file, "").loc
            subjects.append(f"'{op.name}' at {where} by operand {kinds.index(True)}")
    return warning(file, subjects, "op")
