"""`dce`: xDSL's dead code elimination, its live set found in one pass
(D-COMPILE-DCE-ONEPASS).

xDSL's `region_dce` sweeps the whole region until no op turns live, each
sweep asking every op not yet live whether it would be trivially dead and
testing liveness in a set of ops (whose hash is Python code): two full sweeps
at least, 1.3 s each time `nem-compile` runs it on DenseNet-121.  The live
set is the least fixpoint of "an op is live if it would not be trivially dead
or a live op uses one of its results"; this pass computes the same fixpoint
with one walk (each op asked once, in xDSL's order: a region's blocks
reachable from its entry, post order, ops last to first) and a worklist over
the operands of live ops, then deletes exactly as xDSL's `delete_dead` does:
when every region has one block (the lowering's programs), by erasing the
dead ops in the order the walk met them (`_erase_in_order`, the order
`delete_dead` erases them in), without walking the IR a second time.
Whether an op would be trivially dead is asked once per class when its
memory effect traits are constant ones (`_FIXED_EFFECTS`): the answer of
xDSL's `would_be_trivially_dead` then depends on the class's traits only.
`test/unit/test_dce.py` checks that both leave the same module.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, OpResult, Region
from xdsl.ir.post_order import PostOrderIterator
from xdsl.traits import (
    MemoryAllocEffect,
    MemoryEffect,
    MemoryFreeEffect,
    MemoryReadEffect,
    MemoryWriteEffect,
    NoMemoryEffect,
)
from xdsl.transforms.dead_code_elimination import DeadCodeElimination, would_be_trivially_dead

_FIXED_EFFECTS = frozenset(
    t.get_effects.__func__  # type: ignore[attr-defined]
    for t in (
        NoMemoryEffect,
        MemoryReadEffect,
        MemoryWriteEffect,
        MemoryAllocEffect,
        MemoryFreeEffect,
    )
)
"""The `get_effects` of the memory effect traits whose effects are the same
for every op (a constant set, no value; `Pure` inherits `NoMemoryEffect`'s):
an op whose effect traits all have one of these would be trivially dead or
not by its class alone."""


def live_ops(region: Region, order: list[Operation] | None = None) -> set[int]:
    """The ids of the ops of `region` (nested ones too) that xDSL's
    `region_dce` keeps: those its sweeps visit and find live.  `order`
    gets the ops visited, in the order visited, when every region has one
    block (else it is cleared)."""
    visited: set[int] = set()  # the ops xDSL's sweeps reach, by id (alive: in the IR)
    live: set[int] = set()
    single = order is not None  # every region swept so far has one block
    work: list[Operation] = []
    by_class: dict[type[Operation], bool | None] = {}  # None: ask each op

    def dead(op: Operation) -> bool:
        cls = type(op)
        if cls not in by_class:
            fixed = all(
                type(t).get_effects.__func__ in _FIXED_EFFECTS  # type: ignore[attr-defined]
                for t in op.get_traits_of_type(MemoryEffect)  # type: ignore[type-abstract]
            )
            by_class[cls] = would_be_trivially_dead(op) if fixed else None
        known = by_class[cls]
        return would_be_trivially_dead(op) if known is None else known

    def sweep(region: Region) -> None:
        nonlocal single
        first = region.first_block
        if first is None:
            return
        single = single and first.next_block is None
        for block in PostOrderIterator(first):
            for op in reversed(block.ops):
                for r in op.regions:
                    sweep(r)
                visited.add(id(op))
                if single:
                    order.append(op)  # type: ignore[union-attr]
                if not dead(op):
                    live.add(id(op))
                    work.append(op)

    sweep(region)
    if order is not None and not single:
        order.clear()
    while work:
        for operand in work.pop().operands:
            if type(operand) is OpResult:
                d = operand.op
                i = id(d)
                if i not in live and i in visited:
                    live.add(i)
                    work.append(d)
    return live


def _delete_dead(region: Region, live: set[int]) -> None:
    """xDSL's `LiveSet.delete_dead` (no listener), liveness by id."""
    first = region.first_block
    if first is None:
        return
    for block in reversed(region.blocks):
        if block != first and not any(id(op) in live for op in block.ops):
            region.erase_block(block, safe_erase=False)
            continue
        for operation in reversed(block.ops):
            if id(operation) not in live:
                block.erase_op(operation, safe_erase=False)
            else:
                for r in operation.regions:
                    _delete_dead(r, live)


def _erase_in_order(order: list[Operation], live: set[int], root: Operation | None) -> None:
    """`_delete_dead` of a region whose regions all have one block, given
    the ops `live_ops` visited in order: it erases, in the same order, the
    ops not live whose enclosing ops below `root` are all live (the sweep
    and `_delete_dead` both go through a block last op first, and a dead
    op's nested ops go with it).  The IR is not walked again: a program
    with nothing dead is left at one comprehension."""
    for op in [op for op in order if id(op) not in live]:
        p = op.parent_op()
        while p is not None and p is not root and id(p) in live:
            p = p.parent_op()
        if p is root:
            block = op.parent_block()
            assert block is not None
            block.erase_op(op, safe_erase=False)


def region_dce(region: Region) -> None:
    """Delete the ops of `region` that xDSL's `region_dce` deletes."""
    order: list[Operation] = []
    live = live_ops(region, order)
    if order:
        _erase_in_order(order, live, region.parent_op())
    else:  # a region of several blocks somewhere (or no op)
        _delete_dead(region, live)


class OnePassDeadCodeElimination(DeadCodeElimination):
    """`dce` (xDSL's pass, same name and result), its live set in one pass."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        region_dce(op.body)
