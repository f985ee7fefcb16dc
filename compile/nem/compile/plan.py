"""How the transform route tiles one linalg op: its `Plan`.

A module of its own, below `nem.compile.transform` (which makes the plans)
and `nem.compile.fusion` (which rewrites them for a fused op), so that both
type them without importing each other (no import cycle, issue 36)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Plan:
    """How one linalg op is tiled: its loops' extents, tile sizes, and the
    engine of each part (one part when the op is not split)."""

    extents: list[int]
    sizes: list[int]
    engines: list[int]
    split_dim: int = 0
    chunk: int = 0
    """Parts 0..n-2 have `chunk` iterations of loop `split_dim`, the last the rest."""
    partials: bool = False
    """A sum over loop `split_dim`: privatized (`transform._privatize`) before tiling."""
    resize: Callable[[int], list[int]] | None = field(default=None, compare=False)
    """Tile sizes for another L1 budget (D-COMPILE-L1)."""
    narrow: frozenset[int] = frozenset()
    """The reduction loops of an f16 or bf16 result, which no tile may cut
    (`engines.narrow_sums`, D-COMPILE-TILES)."""
    own: Callable[[int], list[int]] | None = field(default=None, compare=False)
    """Where `sizes` are the user's `--tile-sizes` (which `resize` keeps):
    the compiler's own sizes for a budget, from which a refusal's fix takes
    sizes that fit (`l1_plan.smaller_fit`)."""
    one_tile: list[int] | None = None
    """Where `tile_cost.channel_cut` cut a part of one tile along its output
    channels: that one tile's sizes (`transform._tile_op` tiles it
    instead where L1 re-tiles it and `retiled` prefers that)."""
    retiled: Callable[[list[int]], bool] | None = field(default=None, compare=False)
    """With `one_tile`: whether the tiles L1 makes of that one tile run
    better than the cut (`tile_cost.retiled_wins`)."""

    def part_extents(self, k: int) -> list[int]:
        if len(self.engines) == 1:
            return self.extents
        ext = list(self.extents)
        ext[self.split_dim] = min(self.chunk, self.extents[self.split_dim] - k * self.chunk)
        return ext

    def whole(self, budget: int) -> Plan:
        """This plan with its one tile a part again (`one_tile`, for the first
        L1 budget `budget`; smaller budgets' sizes as before) where
        `tile_cost.channel_cut` cut it: where the next contraction is one
        tile a part (the cut's tile loop would hold back that one's copies
        until its last iteration is issued, session 45), or where L1
        re-tiles that one tile (`l1_plan.one_tile_retiled`)."""
        sizes, again = self.one_tile, self.resize
        if sizes is None or again is None:
            return self

        def resize(b: int) -> list[int]:
            return list(sizes) if b == budget else again(b)

        return replace(self, sizes=list(sizes), resize=resize, one_tile=None, retiled=None)
