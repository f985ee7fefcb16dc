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

from xdsl.ir import Block, Operation


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
