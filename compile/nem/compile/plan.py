"""How the transform route tiles one linalg op: its `Plan`.

A module of its own, below `nem.compile.transform` (which makes the plans)
and `nem.compile.fusion` (which rewrites them for a fused op), so that both
type them without importing each other (no import cycle, issue 36)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


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

    def part_extents(self, k: int) -> list[int]:
        if len(self.engines) == 1:
            return self.extents
        ext = list(self.extents)
        ext[self.split_dim] = min(self.chunk, self.extents[self.split_dim] - k * self.chunk)
        return ext
