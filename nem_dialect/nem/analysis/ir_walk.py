"""Lists of a block's ops and of a walk, read along xDSL's public op links
(`Block.first_op`, `Operation.next_op`).

xDSL iterates a block through an iterator object (several Python calls an
op: 3x slower than following the links) and walks through nested
generators (one resume per op and level); the analyses and passes that read a whole lowered
program (hundreds of thousands of ops, most of them the `arith` index
constants of its regions) walk it many times: that machinery was 8% of
DenseNet-121's compile (issue 30).  These give the same ops in the same
order (`block.ops`, `op.walk()`: preorder, regions and blocks in order) as
lists, for callers that do not change the IR while they go through it."""

from __future__ import annotations

from typing import TypeVar

from xdsl.ir import Block, Operation

from nem.dialect.per_class import PerClass, subclass_table

_Op = TypeVar("_Op", bound=Operation)


def block_ops(block: Block) -> list[Operation]:
    """`list(block.ops)`."""
    out: list[Operation] = []
    op = block.first_op
    while op is not None:
        out.append(op)
        op = op.next_op
    return out


def walk_ops(root: Operation) -> list[Operation]:
    """`list(root.walk())`: `root`, then the ops nested in it, preorder."""
    out: list[Operation] = [root]
    _walk_into(root, out)
    return out


def _walk_into(root: Operation, out: list[Operation]) -> None:
    for region in root.regions:
        for block in region.blocks:
            op = block.first_op
            while op is not None:
                out.append(op)
                if op.regions:
                    _walk_into(op, out)
                op = op.next_op


def ops_of(root: Operation, base: type[_Op]) -> list[_Op]:
    """`[op for op in root.walk() if isinstance(op, base)]`, deciding
    `issubclass` once per op class: isinstance on xDSL's (ABC) op classes
    runs Python code, and the device checks asked it of every op of a
    lowered CNN in five walks (issue 30)."""
    hit = subclass_table(base)
    return [op for op in walk_ops(root) if hit[type(op)]]  # type: ignore[misc]


def ops_by_base(root: Operation, bases: tuple[type[Operation], ...]) -> list[list[Operation]]:
    """`[ops_of(root, base) for base in bases]` in one walk: the device
    checks each wanted one class of a lowered CNN's ops (its tasks, compute
    ops, buffers) and walked its hundreds of thousands of ops once per rule
    (a third of `nem-verify-device` on DenseNet-121, issue 30)."""
    which = PerClass(lambda cls: tuple(i for i, b in enumerate(bases) if issubclass(cls, b)))
    out: list[list[Operation]] = [[] for _ in bases]
    for op in walk_ops(root):
        for i in which[type(op)]:
            out[i].append(op)
    return out
