"""`nem-mark-tile-loops` (D-LOW-TILES, D-LOW-AFFINE): the loops the
conversion keeps as NEM loops around raised tiles (`tile_loops.tile_loop`)
marked `nem_lowering.tile_loop` before `nem-fold-index-arith`, which then
folds their index arithmetic too, and the conversion reads the mark
instead of deciding on the rewritten body:

    affine.for %t = 0 to 32 step 8 { ... }
    -> affine.for %t = 0 to 32 step 8 { ... } {nem_lowering.tile_loop}

The decision reads the loop's body as written: a nest perfect up to index
arithmetic that `match_nest` cannot raise as a whole (an offset that
`arith.addi` computes, which it does not evaluate) is a tile loop, and the
same body with that offset an `affine.apply` may be raisable.  So it is
taken here, on the body before the fold, by the conversion's walk
(`ConversionWalk` with `all_index_values`: every index value the
conversion binds, `arith` index arithmetic and min/max evaluated as its
handlers do, async payloads; `async.execute` bodies and loops carrying
only tokens followed as it lowers them; `MemrefRoots`' buffers) and kept
in the IR, as `nem-drop-token-awaits` keeps `nem_lowering.structural`.

A loop lowered in several copies (in a loop that may be peeled, or a
re-rolled pipeline and its last iteration) is decided once per copy, as
the conversion binds each copy's index values, and marked only when every
copy decides it a tile loop.  A loop the walk does not decide in every
copy (one it does not reach: in a loop carrying other values, an `scf` or
`affine.if` region; one using an index value it does not evaluate; one
lowered as a nest in some copy) stays unmarked: the conversion decides it
as before, and the fold leaves its body as written (`LoweredOneByOne`),
so it decides on what it always did.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.passes import ModulePass

from nem.passes.lowering.conversion_walk import ConversionWalk
from nem.passes.lowering.prepare import entry_function
from nem.passes.lowering.structure import TILE_LOOP


@dataclass(frozen=True)
class MarkTileLoopsPass(ModulePass):
    """Mark `nem_lowering.tile_loop` the loops of the entry function the
    conversion keeps around raised tiles, as it would decide them
    (D-LOW-TILES), before `nem-fold-index-arith` rewrites their bodies.

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-mark-tile-loops"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # with all the conversion's index values: the fold rewrites the body
        # of a tile loop it marks, not of a loop it leaves undecided
        decided = ConversionWalk(entry_function(op, self.entry), all_index_values=True).tile_loops
        for loop, kept in decided.items():
            if kept is True:  # (None: undecided in a copy)
                loop.attributes[TILE_LOOP] = UnitAttr()
