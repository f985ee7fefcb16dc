"""The ops a fused convolution's tile unfolds into (D-COMPILE-FUSE-L1),
shared by its epilogues (`nem.compile.fusion`) and its prologue
(`nem.compile.fusion_prologue`): the fused op's marker, an elementwise
`linalg.generic` at an insertion point, a per-channel input broadcast into
an L1 tile of its own, the staging copies of a tile's buffers, and the ops
of a body computing one value."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, linalg, memref

from nem.compile.linalg_ir import identity_map, users_of
from nem.compile.nest_ir import owner_op

FUSE = "nem_fuse"
"""A fused op's (and its tiles') description: the convolution's strides
and dilations, its weight's shape, each epilogue's count of other inputs,
and which outputs are copied out (`keep`)."""


def slice_of(block: ir.Block, root: ir.Value, stop: list[ir.Value]) -> list[ir.Operation]:
    """The ops of `block` computing `root` from `stop`, the block's
    arguments and values from outside, in order."""
    seen: list[ir.Operation] = []
    todo = [root]
    while todo:
        v = todo.pop()
        owner = owner_op(v)
        if any(v == s for s in stop) or owner is None or owner.block != block:
            continue
        if all(owner != o for o in seen):
            seen.append(owner)
            todo += list(owner.operands)
    return [o.operation for o in block.operations if any(o.operation == s for s in seen)]


def copies_of(v: ir.Value) -> tuple[list[ir.Operation], list[ir.Operation]]:
    """The `linalg.copy`s into `v` and out of it."""
    copies = [u for u in users_of(v) if u.name == "linalg.copy"]
    return [c for c in copies if c.operands[1] == v], [c for c in copies if c.operands[0] == v]


def staging_copy(y: ir.Value, t: ir.Operation) -> ir.Operation | None:
    """The one `linalg.copy` staging `y` (a view of its own L1 buffer) when
    the tile `t` is its only reader: the broadcast then reads the copy's
    source instead, and the copy and its buffer go (`_drop_staging`)."""
    view = owner_op(y)
    if view is None or view.name != "memref.view":
        return None
    into, out_of = copies_of(y)
    readers = [u for u in users_of(y) if all(u != c for c in into)]
    if len(into) != 1 or out_of or len(readers) != 1 or readers[0] != t:
        return None
    alloc = owner_op(view.operands[0])
    if alloc is None or alloc.name != "memref.alloc":
        return None
    if any(u != view and u.name != "memref.dealloc" for u in users_of(alloc.results[0])):
        return None
    return into[0]


@dataclass
class Staged:
    """A broadcast epilogue input's L1 tile (`broadcast_tile`): the
    broadcast into it, its allocation, the view the epilogue reads and the
    view's offset (a constant 0)."""

    bcast: ir.Operation
    alloc: ir.Operation
    view: ir.Operation
    offset: ir.Operation


def broadcast_tile(y: ir.Value, m: str, like: ir.Value, ip: ir.InsertionPoint) -> Staged | None:
    """`y` (an epilogue input's slice read at map `m`: its L1 tile, or the
    DDR slice that tile was staged from) broadcast into a
    new L1 buffer of the type of the output tile `like` (`l1_like`), at `ip`;
    returns it (`Staged`), or None for a tile of
    dynamic shape (the epilogue then reads `y` at `m`, broadcast by the
    lowering in each tile: D-LOW-BCAST-OPERAND).  The broadcast is an
    all-parallel copy (D-LOW-GENERIC-COPY: concats, D-LOW-BCAST-CONCAT) that
    depends on the channel tile only, so `hoist.hoist_op` can move it out
    of the spatial tile loops (D-COMPILE-FUSE-L1)."""
    made = l1_like(like, ip)
    if made is None:
        return None
    alloc, zero, view = made
    bcast = generic([y], view.result, [m], ip, yield_first)
    return Staged(bcast, alloc.operation, view.operation, zero.operation)


def l1_like(
    like: ir.Value, ip: ir.InsertionPoint
) -> tuple[memref.AllocOp, arith.ConstantOp, memref.ViewOp] | None:
    """A new L1 buffer of the type of tile `like` at `ip`, declared as
    `structured.promote` declares one (bytes, as many as `like`'s elements
    at their width, viewed at offset 0): its allocation, the offset and
    the view; None for a tile of dynamic shape."""
    t = ir.MemRefType(like.type)
    if not t.has_static_shape or t.memory_space is None:
        return None
    elem = t.element_type
    i8 = ir.IntegerType.get_signless(8)
    size = math.prod(t.shape) * max(1, elem.width // 8)
    with ip:
        alloc = memref.AllocOp(ir.MemRefType.get([size], i8, memory_space=t.memory_space), [], [])
        zero = arith.ConstantOp(ir.IndexType.get(), 0)
        view = memref.ViewOp(
            ir.MemRefType.get(t.shape, elem, memory_space=t.memory_space), alloc, zero, []
        )
    return alloc, zero, view


def generic(
    ins: Sequence[ir.Value],
    out: ir.Value,
    in_maps: Sequence[str],
    ip: ir.InsertionPoint,
    body: Callable[[list[ir.Value]], list[ir.Value]],
) -> ir.Operation:
    """An elementwise `linalg.generic` at `ip` over `out`'s shape (identity
    map for `out`), `body(block arguments)` (of the operands' element types)
    giving what it yields; returns it."""
    ident = identity_map(ir.MemRefType(out.type).rank)
    maps = [ir.AffineMapAttr(ir.Attribute.parse(m)) for m in [*in_maps, ident]]
    par = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    op = linalg.GenericOp(
        [],
        ins,
        [out],
        ir.ArrayAttr.get(maps),
        ir.ArrayAttr.get([par] * ir.MemRefType(out.type).rank),
        ip=ip,
    )
    block = op.regions[0].blocks.append(*(ir.MemRefType(v.type).element_type for v in [*ins, out]))
    with ir.InsertionPoint(block):
        linalg.YieldOp(body(list(block.arguments)))
    return op.operation


def yield_first(args: list[ir.Value]) -> list[ir.Value]:
    """The body of a copy or broadcast (`generic`'s `body`): its first input."""
    return [args[0]]
