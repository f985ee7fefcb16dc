"""What the compile takes from its target: the memory space tiles are
staged in, and the element types a device's `softmax` variants take."""

from __future__ import annotations

FAST_SPACE = 2
"""The memref memory space of tiles staged in L1 (`2:L1[0]` in the lowering's map;
engine k's L1 is space 2 + k)."""


def softmax_types(device) -> frozenset[str]:
    """Element types (`f16`, ...) of the device's variants of the type
    families the registry gives `softmax` (D-COMPILE-SOFTMAX; here, not in
    `nem.compile.softmax`, so that the import needs no MLIR bindings before
    conversion, D-COMPILE-EARLY-UNSUPPORTED)."""
    from nem.dialect.ops import COMPUTE_OPS

    families = COMPUTE_OPS["softmax"].SPEC.families
    return frozenset(r.inst[0] for r in device.effective_for_family(families) if r.inst)
