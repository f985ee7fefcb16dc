"""Elementwise chains fused into one op (D-COMPILE-FUSE-CHAIN): each tile
goes through the whole chain in L1.

The importer gives an unfolded BatchNormalization and the Relu after it
(DenseNet-121's pre-activation before each convolution, Inception v2's and
ShuffleNet's after one) as one elementwise `linalg.generic` per ONNX node,
each writing a buffer of its own that only the next one reads.  Tiled one
op at a time, every such intermediate goes to DDR/L2 and comes back: a
round trip of the whole tensor per op.

Before the tile plans (`fuse_chains`, on the bufferized function, in
`nem.compile.transform.tile_module`), a producer E1 and its consumer E2,
both elementwise (all loops parallel, one output of identity map, f32 or
f16, one type throughout but for an f16 op computed in f32 between an
`extf` and a `truncf`,
bodies of the ops the lowering raises as an elementwise tree) where E1's
output is an allocation that E2 alone reads (at identity maps), become one
`linalg.generic` at E2's place: E1's inputs and E2's other inputs (each
(value, map) once), E2's output, E1's body and then E2's on its result.
The intermediate allocation disappears; repeated, a chain E1 -> .. -> Ek
becomes one op, planned, tiled and staged as any op, whose tree the
lowering raises as one task per body op on L1 scratch (D-LOW-RAISE,
D-LOW-BCAST-OPERAND; `l1_scratch.temporaries` sizes the scratch).  What
D-COMPILE-FUSE-L1 may take as a convolution's epilogues (ops of identity
maps reading its output) is left to it; a fused chain after a convolution
(a BatchNormalization and its Relu) is one epilogue of it, whose tree's
scratch the fused tile's L1 measure counts.

Exact: every element is computed by the same ops (in their own type) on the same values
in the same order; only where the intermediate lives changes.  A producer
whose output has another reader (a concatenation's copy, a graph output,
a second layer) is not fused: the chain ends before it (its value must be
written whole anyway); the last op's output may have any number of
readers, it is written as before."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg

from nem.compile.conv_forms import conv_output
from nem.compile.linalg_ir import (
    FUSED_TYPES,
    all_parallel,
    body_of,
    clone_ops,
    elem_of,
    identity_map,
    map_strings,
    operand_segments,
    users_of,
)
from nem.compile.nest_ir import owner_op
from nem.compile.writers import Writers, root_of
from nem.passes.lowering.nest_analysis import BINARY, UNARY

RAISED = frozenset(BINARY) | frozenset(UNARY)
"""Body ops of the elementwise trees the lowering raises (D-LOW-RAISE), on
values of one type of `FUSED_TYPES` only, or f32 inside an f16 op's
`CASTS` (`_elementwise`): a composition of them is again such a tree.
Bodies with other ops (compares and selects, other casts, integer ops) are
not fused, so that a fused op is never an escape-hatch kernel where
its parts were raised."""


CASTS = frozenset({"arith.extf", "arith.truncf"})
"""The casts of an f16 op computed in f32 and rounded once (D-COMPILE-F16),
raised as `cast` tasks in its tree (D-LOW-RAISE)."""


def _elementwise(op: ir.Operation) -> bool:
    """`op` is a `linalg.generic` the fusion takes: all loops parallel, one
    output at the identity map whose old value the body does not read,
    inputs at identity or broadcast maps, a body of one or more `RAISED`
    ops, its output of a type of `FUSED_TYPES` (f32; f16 since session 53)
    and every other buffer and value of that type, or, for f16, f32 between
    an `extf` and a `truncf` (an op computed wide and rounded once,
    D-COMPILE-F16: an f16 BatchNormalization, its scale and shift in f32)."""
    if op.name != "linalg.generic" or not all_parallel(op):
        return False
    ins, outs = operand_segments(op)
    elem = elem_of(outs[0]) if len(outs) == 1 else None
    if not isinstance(elem, FUSED_TYPES):
        return False
    wide = {elem, ir.F32Type.get()} if isinstance(elem, ir.F16Type) else {elem}
    if not all(elem_of(v) in wide for v in ins):
        return False
    maps = map_strings(op)
    if maps[-1] != identity_map(ir.MemRefType(outs[0].type).rank):
        return False
    block = body_of(op)
    if list(block.arguments[len(ins)].uses):
        return False
    body = [o.operation for o in block.operations]
    if len(body) < 2 or body[-1].name != "linalg.yield" or len(body[-1].operands) != 1:
        return False  # (a copy, D-LOW-GENERIC-COPY, may transpose: not a tree's operand)
    if body[-1].operands[0].type != elem:
        return False
    attrs = ir.ArrayAttr(op.attributes["indexing_maps"])
    if not all(_tree_map(ir.AffineMapAttr(m).value, v) for m, v in zip(attrs, ins)):
        return False
    ops = RAISED | (CASTS if len(wide) > 1 else frozenset())
    return all(
        o.name in ops
        and len(o.regions) == 0
        and all(v.type in wide for v in [*o.operands, *o.results])
        for o in body[:-1]
    )


def _tree_map(m: ir.AffineMap, v: ir.Value) -> bool:
    """`m` reads operand `v` as a raised tree's operand may (D-LOW-BCAST-OPERAND):
    loop dimensions in loop order, or 0 on a dimension of size 1."""
    shape = ir.MemRefType(v.type).shape
    last = -1
    for e, size in zip(m.results, shape):
        if isinstance(e, ir.AffineDimExpr) and e.position > last:
            last = e.position
        elif not (isinstance(e, ir.AffineConstantExpr) and e.value == 0 and size == 1):
            return False
    return len(m.results) == len(shape)


def _consumer(op: ir.Operation, epilogues: bool, writers: Writers) -> ir.Operation | None:
    """The op E2 that elementwise `op` (E1) fuses into (module doc), or None
    (`writers`: the block's, for E1's inputs written before E2).
    With `epilogues` (D-COMPILE-FUSE-L1 on), an `op` of identity maps reading
    a convolution's output is left to that fusion, which takes it as an
    epilogue on the convolution's tile."""
    ins, (t,) = operand_segments(op)
    if epilogues and _epilogue_like(op, ins):
        return None
    alloc = owner_op(t)
    if alloc is None or alloc.name != "memref.alloc" or alloc.block != op.block:
        return None  # a function argument (the caller reads it) or a view
    others = [u for u in users_of(t) if u != op]
    if len(others) != 1:
        return None  # read twice (or never): the intermediate is needed whole
    c = others[0]
    if c.block != op.block or not op.is_before_in_block(c) or not _elementwise(c):
        return None
    c_ins, (c_out,) = operand_segments(c)
    maps = map_strings(c)
    ident = identity_map(ir.MemRefType(t.type).rank)
    if _loops(c) != _loops(op):
        return None  # (not the same iteration space)
    if any(v == t and m != ident for v, m in zip(c_ins, maps)) or c_out == t:
        return None
    if any(root_of(v) == root_of(c_out) for v in ins):
        return None  # E2 writes (a view of) what E1 reads
    if any(writers.between(v, op, c) for v in ins):
        return None  # E1's inputs change before E2's place, where it would read them
    return c


