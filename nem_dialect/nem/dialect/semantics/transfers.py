"""What a transfer moves (SPEC §3 Region Type Syntax, §5 transfer.async;
D-SEM-TRANSFER): a typed region its elements, an untyped one its byte range."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nem.dialect.elements import ELEM_TYPES

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


def fills_range(
    elem: str, shape: Sequence[int], strides: Sequence[int] | None, extent: int
) -> bool:
    """Whether a typed region's elements are exactly its byte range
    `[offset, offset + extent)`: row-major over its shape (no strides, or
    strides that step as row-major ones do; a dimension of size 1 steps
    nothing) and no byte of the extent left over (for i4: whole bytes).
    Such a region moves the same bytes typed or not; only such a typed
    region may face an untyped one in a transfer (TASK-07)."""
    if strides is not None:
        step = 1
        for d in reversed(range(len(shape))):
            if shape[d] != 1 and strides[d] != step:
                return False
            step *= shape[d]
    count = math.prod(shape)
    return count * ELEM_TYPES[elem].bits == 8 * extent


def moved_count(
    elem: str | None, shape: Sequence[int] | None, strides: Sequence[int] | None, extent: int
) -> int:
    """How many bytes `moved_bytes` names, without listing them: what a
    transfer costs in the timed mode (D-RT-COST).  A strided region moves
    its elements' bytes, not the span they lie in (a [1, 14, 56, 12] f32 box
    in a [.., 56, 192] array moves 37,632 bytes of a 601,392-byte span)."""
    if elem is None or not shape:
        return extent
    bits = ELEM_TYPES[elem].bits
    if bits < 8 and strides is not None and not fills_range(elem, shape, strides, extent):
        return len(moved_bytes(elem, shape, strides, extent))  # nibbles share bytes
    return -(-math.prod(shape) * bits // 8)


def moved_bytes(
    elem: str | None, shape: Sequence[int] | None, strides: Sequence[int] | None, extent: int
) -> npt.NDArray[np.int64]:
    """The bytes of a region a transfer reads (source) or writes
    (destination), as offsets from the region's offset, in the order they
    are moved: an untyped region (or a typed one without a shape) its whole
    range; a typed region its elements in row-major order of its shape
    (addressed by its strides, else row-major), each element's bytes in
    address order (i4: the bytes holding its elements' nibbles).  The
    gaps between strided elements and any extent past the last element are
    not moved.  The runtime copies these (`nem.runtime.task_effects.prepare_move`);
    the checker's access range `[offset, offset + extent)` holds them
    (D-HAZ-ACCESS)."""
    import numpy as np  # (only the runtime and the hazard checker move bytes)

    if elem is None or not shape:
        return np.arange(extent, dtype=np.int64)
    if strides is None:
        strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    grid = np.indices(shape).reshape(len(shape), -1)
    index = np.asarray(strides, dtype=np.int64) @ grid  # element index, row-major order
    bits = ELEM_TYPES[elem].bits
    if bits < 8:  # each byte holding an element's nibble, once, in element order
        byte = index * bits // 8
        _, first = np.unique(byte, return_index=True)
        out: npt.NDArray[np.int64] = byte[np.sort(first)]
        return out
    size = bits // 8
    return (index[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)
