"""Linalg ops read and cloned through the upstream bindings: an op's inputs
and outputs, its maps and iterators as text, its body, the users of a
value, and cloning a list of ops under a value mapping.  What fusion in L1
(`nem.compile.fusion`) and the elementwise chains (`nem.compile.chains`)
share, below both."""

from __future__ import annotations

from mlir import ir

FUSED_TYPES = (ir.F32Type, ir.F16Type)
"""The element types a fused op's buffers may have, all one of them (a
convolution's group, D-COMPILE-FUSE-L1; an elementwise chain,
D-COMPILE-FUSE-CHAIN): each fused op is the unfused ones' in their own
type, so fusing any one float type is as exact as f32 (session 53)."""

MEMREF_RESHAPES = ("memref.collapse_shape", "memref.expand_shape")
"""Views that only regroup a buffer's dimensions: a fused op reads through
them (D-COMPILE-FUSE-L1), a copy from one onto its own base is a self copy
(D-COMPILE-PAD-IN-PLACE)."""


def elem_of(v: ir.Value) -> ir.Type | None:
    """The element type of memref `v` (None: not a memref)."""
    return ir.MemRefType(v.type).element_type if isinstance(v.type, ir.MemRefType) else None


def typed(v: ir.Value, elem: ir.Type | None) -> bool:
    """`v` is a memref of `elem`."""
    same: bool = elem_of(v) == elem
    return same


def operand_segments(op: ir.Operation) -> tuple[list[ir.Value], list[ir.Value]]:
    """A linalg op's (inputs, outputs); every operand an output for an op
    whose view names them otherwise (conservative)."""
    view = op.opview
    for ins, outs in (("inputs", "outputs"), ("inputs", "inits"), ("input", "init")):
        if hasattr(view, ins) and hasattr(view, outs):
            i, o = getattr(view, ins), getattr(view, outs)
            return (list(i) if ins == "inputs" else [i]), (list(o) if outs != "init" else [o])
    return [], list(op.operands)


def users_of(v: ir.Value) -> list[ir.Operation]:
    return [u.owner.operation if isinstance(u.owner, ir.OpView) else u.owner for u in v.uses]


def identity_map(n: int) -> str:
    dims = ", ".join(f"d{i}" for i in range(n))
    return f"affine_map<({dims}) -> ({dims})>"


def map_strings(op: ir.Operation) -> list[str]:
    return [str(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]


def all_parallel(op: ir.Operation) -> bool:
    return all("parallel" in str(t) for t in ir.ArrayAttr(op.attributes["iterator_types"]))


def body_of(op: ir.Operation) -> ir.Block:
    return op.regions[0].blocks[0]


def clone_ops(ops: list[ir.Operation], mapping: list[tuple[ir.Value, ir.Value]]) -> None:
    """Clone `ops` at the insertion point, their operands mapped by
    `mapping` (which gets each result's clone)."""
    for o in ops:
        new = o.clone().operation
        for old, val in mapping:
            new.replace_uses_of_with(old, val)
        mapping += list(zip(o.results, new.results))


WINDOW_ATTRS = ("strides", "dilations")


def spell_window_defaults(module: ir.Module) -> None:
    """Give each named convolution and pooling of `module` the `strides` and
    `dilations` it leaves out, as their defaults: all 1 (one per window
    dimension, `conv_2d_...`'s 2, `pooling_ndhwc_...`'s 3).  Upstream's
    accessors default them, its Python attribute dictionary does not: a
    user's `linalg.conv_2d_nhwc_hwcf` written without them stopped the
    compile with an internal KeyError (an outside user, session 66)."""

    def visit(op: ir.Operation) -> ir.WalkResult:
        name = op.name
        if name.startswith(("linalg.conv_", "linalg.depthwise_conv_", "linalg.pooling_")):
            parts = name.split("_")
            spatial = next((int(p[0]) for p in parts if len(p) == 2 and p[1] == "d"), 0)
            if name.startswith("linalg.pooling_"):
                spatial = len(parts[1]) - 2  # (its layout: nhwc, ncw, ndhwc, ...)
            for attr in WINDOW_ATTRS:
                if spatial > 0 and attr not in op.attributes:
                    i64 = ir.IntegerType.get_signless(64)
                    op.attributes[attr] = ir.DenseElementsAttr.get_splat(
                        ir.RankedTensorType.get([spatial], i64), ir.IntegerAttr.get(i64, 1)
                    )
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
