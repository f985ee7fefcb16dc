"""Which ops of a block may write a buffer: the views of a memref, its root,
and a per-block analysis of the writers of each root.

A transformation that moves a read of a buffer past other ops (a fused
prologue reads its inputs at the convolution's place, `fusion_groups`; a
fused elementwise chain reads its producer's inputs at the consumer's,
`chains`; a shared staged copy reads its source once for two tiles,
`hoist.share_copies`) is exact only when no op between the two places may
write any view of that buffer.  Asking that by walking the buffer's uses
for each query costs the buffer's views per query: a DenseNet block's
concatenation has a view per layer and each layer asks, quadratic in the
block.  `Writers` records instead, in one walk over the block, the
positions of the ops that may write each root; a query is a binary search.

"May write" is conservative: a linalg op writes its outputs (reads its
inputs), a view writes nothing (its uses are its source's), any other op
using a memref writes it.  An op nested in one of the block's ops (inside a
loop) counts at its ancestor's position; ops outside the block do not run
between two of its ops and are not recorded.
"""

from __future__ import annotations

from bisect import bisect_right

from mlir import ir

from nem.compile.nest_ir import owner_op

VIEWS = (
    "memref.view",
    "memref.subview",
    "memref.cast",
    "memref.collapse_shape",
    "memref.expand_shape",
    "memref.reinterpret_cast",
)
"""Ops that view their source memref's bytes (their uses are the source's uses)."""


def root_of(v: ir.Value) -> ir.Value:
    """The memref whose bytes `v` views (through view-like ops)."""
    op = owner_op(v)
    while op is not None and op.name in VIEWS:
        v = op.operands[0]
        op = owner_op(v)
    return v


def linalg_inputs(op: ir.Operation) -> int:
    """How many of a linalg op's operands are inputs (the rest: outputs)."""
    seg = op.attributes["operandSegmentSizes"]
    return int(ir.DenseI32ArrayAttr(seg)[0])


def _written(op: ir.Operation) -> list[ir.Value]:
    """The memref operands `op` may write (module doc)."""
    if op.name in VIEWS:
        return []
    operands = list(op.operands)
    if op.name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
        operands = operands[linalg_inputs(op) :]
    return [v for v in operands if isinstance(v.type, ir.MemRefType)]


class Writers:
    """The positions of the ops of `block` that may write each root buffer
    (module doc), built in one walk; valid while the block's ops keep their
    order (`place` records an op put at an existing op's position)."""

    def __init__(self, block: ir.Block) -> None:
        self.at: dict[ir.Operation, int] = {}
        self._by_root: dict[ir.Value, list[int]] = {}
        for k, top in enumerate(block.operations):
            self.at[top.operation] = k

            def visit(op: ir.Operation, k: int = k) -> ir.WalkResult:
                for v in _written(op):
                    self._by_root.setdefault(root_of(v), []).append(k)
                return ir.WalkResult.ADVANCE

            top.operation.walk(visit)

    def place(self, op: ir.Operation, k: int) -> None:
        """`op` now stands at position `k` (it replaced the op there), writing
        what its operands say."""
        self.at[op] = k
        for v in _written(op):
            positions = self._by_root.setdefault(root_of(v), [])
            if k not in positions:
                positions.insert(bisect_right(positions, k), k)

    def between(self, v: ir.Value, first: ir.Operation, last: ir.Operation) -> bool:
        """Whether an op strictly between `first` and `last` (ops of the
        block) may write the buffer `v` views, through any view of it."""
        positions = self._by_root.get(root_of(v), [])
        i = bisect_right(positions, self.at[first])
        return i < len(positions) and positions[i] < self.at[last]
