"""The element types of NEM (SPEC §3; TYPE-01, TYPE-02, TYPE-05; D-RT-I4): spec
name, bit width, float/signed, the xDSL type, the MLIR spelling and the numpy
/ ml_dtypes dtype, in one table that the attributes, the opcode registry, the
checker, the runtime and the front ends read (below the IR's attributes, so
that they can).

numpy and ml_dtypes load on the first read of a dtype (`ElemType.dtype`,
`ELEM_DTYPES`), not with this module: parsing, checking and printing a
program need none, and the two cost a quarter of `nem-opt`'s start-up."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class ElemType:
    """One element type of the spec.  `dtype` is the numpy dtype values have
    in kernels and typed views (`i4` is unpacked to int8 values in [-8, 7];
    in memory it is packed two per byte, D-RT-I4)."""

    name: str
    bits: int
    is_float: bool
    signed: bool
    dtype_name: str
    """numpy's name of `dtype` (`"<f2"`; ml_dtypes' `"bfloat16"`)."""
    mlir: str

    @cached_property
    def dtype(self) -> np.dtype:
        import numpy as np

        if self.dtype_name == "bfloat16":
            import ml_dtypes

            bf16: np.dtype = np.dtype(ml_dtypes.bfloat16)
            return bf16
        return np.dtype(self.dtype_name)

    @cached_property
    def xdsl(self) -> Attribute:
        if self.name == "f16":
            return Float16Type()
        if self.name == "bf16":
            return BFloat16Type()
        if self.name == "f32":
            return Float32Type()
        return IntegerType(self.bits, Signedness.SIGNLESS if self.signed else Signedness.UNSIGNED)

    @property
    def is_int(self) -> bool:
        return not self.is_float

    def int_range(self) -> tuple[int, int]:
        """The integer range of an integer type."""
        if self.signed:
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return 0, (1 << self.bits) - 1


def _e(
    name: str, bits: int, is_float: bool, signed: bool, dtype: str, mlir: str | None = None
) -> ElemType:
    return ElemType(name, bits, is_float, signed, dtype, mlir or name)


ELEM_TYPES: dict[str, ElemType] = {
    e.name: e
    for e in (
        _e("i4", 4, False, True, "i1"),
        _e("i8", 8, False, True, "i1"),
        _e("i16", 16, False, True, "<i2"),
        _e("i32", 32, False, True, "<i4"),
        _e("u8", 8, False, False, "u1", "ui8"),
        _e("u16", 16, False, False, "<u2", "ui16"),
        _e("u32", 32, False, False, "<u4", "ui32"),
        _e("f16", 16, True, True, "<f2"),
        _e("bf16", 16, True, True, "bfloat16"),
        _e("f32", 32, True, True, "<f4"),
    )
}
"""The spec's element types in its order of listing (TYPE-01)."""

ELEM_NAMES: tuple[str, ...] = tuple(ELEM_TYPES)
INT_ELEMS: tuple[str, ...] = tuple(n for n, e in ELEM_TYPES.items() if e.is_int)
FLOAT_ELEMS: tuple[str, ...] = tuple(n for n, e in ELEM_TYPES.items() if e.is_float)
ELEM_BITS: dict[str, int] = {n: e.bits for n, e in ELEM_TYPES.items()}
ELEM_DTYPES: dict[str, np.dtype]
"""The dtype of each element type, made on first read (`__getattr__`)."""
_BY_XDSL: dict[Attribute, str] = {e.xdsl: n for n, e in ELEM_TYPES.items()}


def __getattr__(name: str) -> object:
    if name == "ELEM_DTYPES":
        dtypes = {n: e.dtype for n, e in ELEM_TYPES.items()}
        globals()["ELEM_DTYPES"] = dtypes
        return dtypes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def elem_of_xdsl(attr: Attribute) -> str | None:
    """The spec's name of an xDSL builtin element type, or None."""
    return _BY_XDSL.get(attr)


def elem_bytes(name: str, count: int) -> int:
    """Bytes that `count` packed elements occupy (TYPE-02: ceil for sub-byte types)."""
    return -(-count * ELEM_TYPES[name].bits // 8)


def elem_of_dtype(dtype: np.dtype) -> str | None:
    """The spec's name of the element type whose values numpy holds in
    `dtype` (int8 is `i8`, not the packed `i4`), or None."""
    return next(
        (n for n, e in ELEM_TYPES.items() if n != "i4" and e.dtype == dtype),
        None,
    )


def dtype_mismatch(dtype: np.dtype, elem: str, target: str, fix: str = "") -> str | None:
    """Why an array of numpy `dtype` cannot give the values of `target` (a
    buffer, region or port as an error names it) of element type `elem`, or
    None (`fix`: the caller's other remedy, after the first): the one rule of `nem-run --input`, `write_tensor`, `nem-opt
    --embed` and `python -m nem.compile.check` (its `--input` and `--output`
    files).  The dtype must be the element type's, in its byte order: a
    big-endian `>f4` file holds float32 values, but its bytes read as they
    are are other numbers (an outside user, session 66: check passed one to
    onnxruntime as it was and called the program's right output a MISMATCH),
    so it is refused with the conversion that fixes it."""
    want = ELEM_TYPES[elem].dtype
    if dtype == want:
        return None
    a = "an" if str(dtype)[0] in "aeiou" else "a"
    why = f"{a} {dtype} array does not match {target}: write an array of {elem} ({want}){fix}"
    if dtype.byteorder == ">" and dtype.newbyteorder("<") == want:
        why += f"; its values are big-endian: numpy's a.astype('{want.str}') converts them"
    return why
