"""Moving a parallel loop innermost in a perfect affine loop band, exactly
(for the native escape-hatch backend, D-RT-MLIR-JIT).

Native code runs a loop nest fast when its innermost loop walks memory
contiguously and carries no dependence: the vectorizer then runs several
iterations at a time.  The matmul nest an escape-hatch kernel typically
holds, `for i, j, k: C[i, j] = C[i, j] + A[i, k] * B[k, j]`, carries its
float sum along the innermost k, which no exact compilation may reorder, so
it runs one scalar operation at a time (about 30 times slower than numpy's
`A @ B`).  Moving j innermost (`for i, k, j`) keeps, for every element
C[i, j], the same operations in the same order, and lets the j loop
vectorize: the result is bit for bit the same.

The permutation is legal when every pair of dependent iterations keeps its
order.  Here: a perfect band (each loop's body is the next loop, the
innermost body straight-line loads, stores and pure scalar ops), rectangular
(no bound depends on a band index), and every memref the body stores to is
accessed, by every load and store of it, at a result `a * p + R` with the
same coefficient `a != 0` on the moved index `p`, no other band index, and
the same loop-invariant rest `R`.  Two iterations touching the same element
of such a memref then have the same `p`, and removing an equal coordinate
from the lexicographic order of two iteration vectors does not change which
comes first.  Memrefs that are only loaded carry no dependence.  Distinct
memref values are distinct memory: the kernel's arguments are (aliasing
arguments are merged before this runs, `mlir_native_prep`) and so are
`memref.alloc`s; a band touching any other memref value is left alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import affine, func, memref
from xdsl.dialects.builtin import AffineMapAttr, IndexType
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)
from xdsl.ir.affine.affine_expr import AffineBinaryOpKind

# a linear form: SSA value (or 1 for the constant term) -> coefficient
Linear = dict[SSAValue | int, int]

Access = affine.LoadOp | affine.StoreOp

_PURE_DIALECTS = ("arith.", "math.")


def _linear(expr: AffineExpr, operands: Sequence[SSAValue], num_dims: int) -> Linear | None:
    """`expr` over the map's operands as a linear form, or None (mod, div,
    a product of two non-constants)."""
    if isinstance(expr, AffineConstantExpr):
        return {1: expr.value} if expr.value else {}
    if isinstance(expr, AffineDimExpr):
        return {operands[expr.position]: 1}
    if isinstance(expr, AffineSymExpr):
        return {operands[num_dims + expr.position]: 1}
    if not isinstance(expr, AffineBinaryOpExpr):
        return None
    lhs, rhs = _linear(expr.lhs, operands, num_dims), _linear(expr.rhs, operands, num_dims)
    if lhs is None or rhs is None:
        return None
    if expr.kind == AffineBinaryOpKind.Add:
        out = dict(lhs)
        for k, c in rhs.items():
            out[k] = out.get(k, 0) + c
        return {k: c for k, c in out.items() if c}
    if expr.kind == AffineBinaryOpKind.Mul:
        for scale, form in ((lhs, rhs), (rhs, lhs)):
            if set(scale) <= {1}:
                s = scale.get(1, 0)
                return {k: c * s for k, c in form.items() if c * s}
    return None


def _results(op: affine.LoadOp | affine.StoreOp) -> list[Linear | None]:
    m = op.map.data
    operands = list(op.indices)
    return [_linear(e, operands, m.num_dims) for e in m.results]


def _band(top: affine.ForOp) -> list[affine.ForOp]:
    band = [top]
    while True:
        ops = [o for o in band[-1].body.block.ops if not isinstance(o, affine.YieldOp)]
        if len(ops) != 1 or not isinstance(ops[0], affine.ForOp):
            return band
        band.append(ops[0])


def _distinct_memory(v: SSAValue) -> bool:
    """A memref value that no other memref value of the kernel aliases."""
    if isinstance(v, BlockArgument):
        return isinstance(v.block.parent_op(), func.FuncOp)
    return isinstance(v.owner, memref.AllocOp)


def _movable(band: list[affine.ForOp], p: int, accesses: dict[SSAValue, list[Access]]) -> bool:
    """Whether band loop `p` may move innermost (module doc)."""
    ivs = [loop.body.block.args[0] for loop in band]
    for ops in accesses.values():
        if not any(isinstance(o, affine.StoreOp) for o in ops):
            continue
        forms = [_results(o) for o in ops]
        ok = False
        for r in range(len(forms[0])):
            rs = [x for x in (f[r] for f in forms) if x is not None]
            if len(rs) != len(forms):
                continue
            a = rs[0].get(ivs[p], 0)
            if a == 0 or any(x.get(ivs[p], 0) != a for x in rs):
                continue
            if any(x.get(iv, 0) for x in rs for q, iv in enumerate(ivs) if q != p):
                continue
            rest = [{k: c for k, c in x.items() if k is not ivs[p]} for x in rs]
            if all(x == rest[0] for x in rest):
                ok = True
                break
        if not ok:
            return False
    return True


def _candidate(band: list[affine.ForOp]) -> int | None:
    """The band loop to move innermost: the one every store walks
    contiguously (its index is the stores' last subscript, coefficient 1),
    when that is not already the innermost loop and the move is legal."""
    inner = band[-1].body.block
    body = [o for o in inner.ops if not isinstance(o, affine.YieldOp)]
    ivs = [loop.body.block.args[0] for loop in band]
    inside = set(ivs) | {r for o in body for r in o.results}
    for loop in band:
        if loop.results or any(v in inside for v in loop.operands):
            return None
    accesses: dict[SSAValue, list[Access]] = {}
    for o in body:
        if o.regions:
            return None
        if isinstance(o, affine.LoadOp | affine.StoreOp):
            if not _distinct_memory(o.memref):
                return None
            if any(v in inside and v not in ivs for v in o.indices):
                return None
            accesses.setdefault(o.memref, []).append(o)
        elif not (o.name.startswith(_PURE_DIALECTS) or isinstance(o, affine.ApplyOp)):
            return None
    stores = [o for ops in accesses.values() for o in ops if isinstance(o, affine.StoreOp)]
    if not stores:
        return None
    lasts = [_results(s)[-1] if s.map.data.results else None for s in stores]
    for p in range(len(band) - 1):
        if all(f is not None and f.get(ivs[p]) == 1 for f in lasts) and _movable(band, p, accesses):
            return p
    return None


def _permute(band: list[affine.ForOp], order: list[int]) -> None:
    """Rebuild `band` with its loop headers in `order` (outermost first);
    each index keeps its meaning (its uses follow its header)."""
    blocks = [Block(arg_types=[IndexType()]) for _ in band]
    for pos, q in enumerate(order):
        band[q].body.block.args[0].replace_all_uses_with(blocks[pos].args[0])
    inner = band[-1].body.block
    for o in list(inner.ops):
        o.detach()  # type: ignore[no-untyped-call]  # xDSL's Operation.detach is not annotated
        if isinstance(o, affine.YieldOp):
            o.erase()
        else:
            blocks[-1].add_op(o)
    blocks[-1].add_op(affine.YieldOp.get())
    new_loop: Operation | None = None
    for pos in range(len(band) - 1, -1, -1):
        h = band[order[pos]]
        n_lb = len(h.lowerBoundOperands)
        operands = list(h.operands)
        new_loop = affine.ForOp.from_region(
            operands[:n_lb],
            operands[n_lb:],
            [],
            [],
            AffineMapAttr(h.lowerBoundMap.data),
            AffineMapAttr(h.upperBoundMap.data),
            Region(blocks[pos]),
            h.step,
        )
        if pos:
            blocks[pos - 1].add_op(new_loop)
            blocks[pos - 1].add_op(affine.YieldOp.get())
    top = band[0]
    parent = top.parent_block()
    assert new_loop is not None and parent is not None  # a band is in a function body
    parent.insert_op_before(new_loop, top)
    top.detach()  # type: ignore[no-untyped-call]  # as above
    top.erase(safe_erase=False)


def _alone_in_loop(op: Operation) -> bool:
    """Whether `op` is the one op (but the yield) of an affine.for body."""
    block = op.parent_block()
    return (
        isinstance(op.parent_op(), affine.ForOp)
        and block is not None
        and len([x for x in block.ops if not isinstance(x, affine.YieldOp)]) == 1
    )


def sink_parallel_loops(fn: func.FuncOp) -> int:
    """Move, in every perfect affine band of `fn`, the loop its stores walk
    contiguously innermost where that is exact (module doc).  Returns how
    many bands were permuted."""
    tops = [o for o in fn.walk() if isinstance(o, affine.ForOp) and not _alone_in_loop(o)]
    moved = 0
    for top in tops:
        band = _band(top)
        if len(band) < 2:
            continue
        p = _candidate(band)
        if p is not None:
            _permute(band, [q for q in range(len(band)) if q != p] + [p])
            moved += 1
    return moved
