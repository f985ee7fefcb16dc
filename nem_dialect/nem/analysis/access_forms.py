"""The printed isl form of a static access (`HazardFinder._form`), decided
once per *syntactic shape* of the access (D-HAZ-FORM-SHAPE).

`_form` keys the hazard analysis's shape memos (`race_memos.ShapeMemos`):
the access's domain, offset and extent as isl prints them on its task's own
space.  Printing needs the task's `Nest` and the isl functions of the
offset and extent, which was a fifth of the final check of a lowered CNN,
although lowered nests repeat: each loop of DenseNet-121 has its own
variable, but most of them are the same few nests, up to the constants of
the offsets.  `shape_key` names what the isl objects are built from: the
tapes of the loops' bounds and of the offset and extent, each loop variable
by its depth, each constant by its value.  Equal keys give the same isl
objects, so the same printed forms: `quasi_affine` interprets the tape
node by node and reads nothing else but the box of each loop variable (for
a division's sign), itself a function of the bounds of its loop and the
loops around it (`Boxes.add`), all in the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from xdsl.ir import SSAValue

from nem.analysis.presburger import Nest
from nem.dialect.bounded_cache import BoundedCache
from nem.dialect.expressions import (
    TAPE_ARG,
    TAPE_BINOP,
    TAPE_CONST,
    TAPE_FORWARD,
    Evaluator,
    ExprError,
)
from nem.dialect.ops import LoopOp

Printed = tuple[str, str, str]
"""Domain, offset and extent as isl prints them."""


def printed_form(
    memo: BoundedCache[tuple[object, ...], Printed],
    ev: Evaluator,
    loops: Sequence[LoopOp],
    offset: SSAValue,
    extent: SSAValue,
    nest: Callable[[], Nest],
) -> Printed:
    """The printed form of an access of a task in `loops`; on a miss, built
    on the task's `nest` (raising what building its isl objects raises)."""

    def build() -> Printed:
        n = nest()
        return str(n.domain), str(n.expr(offset)), str(n.expr(extent))

    try:
        key = shape_key(ev, loops, (offset, extent))
    except ExprError:
        key = None  # a constant division by zero: isl's path raises it
    if key is None:
        return build()
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = build()
    return hit


MAX_TREE = 256
"""Nodes a key's tree may have, shared subtrees counted each time: a tape
is a DAG (`let a2 = a1 + a1` chains, issue 11), whose tree, which hashing
and comparing a key walk, can be exponentially larger."""


def shape_key(
    ev: Evaluator, loops: Sequence[LoopOp], values: Sequence[SSAValue]
) -> tuple[object, ...] | None:
    """The bounds of `loops` (outermost first) and `values` as trees: a
    constant is its int, loop variable k of `loops` is `("i", k)`, an
    operator `(symbol, left, right)`; any other operand is a new object, a
    key equal to no other.  None when a tree is larger than `MAX_TREE`."""
    depth: dict[SSAValue, int] = {lp.block.args[0]: k for k, lp in enumerate(loops)}
    trees = [_tree(ev, v, depth) for lp in loops for v in (lp.lower, lp.upper)]
    trees += [_tree(ev, v, depth) for v in values]
    return None if any(t is None for t in trees) else tuple(trees)


def _tree(ev: Evaluator, value: SSAValue, depth: Mapping[SSAValue, int]) -> object | None:
    s = ev.static(value)
    if s is not None:
        return s
    regs: list[object] = []
    sizes: list[int] = []
    for kind, x, y, z in ev.tape(value):
        if kind == TAPE_CONST:
            regs.append(x)
            sizes.append(1)
        elif kind == TAPE_ARG:
            k = depth.get(x)
            regs.append(object() if k is None else ("i", k))
            sizes.append(1)
        elif kind == TAPE_FORWARD:
            regs.append(regs[x])
            sizes.append(sizes[x])
        elif kind == TAPE_BINOP:
            size = 1 + sizes[y] + sizes[z]
            if size > MAX_TREE:
                return None
            regs.append((x, regs[y], regs[z]))
            sizes.append(size)
        else:
            regs.append(object())
            sizes.append(1)
    return regs[-1]
