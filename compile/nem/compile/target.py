"""What the compile takes from its target: the memory space tiles are
staged in, and the element types a device's variants of an opcode take
(`softmax`, `conv2d`)."""

from __future__ import annotations

from collections.abc import Iterable, Set
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from nem.dialect.family_model import VariantRef

FAST_SPACE = 2
"""The memref memory space of tiles staged in L1 (`2:L1[0]` in the lowering's map;
engine k's L1 is space 2 + k)."""


class VariantTarget(Protocol):
    """What `softmax_types` asks of a target: a `Device`, or a stand-in
    without its variants (`nem.compile.runnable` decomposes every softmax)."""

    def effective_for_family(self, family_ids: str | Iterable[str]) -> Set[VariantRef]: ...


def variant_types(device: VariantTarget, opcode: str) -> frozenset[str]:
    """Element types (`f16`, ...) of the device's variants of the type
    families the registry gives `opcode`: where a task of another type
    runs as an escape-hatch kernel (D-LOW-OUTLINE)."""
    from nem.dialect.ops import COMPUTE_OPS

    families = COMPUTE_OPS[opcode].SPEC.families
    return frozenset(r.inst[0] for r in device.effective_for_family(families) if r.inst)


def softmax_types(device: VariantTarget) -> frozenset[str]:
    """`variant_types` of `softmax` (D-COMPILE-SOFTMAX; here, not in
    `nem.compile.softmax`, so that the import needs no MLIR bindings before
    conversion, D-COMPILE-EARLY-UNSUPPORTED)."""
    return variant_types(device, "softmax")
