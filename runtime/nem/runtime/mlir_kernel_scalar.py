"""The scalar `arith`/`math` ops of escape-hatch kernels (D-RT-MLIR-KERNEL-OPS).

xDSL's interpreter lacks these ops or implements them in a way a kernel
cannot use (Python `math` errors, integer ops that ignore the operand
width).  Here every integer op reads its operands at their width and wraps
its result; every float op is its binary64 value (libm's for the
transcendental ones, `LIBM_OPS`) that `mlir_kernel.KernelInterpreter` then
rounds once to the result type (`rounder`); what MLIR leaves undefined
raises `NumericError` with the message both backends give (`UNDEFINED`;
the native backend through `mlir_native_prep`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from functools import lru_cache
from math import inf as math_inf
from typing import TYPE_CHECKING, Any, NoReturn

import ml_dtypes
import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
)
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)
from xdsl.ir import Attribute, Operation

from nem.runtime.numerics import NumericError

if TYPE_CHECKING:
    from _ctypes import CFuncPtr

OPNAME = "compute op=mlir.kernel"

Reading = Callable[[int, int], int]
"""How an op reads an integer operand at a width: `as_signed` or `as_unsigned`."""

IntFn = Callable[..., int | tuple[int, int]]
"""An integer op on its operands (read at their width) and the width."""

ImplFn = Callable[[InterpreterFunctions, Interpreter, Operation, PythonValues], PythonValues]
"""An op's implementation in the kernel interpreter (xDSL's `impl` signature)."""


# Values are xDSL's: an integer of any width (i1 too) is a Python int, read
# as two's complement (a load from an unsigned region gives the unsigned
# reading; every op below re-reads its operands at their width, so both
# work); a float is a Python float (binary64) that `KernelInterpreter` rounds
# to the op's result type after the op.  What MLIR leaves undefined or poison
# (division by zero, signed division overflow, a shift by >= the width,
# fptosi/fptoui of NaN or of a value out of range, ipowi(0, negative))
# raises NumericError: such a kernel has no defined result to compare with.


def int_width(t: Attribute) -> int:
    """Bit width of an integer type; index is 64 bits (xDSL's `index_bitwidth`)."""
    return t.width.data if isinstance(t, IntegerType) else 64


def as_signed(v: int, w: int) -> int:
    v = int(v) & ((1 << w) - 1)
    return v - (1 << w) if v >> (w - 1) else v


def as_unsigned(v: int, w: int) -> int:
    return int(v) & ((1 << w) - 1)


# What MLIR leaves undefined or poison, as both backends report it (the
# native one from its trap sites, `mlir_native_prep`): kind -> message.
UNDEFINED: dict[str, Callable[..., str]] = {
    "div0": lambda: "integer division by zero",
    "sdiv_overflow": lambda a, b, w: f"signed division overflow ({a} / {b} in i{w})",
    "shift": lambda b, w: f"shift by {b} of an i{w} value",
    "ipowi0": lambda: "math.ipowi of 0 to a negative power",
    "fptoi": lambda name, x, w: f"{name} of {x} to i{w}",
    "parallel_step": lambda s: f"a parallel loop step of {s} (steps must be positive)",
    "for_step": lambda s: f"an scf.for step of {s} (steps must be positive)",
}


def undefined_error(what: str) -> NumericError:
    return NumericError(f"{OPNAME}: {what} (undefined in MLIR: the kernel has no defined result)")


OUTSIDE_FIX = (
    "the kernel's indices leave the memref, whatever the data: check the indices, "
    "offsets and sizes of its loads, stores and views against the memref's shape "
    "(and the loop bounds around them)"
)
"""The advice for an escape-hatch kernel's access outside a memref (HAZ-04)."""


def outside_error(index: Iterable[int], shape: Iterable[int]) -> NumericError:
    return NumericError(
        f"{OPNAME}: access at {list(index)} is outside the memref of shape {list(shape)} (HAZ-04)",
        OUTSIDE_FIX,
    )


def raise_undefined(what: str) -> NoReturn:
    raise undefined_error(what)


def _nonzero(b: int) -> int:
    if b == 0:
        raise_undefined(UNDEFINED["div0"]())
    return b


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(_nonzero(b))
    return q if (a >= 0) == (b >= 0) else -q


def _floor_div(a: int, b: int) -> int:
    return a // _nonzero(b)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // _nonzero(b))


def _signed_quotient(div: Callable[[int, int], int]) -> Callable[[int, int, int], int]:
    """divsi/floordivsi/ceildivsi: MIN / -1 overflows, which MLIR leaves undefined."""

    def run(a: int, b: int, w: int) -> int:
        q = div(a, b)
        if q == 1 << (w - 1):
            raise_undefined(UNDEFINED["sdiv_overflow"](a, b, w))
        return q

    return run


def _shift(shift: Callable[[int, int], int]) -> Callable[[int, int, int], int]:
    """A shift amount >= the width gives poison (MLIR)."""

    def run(a: int, b: int, w: int) -> int:
        if not 0 <= b < w:
            raise_undefined(UNDEFINED["shift"](b, w))
        return shift(a, b)

    return run


def _ipow(a: int, b: int, w: int) -> int:
    """math.ipowi as MLIR folds it: wraps for b >= 0 (0^0 = 1); for b < 0 the
    integer quotient 1 / a^-b (1, -1 or 0), with a = 0 a division by zero."""
    if b >= 0:
        return pow(a, b, 1 << w)
    if a == 0:
        raise_undefined(UNDEFINED["ipowi0"]())
    if a not in (1, -1):
        return 0
    return a if b % 2 else 1


_INT_OPS: dict[type[Operation], tuple[Reading, IntFn]] = {
    # op: (operand reading at the operand's width, fn(*operands, width)); each
    # result wraps to its type's width (a tuple for two-result ops)
    arith.MaxSIOp: (as_signed, lambda a, b, w: max(a, b)),
    arith.MinSIOp: (as_signed, lambda a, b, w: min(a, b)),
    arith.MaxUIOp: (as_unsigned, lambda a, b, w: max(a, b)),
    arith.MinUIOp: (as_unsigned, lambda a, b, w: min(a, b)),
    arith.DivSIOp: (as_signed, _signed_quotient(_trunc_div)),  # rounds toward zero
    arith.FloorDivSIOp: (as_signed, _signed_quotient(_floor_div)),
    arith.CeilDivSIOp: (as_signed, _signed_quotient(_ceil_div)),
    arith.RemSIOp: (as_signed, lambda a, b, w: a - b * _trunc_div(a, b)),  # sign of a
    arith.DivUIOp: (as_unsigned, lambda a, b, w: _floor_div(a, b)),
    arith.CeilDivUIOp: (as_unsigned, lambda a, b, w: _ceil_div(a, b)),
    arith.RemUIOp: (as_unsigned, lambda a, b, w: a % _nonzero(b)),
    arith.ShLIOp: (as_unsigned, _shift(lambda a, b: a << b)),
    arith.ShRSIOp: (as_signed, _shift(lambda a, b: a >> b)),  # arithmetic shift
    arith.ShRUIOp: (as_unsigned, _shift(lambda a, b: a >> b)),  # logical shift
    arith.AddUIExtendedOp: (as_unsigned, lambda a, b, w: (a + b, (a + b) >> w)),  # sum, carry
    arith.MulSIExtendedOp: (as_signed, lambda a, b, w: (a * b, (a * b) >> w)),  # low, high
    arith.MulUIExtendedOp: (as_unsigned, lambda a, b, w: (a * b, (a * b) >> w)),
    math.IPowIOp: (as_signed, _ipow),
    math.AbsIOp: (as_signed, lambda a, w: abs(a)),  # |MIN| wraps to MIN
    math.CountLeadingZerosOp: (as_unsigned, lambda a, w: w - a.bit_length()),
    math.CountTrailingZerosOp: (as_unsigned, lambda a, w: (a & -a).bit_length() - 1 if a else w),
    math.CtPopOp: (as_unsigned, lambda a, w: bin(a).count("1")),
    # casts: read at the input's width, wrap to the result's
    arith.ExtSIOp: (as_signed, lambda a, w: a),
    arith.ExtUIOp: (as_unsigned, lambda a, w: a),
    arith.TruncIOp: (as_signed, lambda a, w: a),
    arith.IndexCastOp: (as_signed, lambda a, w: a),
}


def _int_op(reading: Reading, fn: IntFn) -> ImplFn:
    def run(
        self: InterpreterFunctions, interpreter: Interpreter, op: Operation, args: PythonValues
    ) -> PythonValues:
        w = int_width(op.operands[0].type)
        r = fn(*(reading(a, w) for a in args), w)
        return tuple(
            as_signed(v, int_width(res.type))
            for v, res in zip(r if isinstance(r, tuple) else (r,), op.results)
        )

    return run


def _round_half_away(x: float) -> float:
    """math.round: to nearest, ties away from zero (x - trunc(x) is exact)."""
    t = np.trunc(x)
    r: float = np.copysign(t + np.sign(x) if abs(x - t) >= 0.5 else t, x)
    return r


# The transcendental math ops: the C library's (libm's) binary64 function,
# its result rounded once to the op's result type.  Both backends call the
# same function (the native one through `mlir_native_prep`), so their
# results agree bit for bit; numpy's own float64 routines differ from libm's
# in the last bit for a few percent of arguments.  op -> (C name, arity).
LIBM_OPS: dict[type[Operation], str] = {
    math.ExpOp: "exp",
    math.Exp2Op: "exp2",
    math.ExpM1Op: "expm1",
    math.LogOp: "log",
    math.Log2Op: "log2",
    math.Log10Op: "log10",
    math.Log1pOp: "log1p",
    math.CbrtOp: "cbrt",
    math.TanhOp: "tanh",
    math.CosOp: "cos",
    math.SinOp: "sin",
    math.TanOp: "tan",
    math.AtanOp: "atan",
    math.AsinOp: "asin",
    math.AcosOp: "acos",
    math.SinhOp: "sinh",
    math.CoshOp: "cosh",
    math.AtanhOp: "atanh",
    math.AsinhOp: "asinh",
    math.AcoshOp: "acosh",
    math.ErfOp: "erf",
    math.PowFOp: "pow",
    math.Atan2Op: "atan2",
}
LIBM_ARITY = {"pow": 2, "atan2": 2}


@lru_cache(maxsize=len(LIBM_OPS))
def libm(name: str) -> CFuncPtr:
    """The C library's binary64 function `name` (a ctypes function); one
    per name of `LIBM_OPS` (the only names asked), loaded once."""
    lib = ctypes.CDLL(ctypes.util.find_library("m"))
    fn: CFuncPtr = getattr(lib, name)
    fn.restype = ctypes.c_double
    fn.argtypes = [ctypes.c_double] * LIBM_ARITY.get(name, 1)
    return fn


_FLOAT_OPS: dict[type[Operation], Callable[..., Any]] = {
    # op: function of float64 operands; the f64 result is then rounded once
    # to the result type.  For + - * / and sqrt that is the correctly
    # rounded narrow result; for the transcendental functions (`LIBM_OPS`)
    # it is libm's binary64 value rounded once.  IEEE exceptions give
    # inf/NaN, not errors.
    arith.DivfOp: np.divide,
    arith.NegfOp: np.negative,
    arith.MaxnumfOp: np.fmax,
    arith.MinnumfOp: np.fmin,  # NaN operand: the other one
    arith.ExtFOp: np.float64,
    arith.TruncFOp: np.float64,  # the result rounding is truncf
    math.AbsFOp: np.abs,
    math.CopySignOp: np.copysign,
    math.SqrtOp: np.sqrt,
    math.RsqrtOp: lambda x: 1 / np.sqrt(x),
    math.FloorOp: np.floor,
    math.CeilOp: np.ceil,
    math.TruncOp: np.trunc,
    math.RoundEvenOp: np.rint,
    math.RoundOp: _round_half_away,
}
for _op, _name in LIBM_OPS.items():
    _FLOAT_OPS[_op] = libm(_name)
# (exp/sqrt/log replace xDSL's, whose Python `math` calls raise on overflow and
# on negative or zero operands where IEEE gives inf/NaN)


def _float_op(fn: Callable[..., Any]) -> ImplFn:
    def run(
        self: InterpreterFunctions, interpreter: Interpreter, op: Operation, args: PythonValues
    ) -> PythonValues:
        return (float(fn(*(np.float64(a) for a in args))),)

    return run


def _exact_float(x: Fraction, t: Attribute) -> float:
    """The exact value `x` as the float that `KernelInterpreter` then rounds
    to `t` without a double-rounding error: the correctly rounded binary64
    for f64, else `x` rounded to odd at binary64 (53 >= p + 2 bits, so
    rounding that to nearest-even at p bits rounds `x` itself)."""
    try:
        r = float(x)  # correctly rounded (int / int)
    except OverflowError:
        return math_inf if x > 0 else -math_inf
    if isinstance(t, Float64Type):
        return r
    return float(_to_odd(np.float64(r), Fraction(r), x))


def _to_odd(
    r: np.floating[Any], r_exact: Fraction | float, x: Fraction | float
) -> np.floating[Any]:
    """`r` (the nearest float to `x`, `r_exact` its value) moved one step
    towards `x` when inexact with an even last significand bit: `x` rounded
    to odd in `r`'s format."""
    if r_exact == x or not np.isfinite(r):
        return r
    bits = r.view(np.uint64 if r.dtype == np.float64 else np.uint32)
    if int(bits) & 1:
        return r
    odd: np.floating[Any] = np.nextafter(r, r.dtype.type(math_inf if x > r_exact else -math_inf))
    return odd


def _int_to_float(reading: Reading) -> ImplFn:
    def run(
        self: InterpreterFunctions, interpreter: Interpreter, op: Operation, args: PythonValues
    ) -> PythonValues:
        v = reading(args[0], int_width(op.operands[0].type))
        return (_exact_float(Fraction(v), op.results[0].type),)

    return run


def _float_to_int(signed: bool) -> ImplFn:
    """fptosi/fptoui: round toward zero; NaN, inf or out of range is poison."""

    def run(
        self: InterpreterFunctions, interpreter: Interpreter, op: Operation, args: PythonValues
    ) -> PythonValues:
        x, w = args[0], int_width(op.results[0].type)
        lo, hi = (-(1 << (w - 1)), 1 << (w - 1)) if signed else (0, 1 << w)
        if not np.isfinite(x) or not lo <= int(np.trunc(x)) < hi:
            raise_undefined(UNDEFINED["fptoi"](op.name, x, w))
        return (as_signed(int(np.trunc(x)), w),)

    return run


NP_FLOAT: dict[type[Attribute], type[Any]] = {
    Float16Type: np.float16,
    BFloat16Type: ml_dtypes.bfloat16,
    Float32Type: np.float32,
    Float64Type: np.float64,
}


def _bit_width(t: Attribute) -> int:
    return 8 * np.dtype(NP_FLOAT[type(t)]).itemsize if type(t) in NP_FLOAT else int_width(t)


class ScalarKernelFunctions(InterpreterFunctions):
    """arith/math ops xDSL's interpreter lacks, or implements in a way a
    kernel cannot use (Python `math` errors, integer ops that ignore the
    operand width).  Float results are rounded to their type by
    `KernelInterpreter`; integer results wrap to their width.  The methods
    are the ops that fit no table; the tables above are added below."""

    @impl(math.FmaOp)
    def run_fma(self, interpreter: Interpreter, op: math.FmaOp, args: PythonValues) -> PythonValues:
        """a * b + c rounded once: computed exactly (Fraction), IEEE rules
        for non-finite operands and for an exact zero (sign of the zero)."""
        a, b, c = args
        if not (np.isfinite(a) and np.isfinite(b)):
            return (a * b + c,)
        if not np.isfinite(c):
            return (c,)
        x = Fraction(a) * Fraction(b) + Fraction(c)
        return (a * b + c if x == 0 else _exact_float(x, op.results[0].type),)

    @impl(math.FPowIOp)
    def run_fpowi(
        self, interpreter: Interpreter, op: math.FPowIOp, args: PythonValues
    ) -> PythonValues:
        """x^n (integer n) as libm's binary64 pow rounded once, like powf
        (MLIR leaves the multiplication order of its expansion open)."""
        n = as_signed(args[1], int_width(op.operands[1].type))
        return (libm("pow")(float(args[0]), float(np.float64(n))),)

    @impl(arith.BitcastOp)
    def run_bitcast(
        self, interpreter: Interpreter, op: arith.BitcastOp, args: PythonValues
    ) -> PythonValues:
        """Reinterpret the bits (same width; integers as unsigned words)."""
        src, dst = op.operands[0].type, op.results[0].type
        w = _bit_width(dst)
        word = np.dtype(f"u{w // 8}") if w % 8 == 0 else None  # floats: 16, 32, 64
        if type(src) in NP_FLOAT:
            assert word is not None  # a float's width is 16, 32 or 64
            bits = int(np.array(args[0], NP_FLOAT[type(src)]).view(word))
        else:
            bits = as_unsigned(args[0], w)
        if type(dst) in NP_FLOAT:
            return (float(np.array(bits, word).view(NP_FLOAT[type(dst)])[()]),)
        return (as_signed(bits, w),)


def _add_impls(table: Mapping[type[Operation], object], make: Callable[..., ImplFn]) -> None:
    for op_type, spec in table.items():
        run = make(*spec) if isinstance(spec, tuple) else make(spec)
        setattr(ScalarKernelFunctions, f"run_{op_type.name.replace('.', '_')}", impl(op_type)(run))


_add_impls(_INT_OPS, _int_op)
_add_impls(_FLOAT_OPS, _float_op)
_add_impls({arith.SIToFPOp: as_signed, arith.UIToFPOp: as_unsigned}, _int_to_float)
_add_impls({arith.FPToSIOp: True, arith.FPToUIOp: False}, _float_to_int)
register_impls(ScalarKernelFunctions)  # the methods set above (in place)


def _f32_odd(v: float) -> np.floating[Any]:
    """`v` rounded to odd at f32: rounding that to nearest-even at bf16
    (8 bits <= 24 - 2) is `v` rounded once.  (`ml_dtypes.bfloat16(v)` of a
    float64 rounds through f32 to nearest-even, a double rounding.)"""
    r = np.float32(v)
    return r if v != v else _to_odd(r, float(r), v)


def rounder(t: Attribute) -> Callable[[float], float] | None:
    if isinstance(t, Float32Type):
        return lambda v: float(np.float32(v))
    if isinstance(t, Float16Type):
        return lambda v: float(np.float16(v))  # numpy rounds float64 -> half directly
    if isinstance(t, BFloat16Type):
        return lambda v: float(ml_dtypes.bfloat16(_f32_odd(v)))
    return None
