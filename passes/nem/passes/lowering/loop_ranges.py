"""The accesses of a loop nest with their index values (a pure analysis):
each loop inside the nest binds its variable to `lb + step * v`, `v` a new
variable over its constant trip count, the enclosing NEM scopes' values
coming from the lowering's environment.  Used by the out-of-bounds check
(D-LOW-BOUNDS, `access_bounds`) and for the box an escape-hatch nest
touches (D-LOW-PEEL's narrowing checks, `escape`).
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue

from nem.passes.lowering.affine_algebra import (
    Aff,
    AtomKey,
    IndexEnv,
    Var,
    eval_map,
    pick_minmax,
    resolve_index,
)

ACCESSES = (affine.LoadOp, affine.StoreOp, memref.LoadOp, memref.StoreOp)
AccessOp = affine.LoadOp | affine.StoreOp | memref.LoadOp | memref.StoreOp


def accesses(
    top: Operation, outer: IndexEnv, made: list[Var] | None = None
) -> Iterator[tuple[AccessOp, list[Aff | None]]]:
    """Each access under `top` that runs whenever `top` does (no conditional,
    every loop around it with a constant positive trip count), in program
    order, with its indices (None: not evaluated).  `made` collects the
    variables of the loops inside `top`."""
    env: dict[SSAValue, Aff] = {}
    todo = [top]
    while todo:
        op = todo.pop()
        if isinstance(op, affine.ForOp):
            if _bind(op, env, outer, made):
                todo += reversed(list(op.body.block.ops))
        elif isinstance(op, ACCESSES):
            yield op, _indices(op, env, outer)


Box = tuple[list[Aff], list[int]]
"""Per dimension, the first index (over the enclosing scopes' variables) and the extent."""


def accessed_boxes(top: Operation, outer: IndexEnv) -> dict[SSAValue, Box]:
    """Per memref that `top` (a loop nest) accesses, the bounding box of all
    its accesses over the ranges of the loops inside `top` (the enclosing
    scopes' variables stay symbolic in the first index).  A memref is left
    out when one of its accesses is not judged (under a conditional or a
    loop without a constant trip count, an index not evaluated or with a
    `mod`/`floordiv`), or when two first indices differ by a non-constant:
    the box must hold every element the nest touches (the narrowing checks
    of D-LOW-PEEL use it for escape-hatch nests)."""
    made: list[Var] = []
    judged = list(accesses(top, outer, made))
    local = {v.key for v in made}
    seen = {op for op, _ in judged}
    unjudged = {o.memref for o in top.walk() if isinstance(o, ACCESSES) and o not in seen}
    boxes: dict[SSAValue, Box] = {}
    for op, idx in judged:
        mem = op.memref
        if mem in unjudged:
            continue
        box = _box(idx, local)
        old = boxes.get(mem)
        merged = box if old is None or box is None else _merge(old, box)
        if merged is None:
            unjudged.add(mem)
            boxes.pop(mem, None)
        else:
            boxes[mem] = merged
    return boxes


def _box(idx: list[Aff | None], local: set[AtomKey]) -> Box | None:
    """The box of one access: its indices over the `local` variables' ranges."""
    firsts, extents = [], []
    for a in idx:
        if a is None or not all(isinstance(x, Var) for x in a.atoms()):
            return None
        inner = Aff({k: v for k, v in a.terms.items() if k in local})
        r = inner.bounds()
        if r is None:
            return None
        firsts.append(a - inner + Aff.c(r[0]))
        extents.append(r[1] - r[0] + 1)
    return firsts, extents


def _merge(a: Box, b: Box) -> Box | None:
    """The bounding box of two boxes whose first indices differ by constants."""
    firsts, extents = [], []
    for fa, ea, fb, eb in zip(a[0], a[1], b[0], b[1]):
        d = fb - fa
        if not d.is_const():
            return None
        lo, hi = min(0, d.const), max(ea - 1, d.const + eb - 1)
        firsts.append(fa + Aff.c(lo))
        extents.append(hi - lo + 1)
    return firsts, extents


def _value(v: SSAValue, env: IndexEnv, outer: IndexEnv) -> Aff | None:
    """The affine value of index `v`, None when it has none (or is not
    affine: an `affine.apply` of a `mod 0`, which its lowering reports)."""
    try:
        return resolve_index(v, env, outer)
    except ValueError:
        return None


def _bind(
    loop: affine.ForOp, env: dict[SSAValue, Aff], outer: IndexEnv, made: list[Var] | None = None
) -> bool:
    """Bind the loop's variable to `lb + step * v`, `v` a new variable over
    its trip count; False when the trip count is not a positive constant
    (the body may not run: nothing in it is judged)."""
    bounds = []
    for m, operands, is_min in (
        (loop.lowerBoundMap.data, loop.lowerBoundOperands, False),
        (loop.upperBoundMap.data, loop.upperBoundOperands, True),
    ):
        vals = [_value(v, env, outer) for v in operands]
        if any(x is None for x in vals):
            return False
        try:
            bounds.append(pick_minmax(eval_map(m, [x for x in vals if x is not None]), is_min))
        except ValueError:
            return False
    lb, ub = bounds
    step = loop.step.value.data
    if lb is None or ub is None or step <= 0 or not (ub - lb).is_const():
        return False
    trip = -(-(ub - lb).const // step)
    if trip <= 0:
        return False
    iv = loop.body.block.args[0]
    var = Var(None, iv.name_hint or "i", trip)
    if made is not None:
        made.append(var)
    env[iv] = lb + Aff.atom(var).scale(step)
    return True


def _indices(op: AccessOp, env: IndexEnv, outer: IndexEnv) -> list[Aff | None]:
    t = op.memref.type
    assert isinstance(t, MemRefType)
    vals = [_value(v, env, outer) for v in op.indices]
    if isinstance(op, memref.LoadOp | memref.StoreOp):
        return vals
    assert op.map is not None
    if any(x is None for x in vals):
        return [None] * len(t.get_shape())
    try:
        return list(eval_map(op.map.data, [x for x in vals if x is not None]))
    except ValueError:
        return [None] * len(t.get_shape())
