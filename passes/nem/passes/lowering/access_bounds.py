"""Accesses out of bounds (D-LOW-BOUNDS): a pure check, run by the
conversion on each loop nest (raised or not) and each scalar access before
lowering it.

An `affine.load`/`affine.store` (or `memref.load`/`store`) whose index on
a dimension leaves `[0, size)` of its memref has no defined result in MLIR.
Raised, it becomes a region past its buffer or with an extent its shape
does not fit, reported in NEM's terms (REG-02, EXT-01); as an
escape-hatch task it would fail only when it runs.  So each access is
checked per dimension here, with the ranges of the loop variables: the
enclosing NEM loops' (`Var`, `[0, trip-1]`, constants in a peeled
iteration) and those of the loops inside the nest, each a new `Var` over
its constant trip count.  An index that is a sum of loop variables with
constant coefficients ranges exactly over the interval its bounds give
(every combination of the variables occurs), so an index found outside its
dimension is a certain error, located at the access.  Nothing is judged
that is not certain: an index with a `mod`/`floordiv` or a value the
lowering does not evaluate, an access under a conditional, the body of a
loop whose trip count is not a constant (or is 0).
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineDimExpr, AffineExpr, AffineSymExpr

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError
from nem.passes.lowering.affine_algebra import IndexEnv, Var, depends_on
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.escape import location_text, memref_label
from nem.passes.lowering.loop_ranges import AccessOp, accesses
from nem.passes.lowering.tile_loops import INDEX_OPS


def check_access_bounds(top: Operation, outer: IndexEnv) -> None:
    """A located error at each access of `top` (a loop nest or one access)
    that certainly leaves a dimension of its memref; `outer`: the index
    values of the enclosing scopes (the lowering's environment)."""
    errors: list[Diagnostic] = []
    for op, idx in accesses(top, outer):
        t = op.memref.type
        assert isinstance(t, MemRefType)
        for k, (a, size) in enumerate(zip(idx, t.get_shape())):
            if a is None or size < 0 or not all(isinstance(x, Var) for x in a.atoms()):
                continue
            r = a.bounds()
            if r is None or (r[0] >= 0 and r[1] < size):
                continue
            errors += reject(op, _message(op, k, r, size, t), _fix(op, k, size)).diagnostics
    if errors:
        raise NemDiagnosticError(errors)


def _message(op: AccessOp, k: int, r: tuple[int, int], size: int, t: MemRefType) -> str:
    name = memref_label(op.memref)
    # the interval's ends are taken; with a step or a coefficient above 1, not all between
    values = f"is {r[0]}" if r[0] == r[1] else f"ranges from {r[0]} to {r[1]}"
    return (
        f"out-of-bounds access: index {k} of {name} : {t} {values}, outside "
        f"dimension {k} of size {size} (D-LOW-BOUNDS)"
    )


def _fix(op: AccessOp, k: int, size: int) -> str:
    """Which loops' bounds to look at: those whose variables index dimension k."""
    loops = [
        o
        for o in _ancestors(op)
        if isinstance(o, affine.ForOp)
        and any(
            depends_on(v, o.body.block.args[0], lambda x: x.name in INDEX_OPS)
            for v in _operands_of_result(op, k)
        )
    ]
    named = [
        (f"%{o.body.block.args[0].name_hint} " if o.body.block.args[0].name_hint else "")
        + f"at {location_text(o)}"
        for o in reversed(loops)
    ]
    where = (
        f"the bounds of loop{'s' if len(loops) > 1 else ''} {', '.join(named)} and the "
        "indices of this access"
        if loops
        else "the indices of this access"
    )
    return (
        f"keep index {k} within [0, {size}): check {where} (an access out of bounds has "
        "no defined result in MLIR)"
    )


def _ancestors(op: Operation) -> Iterator[Operation]:
    parent = op.parent_op()
    while parent is not None:
        yield parent
        parent = parent.parent_op()


def _operands_of_result(op: AccessOp, k: int) -> list[SSAValue]:
    """The index operands result k of the access's map uses (memref.load: index k)."""
    if isinstance(op, memref.LoadOp | memref.StoreOp):
        return [op.indices[k]]
    assert op.map is not None
    m = op.map.data
    used: set[int] = set()
    todo: list[AffineExpr] = [m.results[k]]
    while todo:
        e = todo.pop()
        if isinstance(e, AffineDimExpr):
            used.add(e.position)
        elif isinstance(e, AffineSymExpr):
            used.add(m.num_dims + e.position)
        elif isinstance(e, AffineBinaryOpExpr):
            todo += [e.lhs, e.rhs]
    return [op.indices[p] for p in sorted(used) if p < len(op.indices)]
