"""Which rule a compute task's type-family mismatch breaks (FAM-01..24,
QUANT-07..10): the most specific one, so that a diagnostic points the user at
the family definition that explains it (`TaskRules`, nem.dialect.families).
"""

from __future__ import annotations

from nem.dialect.family_model import VariantRef

_FAMILY_RULES = {
    "conv2d.float": "FAM-03",
    "conv2d.int8": "FAM-04",
    "conv2d.int4": "FAM-05",
    "gemm.float": "FAM-06",
    "gemm.int8": "FAM-07",
    "gemm.int4": "FAM-08",
    "eltwise": "FAM-13",
    "view": "FAM-15",
    "norm": "FAM-18",
    "softmax": "FAM-19",
    "cast": "FAM-20",
    "quantize": "FAM-21",
    "dequantize": "FAM-22",
    "pool": "FAM-23",
}
"""The rule that defines each baseline family's typing (FAM-03..23)."""

_BINARY_ELTWISE = frozenset({"add", "sub", "mul", "div", "min", "max", "pow"})
_BIAS_BINDINGS = {"conv2d": "B", "gemm": "C"}


def family_rule(opcode: str, nearest: VariantRef | None, differences: list[str]) -> str:
    """The most specific rule a family mismatch breaks, so the diagnostic
    points the user at the family definition that explains it: accum (FAM-12),
    quant (QUANT-07/08/09/10), bias presence (FAM-10) and type (FAM-11), then
    the element types of the nearest family (FAM-03..23, FAM-14 for mixed
    binary eltwise); FAM-01 when no family is near."""
    text = " ".join(differences)
    family = nearest.family if nearest is not None else ""
    if "accum" in text:
        return "FAM-12"
    if "quant" in text:
        if "must carry" not in text:
            return "QUANT-09"
        if family in ("quantize", "dequantize"):
            return "QUANT-10"
        if (
            family.endswith(".int4")
            and ("'W'" in text or "'B'" in text)
            and not any("'X'" in d or "'A'" in d for d in differences if "must carry" in d)
        ):
            return "QUANT-08"
        return "QUANT-07"
    bias = _BIAS_BINDINGS.get(family.split(".")[0])
    if bias is not None and f"operand '{bias}'" in text:
        if "missing" in text or "is given but" in text:
            return "FAM-10"
        if family.endswith((".int8", ".int4")) and "needs i32" in text:
            return "FAM-11"
    if "absent" in text or "must not be given" in text:
        return "FAM-10"
    if family == "eltwise" and opcode in _BINARY_ELTWISE:
        return "FAM-14"
    return _FAMILY_RULES.get(family, "FAM-01")
