"""DMA tag pairing (D-LOW-DMA): a pure analysis.

Upstream pairs `dma_start` and `dma_wait` only through their tag: the same
tag memref at the same tag index.  The lowering does not need the wait to
order anything (`nem-synthesize-deps` orders every conflicting access), but
a pairing it cannot establish means the program is not in a form it
understands: a start on a tag slot whose previous start may not have been
waited, a wait that may match several pending starts, and a wait without a
start in the same block are errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.diagnostics import reject


@dataclass(frozen=True)
class TagSlot:
    """One slot of a tag memref: the memref and its (symbolic) index."""

    memref: SSAValue
    index: tuple[Aff, ...]

    def may_alias(self, other: TagSlot) -> bool:
        """Same memref and indices not provably different."""
        return self.memref == other.memref and not _distinct(self.index, other.index)


def _distinct(a: Sequence[Aff], b: Sequence[Aff]) -> bool:
    for x, y in zip(a, b):
        diff = x - y
        if diff.is_const() and diff.const != 0:
            return True
    return False


@dataclass
class TagTable:
    """The DMA starts of one block not waited yet, by tag slot."""

    pending: dict[TagSlot, Operation] = field(default_factory=dict)

    def start(self, op: Operation, slot: TagSlot) -> None:
        if any(s.may_alias(slot) for s in self.pending):
            raise reject(
                op,
                "this DMA reuses a tag slot whose previous DMA has not been "
                "waited (ambiguous pairing)",
                "wait on the earlier DMA first or use another tag index",
            )
        self.pending[slot] = op

    def wait(self, op: Operation, slot: TagSlot) -> Operation:
        """The start that the wait `op` on `slot` completes."""
        others = [s for s in self.pending if s != slot and s.may_alias(slot)]
        if others:
            raise reject(
                op,
                "this dma_wait may match several pending DMAs (the tag indices "
                "cannot be told apart)",
                "use distinct constant tag indices",
            )
        start = self.pending.pop(slot, None)
        if start is None:
            raise reject(
                op,
                "no dma_start with this tag and index is pending in this block "
                "(a DMA started in another iteration or scope cannot be paired)",
                "start and wait the DMA in the same loop body, or use the form "
                "affine-pipeline-data-transfer produces",
            )
        return start