def _epilogue_like(op: ir.Operation, ins: list[ir.Value]) -> bool:
    """`op` reads a convolution's output, every operand at the identity map."""
    ident = identity_map(ir.MemRefType(operand_segments(op)[1][0].type).rank)
    return all(m == ident for m in map_strings(op)) and any(conv_output(v) for v in ins)


def _loops(op: ir.Operation) -> list[int]:
    """The iteration space: the output's shape (identity output map)."""
    return list(ir.MemRefType(operand_segments(op)[1][0].type).shape)


def _fuse(op: ir.Operation, c: ir.Operation) -> ir.Operation:
    """The generic of `op` then `c` at `c`'s place (module doc); erases both
    and `op`'s output allocation."""
    ins, (t,) = operand_segments(op)
    c_ins, (c_out,) = operand_segments(c)
    pairs: list[tuple[ir.Value, str]] = []
    for v, m in [*zip(ins, map_strings(op)), *zip(c_ins, map_strings(c))]:
        if v != t and all(not (v == w and m == n) for w, n in pairs):
            pairs.append((v, m))
    out_map = map_strings(c)[-1]
    types = [ir.MemRefType(v.type).element_type for v, _ in pairs]
    with c.location:
        f = linalg.GenericOp(
            [],
            [v for v, _ in pairs],
            [c_out],
            ir.ArrayAttr.get(
                [ir.AffineMapAttr(ir.Attribute.parse(m)) for _, m in pairs + [(c_out, out_map)]]
            ),
            c.attributes["iterator_types"],
            ip=ir.InsertionPoint(c),
        )
        block = f.regions[0].blocks.append(*types, ir.MemRefType(c_out.type).element_type)
        args = list(block.arguments)

        def arg(v: ir.Value, m: str) -> ir.Value:
            return args[next(k for k, (w, n) in enumerate(pairs) if w == v and n == m)]

        with ir.InsertionPoint(block):
            first = _inline(op, [arg(v, m) for v, m in zip(ins, map_strings(op))])
            feed = [first if v == t else arg(v, m) for v, m in zip(c_ins, map_strings(c))]
            linalg.YieldOp([_inline(c, feed)])
    alloc = owner_op(t)
    c.erase()
    op.erase()
    assert alloc is not None
    alloc.erase()
    return f.operation


def _inline(op: ir.Operation, ins: list[ir.Value]) -> ir.Value:
    """Clone `op`'s body at the insertion point on `ins` (its input block
    arguments' values); the value it yields."""
    block = body_of(op)
    mapping = list(zip(list(block.arguments)[: len(ins)], ins))
    ops = [o.operation for o in block.operations]
    clone_ops(ops[:-1], mapping)
    y = ops[-1].operands[0]
    return next((new for old, new in mapping if old == y), y)


def fuse_chains(fn: ir.Operation, epilogues: bool) -> int:
    """Fuse each elementwise chain of `fn`'s body into one op (module doc);
    returns how many producers were fused into their consumers.  One pass
    in block order: a fused op takes its consumer's place, where the pass
    meets it as the next chain step's producer.  With `epilogues`
    (D-COMPILE-FUSE-L1 on), what that fusion takes as an epilogue as it is
    is left to it (`_consumer`)."""
    block = fn.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    writers = Writers(block)
    fused = 0
    for op in ops:
        if not _elementwise(op):
            continue
        c = _consumer(op, epilogues, writers)
        if c is not None:
            k = writers.at[c]
            ops[k] = f = _fuse(op, c)
            writers.place(f, k)  # (a later producer may feed it too)
            fused += 1
    return fused
