"""Which ops the conversion may lower more than once (D-LOW-OUTLINE,
D-LOW-PEEL): `PeeledLoops`, an analysis computed once per function.

A loop whose last tile is partial is peeled: the conversion lowers its body
once for the full tiles (the loop variable `lb + v * step`) and once more
for the last tile (a constant), so a loop nest in that body is decided once
per copy, on different index values, and the two decisions may differ (a
`min` bound resolved only in the last tile).  A pass deciding ahead of the
conversion (`nem-outline-kernels`) sees the nest once; it leaves the nests
inside a loop that may be peeled to the conversion, which decides each copy
(`decided_per_copy`).

Whether a loop is peeled depends on the index values outside it (the
conversion's `partial_tile_op`); which loops may be is structural: only a
loop with a partial-tile candidate in its body (an `affine.min`/`max`, an
inner `affine.for` with a min/max bound: `is_partial_bound`, the ops
`partial_tile_op` returns) is peeled, unless `nem-reroll-pipelines` put its
last iteration after it (that epilogue is ops of its own, lowered once).
So the loops `may_peel` names include every loop the conversion peels.
"""

from __future__ import annotations

from xdsl.dialects import affine, func
from xdsl.ir import Operation

from nem.passes.lowering.partial_tiles import is_partial_bound
from nem.passes.lowering.reroll import last_iteration


class PeeledLoops:
    """The `affine.for`s of function `fn` the conversion may peel, found in
    one walk (each op is visited once, whatever the nesting depth)."""

    def __init__(self, fn: func.FuncOp) -> None:
        self.loops: set[affine.ForOp] = set()
        self._candidates(fn)

    def _candidates(self, op: Operation) -> bool:
        """Whether `op` or an op inside it is a partial-tile candidate;
        records the loops with one inside."""
        inside = False
        for region in op.regions:
            for block in region.blocks:
                for o in block.ops:
                    inside = self._candidates(o) or inside
        if inside and isinstance(op, affine.ForOp) and last_iteration(op) is None:
            self.loops.add(op)
        return inside or is_partial_bound(op)

    def may_peel(self, loop: affine.ForOp) -> bool:
        return loop in self.loops

    def decided_per_copy(self, op: Operation) -> bool:
        """Whether `op` is inside a loop the conversion may peel, so that
        it may be lowered (and decided) once per copy."""
        parent = op.parent_op()
        while parent is not None:
            if isinstance(parent, affine.ForOp) and parent in self.loops:
                return True
            parent = parent.parent_op()
        return False
