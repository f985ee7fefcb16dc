"""The warning for weights of zeros that make a model ignore its input
(D-COMPILE-ZERO-WEIGHTS): one line, whichever front end found them (the
ONNX importer names nodes, `nem.compile`'s MLIR input names ops at
`file:line:col`)."""

from __future__ import annotations

SHOWN = 3
"""Weights named in the warning; the others are counted."""


def warning(file: str, subjects: list[str], unit: str = "node") -> str | None:
    """One line naming the first `SHOWN` of `subjects` (each "UNIT ... by
    'WEIGHT'"), or None when there are none; `unit` is what multiplies
    ("node", "op")."""
    if not subjects:
        return None
    names = "; ".join(subjects[:SHOWN])
    more = f" and {len(subjects) - SHOWN} more" if len(subjects) > SHOWN else ""
    count = (
        f"1 {unit} multiplies the model's data by a weight of zeros, so it computes "
        "without its input"
        if len(subjects) == 1
        else f"{len(subjects)} {unit}s multiply "
        "the model's data by weights of zeros, so they compute without their inputs"
    )
    return (
        f"{file}: warning: {count}: {names}{more}; was the model exported before its "
        "trained parameters were loaded? (D-COMPILE-ZERO-WEIGHTS)"
    )
