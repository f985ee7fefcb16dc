"""Constant-filled outputs filled in L1 instead of through DDR
(D-COMPILE-ZERO-INIT).

An accumulating op (a convolution without bias, a matmul, a partial sum of a
reduction split, a max pooling) starts from a `linalg.fill` of a constant on
its output (+0; -inf for a max), on the bufferized function: a separate op,
tiled apart.  Staged by `structured.promote`, each fill tile is a load of the
output tile into L1, the fill, and a store back; each tile of the op then
loads the constant back.  Two rewrites on the transform route remove the
bytes no one reads:

* `pairs`: a fill immediately followed by the op that accumulates into its
  operand is tiled after that op, and only if needed: the op's tiles are
  marked (`MARK`), and `stage_zeros` turns each tile's load of its staged
  output into a fill of it in L1 with the same constant (the fill's store
  and the load back go).  Exact only when every element of the output is
  staged once before the op reads it, i.e. no reduction loop is tiled (a
  tile over part of the reduction loads what the tiles before it summed):
  decided on the tile sizes the op is finally tiled with
  (`transform._tile_op`); otherwise the fill is tiled as before.
* `stage_zeros` also drops a fill tile's load of its output (promote stages
  every operand of an op that is not a `linalg.generic`, read or not): the
  fill writes every element of the view it is loaded into.

Either way the op reads the same bytes (the fill of its tile is D-LOW-FILL's
tasks for that constant), so the results are bit-identical.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator

from mlir import ir
from mlir.dialects import arith, linalg

from nem.compile.writers import root_of

MARK = "nem_zero_init"
"""On an op whose fill `pairs` dropped: its tiles' staged outputs are filled."""
PURE = frozenset({"arith.constant", "memref.alloc", "memref.subview", "memref.view"})
"""Ops that may sit between a fill and its consumer: they read and write no
element of a buffer."""


def fill_value(op: ir.Operation) -> ir.Attribute | None:
    """The constant a `linalg.fill` writes, if an L1 fill of its tiles makes
    the same bytes as D-LOW-FILL's tasks: an integer, or a float other than
    NaN and -0.0 (those stay fills: D-LOW-FILL leaves them escape-hatch
    tasks; -0.0 is not the +0 an accumulator starts from); else None."""
    if op.name != "linalg.fill":
        return None
    value = op.operands[0].owner
    if isinstance(value, ir.OpView):
        value = value.operation
    if not isinstance(value, ir.Operation) or value.name != "arith.constant":
        return None
    attr = value.attributes["value"]
    if isinstance(attr, ir.FloatAttr):
        x = attr.value
        if math.isnan(x) or struct.pack("<d", x) == struct.pack("<d", -0.0):
            return None
        return attr
    return attr if isinstance(attr, ir.IntegerAttr) else None


def pairs(block: ir.Block, ops: list[ir.Operation]) -> dict[int, int]:
    """{k: j} for each op `ops[k]` whose one output is the operand of the
    constant fill `ops[j]` (`fill_value`) just before it in `block` (only
    `PURE` ops between): the fill's constant is read by that op alone, and
    the op writes every element of its output (a linalg op writes its whole
    output).  `ops` are linalg ops of `block`, in order."""
    found = {}
    k = 0
    fill: tuple[int, ir.Operation] | None = None  # the last constant fill, PURE ops since
    for o in block.operations:
        op = o.operation
        if k < len(ops) and op == ops[k]:
            if fill is not None and _accumulates_into(op, fill[1].operands[1]):
                found[k] = fill[0]
            fill = (k, op) if fill_value(op) is not None else None
            k += 1
        elif op.name not in PURE:
            fill = None
    return found


def _accumulates_into(op: ir.Operation, buf: ir.Value) -> bool:
    """Whether `buf` is linalg op `op`'s one output, and no input of `op`
    views the buffer `buf` views (an input reading the fill's zeros)."""
    if [_whole(v) for v in outputs(op)] != [_whole(buf)]:
        return False
    root = root_of(buf)
    return all(root_of(v) != root for v in inputs(op))


def _whole(value: ir.Value) -> ir.Value:
    """`value` through subviews of the whole of their source (the same shape:
    in bounds, offsets 0 and strides 1; a split's part views its output so)."""
    while (
        isinstance(value, ir.OpResult)
        and value.owner.name == "memref.subview"
        and ir.MemRefType(value.type).shape == ir.MemRefType(value.owner.operands[0].type).shape
    ):
        value = value.owner.operands[0]
    return value


