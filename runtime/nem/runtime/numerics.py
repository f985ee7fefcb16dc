"""Element types, rounding and saturation for the reference kernels.

Decisions D-NUM-* in docs/spec-decisions.md ("Numeric semantics").  Every
helper here is vectorized numpy; nothing loops over elements.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import numpy.typing as npt

from nem.dialect.elements import ELEM_BITS, ELEM_DTYPES, FLOAT_ELEMS, INT_ELEMS

# the element-type table is nem.dialect.elements.ELEM_TYPES
DTYPES = ELEM_DTYPES
INT_TYPES = INT_ELEMS
FLOAT_TYPES = FLOAT_ELEMS
BITS = ELEM_BITS


class KernelError(Exception):
    """Base of every error a kernel raises; the engine reports it with the task."""


class NotSupported(KernelError):
    """An opcode / element-type / quant combination the reference runtime does not
    define (D-NUM-UNSUPPORTED).  The message names the opcode and the types;
    `fix`, when given, replaces the engine's generic advice."""

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix


class UserKernelError(KernelError):
    """A kernel of the user's (`NemInterpreter(kernels=...)`) failed: it raised,
    or returned something other than a list of arrays.  The message names it."""


class NumericError(KernelError):
    """A data-dependent failure: integer division by zero, i32 accumulator overflow,
    NaN quantized, gather index out of range (D-NUM-UNSUPPORTED).  `fix`, when
    given, replaces the engine's advice to check the data (an escape-hatch
    kernel's access outside a memref is its indices' fault: `outside_error`)."""

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix


def is_int(elem: str) -> bool:
    return elem in INT_TYPES


def is_float(elem: str) -> bool:
    return elem in FLOAT_TYPES


def int_range(elem: str) -> tuple[int, int]:
    b = BITS[elem]
    if elem.startswith("u"):
        return 0, (1 << b) - 1
    return -(1 << (b - 1)), (1 << (b - 1)) - 1


def float_max(elem: str) -> float:
    # ml_dtypes.finfo is not annotated
    return float(ml_dtypes.finfo(DTYPES[elem]).max)  # type: ignore[no-untyped-call]


# --- integers ---------------------------------------------------------------


def saturate_int(v: np.ndarray, elem: str) -> np.ndarray:
    """Clip an integer-valued int64 (or exact f64) array to `elem`'s range (D-NUM-INT)."""
    lo, hi = int_range(elem)
    out: np.ndarray = np.clip(v, lo, hi).astype(np.int64).astype(DTYPES[elem])
    return out


def wrap_int(v: np.ndarray, elem: str) -> np.ndarray:
    """Two's-complement wrap of an integer-valued array (int64 or integral f64) to `elem`."""
    b = BITS[elem]
    m = np.mod(v, float(1 << b)) if v.dtype.kind == "f" else np.mod(v, 1 << b)
    m = m.astype(np.int64)
    if not elem.startswith("u"):
        m = np.where(m >= (1 << (b - 1)), m - (1 << b), m)
    out: np.ndarray = m.astype(DTYPES[elem])
    return out


def rne(v: np.ndarray) -> np.ndarray:
    """Round half to even (f64 in, integral f64 out): numpy's rint."""
    out: np.ndarray = np.rint(v)
    return out


def div_rne_int(num: np.ndarray, den: np.ndarray | int) -> np.ndarray:
    """Exact integer num/den rounded half to even (den > 0), all in int64."""
    num = np.asarray(num, dtype=np.int64)
    q, r = np.divmod(num, den)  # floor division, 0 <= r < den
    twice = 2 * r
    up = (twice > den) | ((twice == den) & (q % 2 == 1))
    out: np.ndarray = q + up.astype(np.int64)
    return out


def trunc_div_int(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (b != 0), int64 (D-NUM-INT)."""
    q = np.abs(a) // np.abs(b)
    out: np.ndarray = np.where((a < 0) != (b < 0), -q, q)
    return out


# --- floats -----------------------------------------------------------------


def to_float_out(v: npt.ArrayLike, elem: str) -> np.ndarray:
    """An f64 intermediate -> f32 (RNE) -> `elem` (RNE): the f32-intermediate rule
    of D-NUM-FLOAT.  IEEE overflow gives +-inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        f = np.asarray(v, dtype=np.float64).astype(np.float32)
        return f.astype(DTYPES[elem])


def f64_to_float_exact(v: np.ndarray, elem: str) -> np.ndarray:
    """One correctly rounded (RNE) conversion of f64 values to `elem` (D-NUM-CAST).

    numpy's f64->f32 and f64->f16 conversions round once.  ml_dtypes' f64->bf16
    goes through f32 (double rounding), so bf16 uses round-to-odd to f32 first,
    which makes the following f32->bf16 rounding exact (24 >= 8 + 2 bits)."""
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if elem != "bf16":
            return v.astype(DTYPES[elem])
        f = v.astype(np.float32)
        inexact = np.isfinite(v) & np.isfinite(f) & (f.astype(np.float64) != v)
        # round toward zero, then force the last significand bit to 1 (sticky)
        toward0 = np.where(
            np.abs(f.astype(np.float64)) > np.abs(v), np.nextafter(f, np.float32(0)), f
        )
        bits = toward0.view(np.uint32) | np.uint32(1)
        odd = np.where(inexact, bits.view(np.float32), f)
        return odd.astype(DTYPES["bf16"])


def saturate_float(out: np.ndarray, src_finite: np.ndarray, elem: str) -> np.ndarray:
    """Replace overflowed infinities (from finite sources) by +-max finite."""
    mx = float_max(elem)
    ovf = np.isinf(out.astype(np.float64)) & src_finite
    if not ovf.any():
        return out
    repl = np.where(out.astype(np.float64) > 0, mx, -mx).astype(DTYPES[elem])
    return np.where(ovf, repl, out).astype(DTYPES[elem])
