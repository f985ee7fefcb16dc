"""`arith`'s rounding modes (MLIR 22's `roundingmode` of `arith.truncf`).

xDSL 0.74 keeps the attribute as a plain integer; this is the one place
that names its values.  Both the lowering (which raises only the default
mode to NEM `cast`, D-LOW-CAST) and the runtime's escape-hatch kernels
(which round to nearest even only, D-RT-MLIR-ROUNDING) ask `other_rounding`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation

ROUNDING_MODES = ("to_nearest_even", "downward", "upward", "toward_zero", "to_nearest_away")
"""`arith::RoundingMode` by value."""


def other_rounding(op: Operation) -> str | None:
    """The name of `op`'s rounding mode when it is not to_nearest_even (the
    default, also when the attribute is absent), else None."""
    mode = op.properties.get("roundingmode") or op.attributes.get("roundingmode")
    if mode is None:
        return None
    value = mode.value.data if isinstance(mode, IntegerAttr) else None
    if value == 0:
        return None
    return (
        ROUNDING_MODES[value]
        if value is not None and 0 <= value < len(ROUNDING_MODES)
        else str(mode)
    )