def outputs(op: ir.Operation) -> list[ir.Value]:
    """A linalg op's outputs (its DPS inits): `outputs` of the structured
    ops, `inits` of `linalg.reduce`, `init` of `linalg.broadcast`,
    `linalg.transpose` and `linalg.map`."""
    return _operand_group(op, ("outputs", "inits", "init"))


def inputs(op: ir.Operation) -> list[ir.Value]:
    """A linalg op's inputs (`inputs`, or `input` of `linalg.broadcast` and
    `linalg.transpose`)."""
    return _operand_group(op, ("inputs", "input"))


def _operand_group(op: ir.Operation, names: tuple[str, ...]) -> list[ir.Value]:
    view = op.opview
    for name in names:
        group = getattr(view, name, None)
        if group is not None:
            return [group] if isinstance(group, ir.Value) else list(group)
    raise ValueError(f"{op.name} has none of the operand groups {names}")


def reductions(op: ir.Operation) -> set[int]:
    """The loops of a linalg op that its (last) output does not index."""
    maps = linalg.get_indexing_maps(op)
    out = ir.AffineMapAttr(maps[len(maps) - 1]).value
    used = {r.position for r in out.results if isinstance(r, ir.AffineDimExpr)}
    return set(range(out.n_dims)) - used


def untiled(loops: set[int], extents: list[int], sizes: list[int]) -> bool:
    """Whether tile sizes `sizes` leave each of `loops` whole (0: not tiled)."""
    return all(sizes[d] == 0 or sizes[d] >= extents[d] for d in loops)


def stage_zeros(fn: ir.Operation, value: ir.Attribute | None) -> bool:
    """In tiled `fn`: drop each fill tile's load of its output (module
    docstring), and replace the load of each `MARK`ed op's output by a fill
    of that view in L1 with `value` (the dropped fill's constant), if every
    marked op has one (else none is replaced).  Strips the marks; returns
    whether marked ops started from fills."""
    dead: list[ir.Operation] = []
    staged: list[ir.Operation] = []  # loads of marked ops' outputs
    marked: list[ir.Operation] = []
    for block in _blocks(fn):
        into: dict[ir.Value, ir.Operation] = {}  # the last copy into each value
        prev: ir.Operation | None = None
        for o in block.operations:
            op = o.operation
            if op.name == "linalg.copy":
                into[op.operands[1]] = op
            elif op.name == "linalg.fill" and prev is not None and prev.name == "linalg.copy":
                if prev.operands[1] == op.operands[1]:
                    dead.append(prev)
            if MARK in op.attributes:
                marked.append(op)
                (out,) = outputs(op)
                if out in into:
                    staged.append(into[out])
            prev = op
    for op in marked:
        del op.attributes[MARK]
    consts = [_constant(_elem_of(c), value) for c in staged]
    zeroed = bool(marked) and len(staged) == len(marked) and all(c is not None for c in consts)
    for copy, const in zip(staged, consts) if zeroed else []:
        with copy.location, ir.InsertionPoint(copy):
            filled = arith.ConstantOp(_elem_of(copy), const).result
            linalg.fill(filled, outs=[copy.operands[1]])
        dead.append(copy)
    for op in dead:
        op.erase()
    return zeroed


def _constant(elem: ir.Type, value: ir.Attribute | None) -> ir.Attribute | float | None:
    """The fill's constant `value` as the L1 fill of an `elem` view writes
    it: +0 of any type (a fill of +0 into f16 or i32 alike, as a number
    `arith.ConstantOp` types), another constant only of its own type (a
    fill converting it, f32 into f16, is not re-rounded here: it stays a
    fill of its own); None: no L1 fill."""
    if not isinstance(value, (ir.FloatAttr, ir.IntegerAttr)):
        return None
    if value.value == 0:
        return 0.0 if isinstance(elem, ir.FloatType) else 0
    return value if value.type == elem else None


def _elem_of(copy: ir.Operation) -> ir.Type:
    """The element type of a `linalg.copy`'s destination."""
    return ir.MemRefType(copy.operands[1].type).element_type


def _blocks(op: ir.Operation) -> Iterator[ir.Block]:
    """The blocks nested in `op`, outermost first."""
    for region in op.regions:
        for block in region.blocks:
            yield block
            for o in block.operations:
                yield from _blocks(o.operation)
