"""Executing `compute ... op="mlir.kernel"` escape-hatch tasks (D-RT-MLIR-KERNEL).

The lowering (`passes/nem/passes/lowering/escape.py`, D-LOW-ESCAPE) turns a loop nest it
cannot raise into a `compute` task whose `kernel` attribute is the generic
MLIR text of `func.func @kernel(memref per operand (ins, then outs), index
per index_args entry)`.  Running the body once on those arguments is the
task.  This module defines what running it means, as xDSL's interpreter
configured below; `mlir_native` compiles the same semantics to native code,
and `escape_hatch` runs a task natively when that backend takes the kernel,
else here (D-RT-MLIR-JIT):

* the text is parsed once per distinct kernel string and cached together
  with a configured interpreter (not once per task instance);
* before the first run every op of the body is checked against the
  interpreter's implementations; an op it lacks (or an unsupported form, e.g.
  a multi-output `linalg.generic`) raises `NotSupported("compute
  op=mlir.kernel: <op> at kernel:<line>:<col> ...")`, never a wrong answer
  (the engine reports it as EXEC-03);
* memref arguments are `ShapedArray`s backed directly by numpy arrays
  (`NumpyShapedArray`): inputs wrap the region's data, outputs a copy of
  their current contents (read-modify-write); loads and stores index the
  numpy array (bounds-checked) instead of packing bytes through `TypedPtr`;
* floating-point results are rounded to their MLIR result type after every
  op (f32, f16, bf16), so each `arith` op is the IEEE operation of its type:
  the interpreter computes in Python floats (binary64), and rounding a
  binary64 `+ - * /` result of two f32/f16/bf16 operands to the narrower type
  is the correctly rounded narrow result (53 >= 2p + 2); `math.*` functions
  are libm's binary64 value rounded once; ops whose exact result is not a
  binary64 (`math.fma`, int-to-float casts) round it to odd at binary64 so
  that the one rounding to the result type is exact; bf16 rounds through an
  f32 rounded to odd (ml_dtypes' own float64 -> bf16 double-rounds).
  Integer ops read their operands at their width (signed or unsigned as the
  op says) and wrap the result to its width; storing an integer wraps to the
  memref's element width.  What MLIR leaves undefined or poison (division by
  zero, signed division overflow, shifts by >= the width, out-of-range
  fptosi/fptoui, ipowi(0, negative)) raises `NumericError`;
* structured linalg ops (`linalg.generic`, the named ops such as fill, copy,
  add, matmul, conv, transpose, and `linalg.reduce`/`linalg.broadcast` with
  the indexing maps MLIR gives them) run as their generic form: loops in
  dimension order, the body region interpreted per point and rounded per op;
* `affine.load/store/apply/for/min/parallel` are re-implemented here: xDSL's
  versions pass every map operand as a dimension and ignore `affine.for`
  bound operands and `iter_args`, which the kernels use (`()[s0, s1] ->
  (s0, s1)` load maps, loop bounds from `index_args`); `scf.parallel` (with
  `scf.reduce`) is added;
* reductions have one order, the sequential one (the exactness contract of
  the reference runtime; MLIR leaves the order of a parallel reduction
  unspecified, and a float reduction depends on it): `linalg.reduce` starts
  from the init's element and combines the input's elements in increasing
  order of the reduced dimensions (the first one outermost, as
  `-convert-linalg-to-loops`); `affine.parallel`/`scf.parallel` start from
  the init value (for `affine.parallel`, the identity of its `reduce` kind
  that `-lower-affine` materializes) and combine the values the iterations
  yield in sequential iteration order (the first induction variable
  outermost, as the `scf.for` nest of `-convert-scf-to-cf`), each combine
  `(accumulator, value)` an interpreted, rounded op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import operator
import time
from fractions import Fraction
from functools import cache, lru_cache
from itertools import product
from math import inf as math_inf
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects import affine, arith, builtin, func, linalg, math, memref, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
)
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation, PoolingOperation
from xdsl.dialects.linalg.ops import BroadcastOp as LinalgBroadcastOp
from xdsl.dialects.linalg.ops import ReduceOp as LinalgReduceOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    OpImplResult,
    ReturnedValues,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.builtin import BuiltinFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.linalg import LinalgFunctions, run_linalg_structured_op
from xdsl.interpreters.math import MathFunctions
from xdsl.interpreters.memref import MemRefFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.interpreters.shaped_array import ShapedArray
from xdsl.ir import Block, Operation
from xdsl.ir.affine import AffineConstraintKind, AffineExpr, AffineMap
from xdsl.parser import Parser

from nem.dialect.semantics import ELEM_TYPES
from nem.frontends.upstream_dialects import register_mlir_dialects
from nem.frontends.upstream_dialects.affine_if import AffineIfOp
from nem.frontends.upstream_dialects.affine_max import AffineMaxOp
from nem.runtime.numerics import KernelError, NotSupported, NumericError

OPNAME = "compute op=mlir.kernel"

# spec element name -> MLIR element type name accepted for it
_ELEM_MLIR = {n: e.mlir for n, e in ELEM_TYPES.items()}


class NumpyShapedArray(ShapedArray):
    """A memref value whose elements live in a numpy array (C order).

    `load`/`store` index the array directly; indices are bounds-checked
    (numpy would silently wrap negative ones)."""

    def __init__(self, array: np.ndarray, bits: int | None = None):
        # `_data` is not used by the implementations registered here; the
        # numpy array is the storage.  `bits`: element width when narrower
        # than the array's dtype (i4 unpacked to int8, D-RT-I4).
        super().__init__(None, list(array.shape))  # type: ignore[arg-type]
        self.array = array
        self._is_float = array.dtype.kind == "f" or array.dtype == ml_dtypes.bfloat16
        if not self._is_float:
            info = np.iinfo(array.dtype)
            self._lo, self._span = int(info.min), int(info.max) - int(info.min) + 1
            if bits is not None and bits < 8 * array.dtype.itemsize:
                self._lo, self._span = -(1 << (bits - 1)), 1 << bits

    def _check(self, index) -> tuple[int, ...]:
        index = tuple(index)
        if len(index) != len(self.shape) or any(
                not 0 <= i < d for i, d in zip(index, self.shape)):
            raise outside_error(index, self.shape)
        return index

    def load(self, index):
        return self.array.item(self._check(index))

    def store(self, index, value) -> None:
        index = self._check(index)
        if not self._is_float:
            value = (int(value) - self._lo) % self._span + self._lo
        self.array[index] = value

    def copy(self):
        return NumpyShapedArray(self.array.copy())


_CONSTRAINT = {AffineConstraintKind.ge: operator.ge, AffineConstraintKind.le: operator.le,
               AffineConstraintKind.eq: operator.eq}


def _eval_map(m, operands) -> list[int]:
    nd = m.num_dims
    return m.eval(list(operands[:nd]), list(operands[nd:]))


def _return_operands(self, interpreter: Interpreter, op: Operation, args: tuple[Any, ...]):
    """A terminator that hands its operands to the op running its region
    (affine.yield, scf.reduce, scf.reduce.return)."""
    return ReturnedValues(args), ()


def _grouped(bound, values: list[int], groups) -> list[int]:
    """affine.parallel bounds: `values` (the map's results) split into
    consecutive groups of the sizes `groups` lists, each reduced by `bound`
    (max for lower bounds, min for upper bounds)."""
    out, start = [], 0
    for size in groups.get_values():
        out.append(bound(values[start:start + size]))
        start += size
    return out


def _parallel_loops(interpreter: Interpreter, body, lbs, ubs, steps, init, combine) -> tuple:
    """affine.parallel / scf.parallel: run `body` at every point of the
    iteration space in sequential order (lexicographic, the first induction
    variable outermost) and fold the values each point yields into `init` in
    that order, `acc[k] = combine(k, acc[k], value[k])`.  MLIR leaves the
    order unspecified; fixing it makes float reductions reproducible."""
    if any(s <= 0 for s in steps):
        _undefined(UNDEFINED["parallel_step"](min(steps)))
    acc = tuple(init)
    for point in product(*map(range, lbs, ubs, steps)):
        values = interpreter.run_ssacfg_region(body, point)
        acc = tuple(combine(k, a, v) for k, (a, v) in enumerate(zip(acc, values)))
    return acc


@register_impls
class AffineKernelFunctions(InterpreterFunctions):
    """affine ops with dims and symbols split as the map says."""

    @impl(affine.LoadOp)
    def run_load(self, interpreter: Interpreter, op: affine.LoadOp, args: tuple[Any, ...]):
        mem, *ops = args
        return (mem.load(_eval_map(op.map.data, ops)),)

    @impl(affine.StoreOp)
    def run_store(self, interpreter: Interpreter, op: affine.StoreOp, args: tuple[Any, ...]):
        value, mem, *ops = args
        mem.store(_eval_map(op.map.data, ops), value)
        return ()

    @impl(affine.ApplyOp)
    def run_apply(self, interpreter: Interpreter, op: affine.ApplyOp, args: tuple[Any, ...]):
        return tuple(_eval_map(op.map.data, args))

    @impl(affine.MinOp)
    def run_min(self, interpreter: Interpreter, op: affine.MinOp, args: tuple[Any, ...]):
        return (min(_eval_map(op.map.data, args)),)

    @impl(AffineMaxOp)
    def run_max(self, interpreter: Interpreter, op: AffineMaxOp, args: tuple[Any, ...]):
        return (max(_eval_map(op.map.data, args)),)

    @impl(affine.ForOp)
    def run_for(self, interpreter: Interpreter, op: affine.ForOp, args: tuple[Any, ...]):
        n_lb, n_ub = len(op.lowerBoundOperands), len(op.upperBoundOperands)
        lb = max(_eval_map(op.lowerBoundMap.data, args[:n_lb]))
        ub = min(_eval_map(op.upperBoundMap.data, args[n_lb:n_lb + n_ub]))
        carried = tuple(args[n_lb + n_ub:])
        step = op.step.value.data
        for i in range(lb, ub, step):
            carried = tuple(interpreter.run_ssacfg_region(op.body, (i, *carried)))
        return carried

    @impl(affine.ParallelOp)
    def run_parallel(self, interpreter: Interpreter, op: affine.ParallelOp, args: tuple[Any, ...]):
        """Bounds: max over each lower-bound group, min over each upper one;
        each `reduce` result combines as `interpreter.reductions` says
        (`_affine_reductions`)."""
        lb_map, ub_map = op.lowerBoundsMap.data, op.upperBoundsMap.data
        n_lb = lb_map.num_dims + lb_map.num_symbols
        lbs = _grouped(max, _eval_map(lb_map, args[:n_lb]), op.lowerBoundsGroups)
        ubs = _grouped(min, _eval_map(ub_map, args[n_lb:]), op.upperBoundsGroups)
        reductions = interpreter.reductions[op]
        return _parallel_loops(
            interpreter, op.body, lbs, ubs, [s.value.data for s in op.steps.data],
            [identity for _, identity in reductions],
            lambda k, acc, v: interpreter.run_op(reductions[k][0], (acc, v))[0])

    @impl(AffineIfOp)
    def run_if(self, interpreter: Interpreter, op: AffineIfOp, args: tuple[Any, ...]):
        cond = op.condition.data
        dims, syms = list(args[:cond.num_dims]), list(args[cond.num_dims:])
        holds = all(_CONSTRAINT[c.kind](c.lhs.eval(dims, syms), c.rhs.eval(dims, syms))
                    for c in cond.constraints)
        region = op.then_region if holds else op.else_region
        if not region.blocks:
            return ()
        return tuple(interpreter.run_ssacfg_region(region, ()))

    run_yield = impl_terminator(affine.YieldOp)(_return_operands)


@register_impls
class ScfKernelFunctions(InterpreterFunctions):
    """scf.parallel and its scf.reduce terminator, which xDSL's interpreter
    lacks, and scf.for with MLIR's positive-step requirement."""

    @impl(scf.ParallelOp)
    def run_parallel(self, interpreter: Interpreter, op: scf.ParallelOp, args: tuple[Any, ...]):
        """Each reduction starts from its init value; its scf.reduce region
        combines (accumulator, value), as the `scf.for` nest of
        `-convert-scf-to-cf` applies it."""
        n = len(op.lowerBound)
        regions = op.body.block.last_op.reductions
        return _parallel_loops(
            interpreter, op.body, args[:n], args[n:2 * n], args[2 * n:3 * n], args[3 * n:],
            lambda k, acc, v: interpreter.run_ssacfg_region(regions[k], (acc, v))[0])

    @impl(scf.ForOp)
    def run_for(self, interpreter: Interpreter, op: scf.ForOp, args: tuple[Any, ...]):
        """xDSL's scf.for, refusing a non-positive step (MLIR requires a
        positive one; xDSL's would iterate backwards or fail in `range`)."""
        if args[2] <= 0:
            _undefined(UNDEFINED["for_step"](args[2]))
        return ScfFunctions.run_for(self, interpreter, op, args)

    run_reduce = impl_terminator(scf.ReduceOp)(_return_operands)
    run_reduce_return = impl_terminator(scf.ReduceReturnOp)(_return_operands)


# ---------------------------------------------------------------------------
# Scalar arith/math ops xDSL's interpreter lacks (or gets wrong for kernels)
# ---------------------------------------------------------------------------
#
# Values are xDSL's: an integer of any width (i1 too) is a Python int, read
# as two's complement (a load from an unsigned region gives the unsigned
# reading; every op below re-reads its operands at their width, so both
# work); a float is a Python float (binary64) that `KernelInterpreter` rounds
# to the op's result type after the op.  What MLIR leaves undefined or poison
# (division by zero, signed division overflow, a shift by >= the width,
# fptosi/fptoui of NaN or of a value out of range, ipowi(0, negative))
# raises NumericError: such a kernel has no defined result to compare with.


def _width(t) -> int:
    """Bit width of an integer type; index is 64 bits (xDSL's `index_bitwidth`)."""
    return t.width.data if isinstance(t, IntegerType) else 64


def _signed(v, w: int) -> int:
    v = int(v) & ((1 << w) - 1)
    return v - (1 << w) if v >> (w - 1) else v


def _unsigned(v, w: int) -> int:
    return int(v) & ((1 << w) - 1)


# What MLIR leaves undefined or poison, as both backends report it (the
# native one from its trap sites, `mlir_native_prep`): kind -> message.
UNDEFINED = {
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


def outside_error(index, shape) -> NumericError:
    return NumericError(f"{OPNAME}: access at {list(index)} is outside the memref of shape "
                        f"{list(shape)} (HAZ-04)")


def _undefined(what: str):
    raise undefined_error(what)


def _nonzero(b: int) -> int:
    if b == 0:
        _undefined(UNDEFINED["div0"]())
    return b


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(_nonzero(b))
    return q if (a >= 0) == (b >= 0) else -q


def _floor_div(a: int, b: int) -> int:
    return a // _nonzero(b)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // _nonzero(b))


def _signed_quotient(div):
    """divsi/floordivsi/ceildivsi: MIN / -1 overflows, which MLIR leaves undefined."""
    def run(a: int, b: int, w: int) -> int:
        q = div(a, b)
        if q == 1 << (w - 1):
            _undefined(UNDEFINED["sdiv_overflow"](a, b, w))
        return q
    return run


def _shift(shift):
    """A shift amount >= the width gives poison (MLIR)."""
    def run(a: int, b: int, w: int) -> int:
        if not 0 <= b < w:
            _undefined(UNDEFINED["shift"](b, w))
        return shift(a, b)
    return run


def _ipow(a: int, b: int, w: int) -> int:
    """math.ipowi as MLIR folds it: wraps for b >= 0 (0^0 = 1); for b < 0 the
    integer quotient 1 / a^-b (1, -1 or 0), with a = 0 a division by zero."""
    if b >= 0:
        return pow(a, b, 1 << w)
    if a == 0:
        _undefined(UNDEFINED["ipowi0"]())
    if a not in (1, -1):
        return 0
    return a if b % 2 else 1


_INT_OPS = {
    # op: (operand reading at the operand's width, fn(*operands, width)); each
    # result wraps to its type's width (a tuple for two-result ops)
    arith.MaxSIOp: (_signed, lambda a, b, w: max(a, b)),
    arith.MinSIOp: (_signed, lambda a, b, w: min(a, b)),
    arith.MaxUIOp: (_unsigned, lambda a, b, w: max(a, b)),
    arith.MinUIOp: (_unsigned, lambda a, b, w: min(a, b)),
    arith.DivSIOp: (_signed, _signed_quotient(_trunc_div)),         # rounds toward zero
    arith.FloorDivSIOp: (_signed, _signed_quotient(_floor_div)),
    arith.CeilDivSIOp: (_signed, _signed_quotient(_ceil_div)),
    arith.RemSIOp: (_signed, lambda a, b, w: a - b * _trunc_div(a, b)),  # sign of a
    arith.DivUIOp: (_unsigned, lambda a, b, w: _floor_div(a, b)),
    arith.CeilDivUIOp: (_unsigned, lambda a, b, w: _ceil_div(a, b)),
    arith.RemUIOp: (_unsigned, lambda a, b, w: a % _nonzero(b)),
    arith.ShLIOp: (_unsigned, _shift(lambda a, b: a << b)),
    arith.ShRSIOp: (_signed, _shift(lambda a, b: a >> b)),           # arithmetic shift
    arith.ShRUIOp: (_unsigned, _shift(lambda a, b: a >> b)),         # logical shift
    arith.AddUIExtendedOp: (_unsigned, lambda a, b, w: (a + b, (a + b) >> w)),  # sum, carry
    arith.MulSIExtendedOp: (_signed, lambda a, b, w: (a * b, (a * b) >> w)),    # low, high
    arith.MulUIExtendedOp: (_unsigned, lambda a, b, w: (a * b, (a * b) >> w)),
    math.IPowIOp: (_signed, _ipow),
    math.AbsIOp: (_signed, lambda a, w: abs(a)),                     # |MIN| wraps to MIN
    math.CountLeadingZerosOp: (_unsigned, lambda a, w: w - a.bit_length()),
    math.CountTrailingZerosOp: (_unsigned, lambda a, w: (a & -a).bit_length() - 1 if a else w),
    math.CtPopOp: (_unsigned, lambda a, w: bin(a).count("1")),
    # casts: read at the input's width, wrap to the result's
    arith.ExtSIOp: (_signed, lambda a, w: a),
    arith.ExtUIOp: (_unsigned, lambda a, w: a),
    arith.TruncIOp: (_signed, lambda a, w: a),
    arith.IndexCastOp: (_signed, lambda a, w: a),
}


def _int_op(reading, fn):
    def run(self, interpreter, op, args):
        w = _width(op.operands[0].type)
        r = fn(*(reading(a, w) for a in args), w)
        return tuple(_signed(v, _width(res.type))
                     for v, res in zip(r if isinstance(r, tuple) else (r,), op.results))
    return run


def _round_half_away(x):
    """math.round: to nearest, ties away from zero (x - trunc(x) is exact)."""
    t = np.trunc(x)
    return np.copysign(t + np.sign(x) if abs(x - t) >= 0.5 else t, x)


# The transcendental math ops: the C library's (libm's) binary64 function,
# its result rounded once to the op's result type.  Both backends call the
# same function (the native one through `mlir_native_prep`), so their
# results agree bit for bit; numpy's own float64 routines differ from libm's
# in the last bit for a few percent of arguments.  op -> (C name, arity).
LIBM_OPS = {
    math.ExpOp: "exp", math.Exp2Op: "exp2", math.ExpM1Op: "expm1", math.LogOp: "log",
    math.Log2Op: "log2", math.Log10Op: "log10", math.Log1pOp: "log1p", math.CbrtOp: "cbrt",
    math.TanhOp: "tanh", math.CosOp: "cos", math.SinOp: "sin", math.TanOp: "tan",
    math.AtanOp: "atan", math.AsinOp: "asin", math.AcosOp: "acos", math.SinhOp: "sinh",
    math.CoshOp: "cosh", math.AtanhOp: "atanh", math.AsinhOp: "asinh", math.AcoshOp: "acosh",
    math.ErfOp: "erf", math.PowFOp: "pow", math.Atan2Op: "atan2",
}
LIBM_ARITY = {"pow": 2, "atan2": 2}


@cache
def libm(name: str):
    """The C library's binary64 function `name` (a ctypes function)."""
    lib = ctypes.CDLL(ctypes.util.find_library("m"))
    fn = getattr(lib, name)
    fn.restype = ctypes.c_double
    fn.argtypes = [ctypes.c_double] * LIBM_ARITY.get(name, 1)
    return fn


_FLOAT_OPS = {
    # op: function of float64 operands; the f64 result is then rounded once
    # to the result type.  For + - * / and sqrt that is the correctly
    # rounded narrow result; for the transcendental functions (`LIBM_OPS`)
    # it is libm's binary64 value rounded once.  IEEE exceptions give
    # inf/NaN, not errors.
    arith.DivfOp: np.divide, arith.NegfOp: np.negative,
    arith.MaxnumfOp: np.fmax, arith.MinnumfOp: np.fmin,   # NaN operand: the other one
    arith.ExtFOp: np.float64, arith.TruncFOp: np.float64,  # the result rounding is truncf
    math.AbsFOp: np.abs, math.CopySignOp: np.copysign,
    math.SqrtOp: np.sqrt, math.RsqrtOp: lambda x: 1 / np.sqrt(x),
    math.FloorOp: np.floor, math.CeilOp: np.ceil, math.TruncOp: np.trunc,
    math.RoundEvenOp: np.rint, math.RoundOp: _round_half_away,
}
for _op, _name in LIBM_OPS.items():
    _FLOAT_OPS[_op] = libm(_name)
# (exp/sqrt/log replace xDSL's, whose Python `math` calls raise on overflow and
# on negative or zero operands where IEEE gives inf/NaN)


def _float_op(fn):
    def run(self, interpreter, op, args):
        return (float(fn(*(np.float64(a) for a in args))),)
    return run


def _exact_float(x: Fraction, t) -> float:
    """The exact value `x` as the float that `KernelInterpreter` then rounds
    to `t` without a double-rounding error: the correctly rounded binary64
    for f64, else `x` rounded to odd at binary64 (53 >= p + 2 bits, so
    rounding that to nearest-even at p bits rounds `x` itself)."""
    try:
        r = float(x)                       # correctly rounded (int / int)
    except OverflowError:
        return math_inf if x > 0 else -math_inf
    if isinstance(t, Float64Type):
        return r
    return float(_to_odd(np.float64(r), Fraction(r), x))


def _to_odd(r, r_exact, x):
    """`r` (the nearest float to `x`, `r_exact` its value) moved one step
    towards `x` when inexact with an even last significand bit: `x` rounded
    to odd in `r`'s format."""
    if r_exact == x or not np.isfinite(r):
        return r
    bits = r.view(np.uint64 if r.dtype == np.float64 else np.uint32)
    if int(bits) & 1:
        return r
    return np.nextafter(r, r.dtype.type(math_inf if x > r_exact else -math_inf))


def _int_to_float(reading):
    def run(self, interpreter, op, args):
        v = reading(args[0], _width(op.operands[0].type))
        return (_exact_float(Fraction(v), op.results[0].type),)
    return run


def _float_to_int(signed: bool):
    """fptosi/fptoui: round toward zero; NaN, inf or out of range is poison."""
    def run(self, interpreter, op, args):
        x, w = args[0], _width(op.results[0].type)
        lo, hi = (-(1 << (w - 1)), 1 << (w - 1)) if signed else (0, 1 << w)
        if not np.isfinite(x) or not lo <= int(np.trunc(x)) < hi:
            _undefined(UNDEFINED["fptoi"](op.name, x, w))
        return (_signed(int(np.trunc(x)), w),)
    return run


_NP_FLOAT = {Float16Type: np.float16, BFloat16Type: ml_dtypes.bfloat16,
             Float32Type: np.float32, Float64Type: np.float64}


def _bit_width(t) -> int:
    return 8 * np.dtype(_NP_FLOAT[type(t)]).itemsize if type(t) in _NP_FLOAT else _width(t)


class ScalarKernelFunctions(InterpreterFunctions):
    """arith/math ops xDSL's interpreter lacks, or implements in a way a
    kernel cannot use (Python `math` errors, integer ops that ignore the
    operand width).  Float results are rounded to their type by
    `KernelInterpreter`; integer results wrap to their width.  The methods
    are the ops that fit no table; the tables above are added below."""

    @impl(math.FmaOp)
    def run_fma(self, interpreter, op, args):
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
    def run_fpowi(self, interpreter, op, args):
        """x^n (integer n) as libm's binary64 pow rounded once, like powf
        (MLIR leaves the multiplication order of its expansion open)."""
        n = _signed(args[1], _width(op.operands[1].type))
        return (libm("pow")(float(args[0]), float(np.float64(n))),)

    @impl(arith.BitcastOp)
    def run_bitcast(self, interpreter, op, args):
        """Reinterpret the bits (same width; integers as unsigned words)."""
        src, dst = op.operands[0].type, op.results[0].type
        w = _bit_width(dst)
        word = np.dtype(f"u{w // 8}") if w % 8 == 0 else None   # floats: 16, 32, 64
        if type(src) in _NP_FLOAT:
            bits = int(np.array(args[0], _NP_FLOAT[type(src)]).view(word))
        else:
            bits = _unsigned(args[0], w)
        if type(dst) in _NP_FLOAT:
            return (float(np.array(bits, word).view(_NP_FLOAT[type(dst)])[()]),)
        return (_signed(bits, w),)


def _add_impls(table: dict, make) -> None:
    for op_type, spec in table.items():
        run = make(*spec) if isinstance(spec, tuple) else make(spec)
        setattr(ScalarKernelFunctions, f"run_{op_type.name.replace('.', '_')}", impl(op_type)(run))


_add_impls(_INT_OPS, _int_op)
_add_impls(_FLOAT_OPS, _float_op)
_add_impls({arith.SIToFPOp: _signed, arith.UIToFPOp: _unsigned}, _int_to_float)
_add_impls({arith.FPToSIOp: True, arith.FPToUIOp: False}, _float_to_int)
ScalarKernelFunctions = register_impls(ScalarKernelFunctions)


def _f32_odd(v: float):
    """`v` rounded to odd at f32: rounding that to nearest-even at bf16
    (8 bits <= 24 - 2) is `v` rounded once.  (`ml_dtypes.bfloat16(v)` of a
    float64 rounds through f32 to nearest-even, a double rounding.)"""
    r = np.float32(v)
    return r if v != v else _to_odd(r, float(r), v)


def _rounder(t):
    if isinstance(t, Float32Type):
        return lambda v: float(np.float32(v))
    if isinstance(t, Float16Type):
        return lambda v: float(np.float16(v))      # numpy rounds float64 -> half directly
    if isinstance(t, BFloat16Type):
        return lambda v: float(ml_dtypes.bfloat16(_f32_odd(v)))
    return None


def _projection(rank: int, dropped) -> AffineMap:
    """(d0, ..., d{rank-1}) -> the dims not in `dropped`, in order."""
    return AffineMap(rank, 0, tuple(AffineExpr.dimension(k) for k in range(rank)
                                    if k not in dropped))


class _AsGeneric:
    """A `linalg.reduce` or `linalg.broadcast` (one input, one init) seen as
    the structured op MLIR defines it to be, for `run_linalg_structured_op`
    and `_linalg_unsupported` (xDSL 0.74 does not derive them from
    LinalgStructuredOperation).  Indexing maps as MLIR's: reduce loops over
    the input (identity) and indexes the init by the dims not reduced;
    broadcast loops over the init (identity) and indexes the input by the
    dims not added.  The loop ranges follow from the maps as for any
    structured op (the inherited methods)."""

    OPS = (LinalgReduceOp, LinalgBroadcastOp)
    get_num_loops = LinalgStructuredOperation.get_num_loops
    get_loops_to_shapes_map = LinalgStructuredOperation.get_loops_to_shapes_map
    get_shapes_to_loops_map = LinalgStructuredOperation.get_shapes_to_loops_map

    def __init__(self, op: LinalgReduceOp | LinalgBroadcastOp):
        self.inputs, self.outputs = (op.input,), (op.init,)
        self.results, self.body = op.results, op.regions[0]
        dims = set(op.dimensions.get_values())
        if isinstance(op, LinalgReduceOp):
            rank = len(op.input.type.get_shape())
            maps = (AffineMap.identity(rank), _projection(rank, dims))
        else:
            rank = len(op.init.type.get_shape())
            maps = (_projection(rank, dims), AffineMap.identity(rank))
        self._maps = ArrayAttr(AffineMapAttr(m) for m in maps)

    def get_indexing_maps(self) -> ArrayAttr:
        return self._maps


_STRUCTURED = (LinalgStructuredOperation, *_AsGeneric.OPS)


def _structured(op):
    """`op` as `run_linalg_structured_op` takes it."""
    return _AsGeneric(op) if isinstance(op, _AsGeneric.OPS) else op


class LinalgKernelFunctions(InterpreterFunctions):
    """Every structured linalg op (generic, the named ops, transpose, and
    reduce/broadcast through `_AsGeneric`) runs as its generic form with
    xDSL's `run_linalg_structured_op`: loops over the iteration space in
    dimension order, as MLIR's linalg-to-loops lowering (the named ops list
    their reduction dimensions last), accumulating into the output element by
    element, and the body region interpreted per point, so each body op is
    rounded like any other op.  It replaces xDSL's fill/conv/pooling
    implementations, which read `ShapedArray.data` (not the numpy storage)
    and want zeroed outputs.  Registered below for each structured op class
    of the linalg dialect."""


def _run_structured(self, interpreter, op, args):
    return run_linalg_structured_op(interpreter, _structured(op), args)


for _op in linalg.Linalg.operations:
    if issubclass(_op, _STRUCTURED):
        setattr(LinalgKernelFunctions, f"run_{_op.name.split('.')[1]}",
                impl(_op)(_run_structured))
LinalgKernelFunctions = register_impls(LinalgKernelFunctions)


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _verify_failure(op: Operation) -> str | None:
    """The first line of `op`'s verifier error (its regions unchecked), or None."""
    try:
        op.verify(verify_nested_ops=False)
    except Exception as e:  # noqa: BLE001 - any verifier failure
        return _first_line(e)
    return None


def _linalg_unsupported(op: LinalgStructuredOperation | _AsGeneric) -> str | None:
    """Why a structured linalg op cannot run, or None.  `run_linalg_structured_op`
    stores every body result into the first output, and a body must yield
    the output's element type: a named op parsed from its custom form over
    mixed element types gets xDSL's body without MLIR's casts (e.g.
    `arith.addf` of bf16 and f32), which fails verification.  xDSL's body for
    a pooling op parsed from its custom form is max(input, window element),
    not MLIR's max(output, input): a pooling body must read the output."""
    if op.results or len(op.outputs) != 1 or getattr(op, "library_call", None) is not None:
        return "is supported only with one memref output, no results, no library_call"
    if isinstance(op, PoolingOperation) and not op.body.block.args[-1].uses:
        return ("has a body that ignores the output (xDSL's body for the custom form of a "
                "pooling op); the generic form with MLIR's body runs")
    out = op.outputs[0].type
    want = out.get_element_type() if isinstance(out, MemRefType) else None
    yielded = [v.type for v in op.body.block.last_op.operands] if op.body.block.last_op else []
    if yielded != [want]:
        return (f"yields {', '.join(map(str, yielded)) or 'nothing'} into a memref of {want} "
                "(implicit casts are not supported)")
    for body_op in op.body.block.ops:
        why = _verify_failure(body_op)
        if why is not None:
            return f"has a body that does not verify ({body_op.name}: {why})"
    return None


# affine.parallel `reduce` kinds as upstream `-lower-affine` lowers them: the
# arith op its scf.reduce region applies to (accumulator, value)
# (arith::getReductionOp) and the identity it starts from
# (arith::getIdentityValue: +0.0 for addf).  The other kinds (assign, maxs,
# maxnumf, xori, ...) fail upstream's verifier or its lowering.
_AFFINE_REDUCTIONS = {
    "addf": (arith.AddfOp, 0.0), "mulf": (arith.MulfOp, 1.0),
    "maximumf": (arith.MaximumfOp, -math_inf), "minimumf": (arith.MinimumfOp, math_inf),
    "addi": (arith.AddiOp, 0), "muli": (arith.MuliOp, 1),
    "andi": (arith.AndIOp, -1), "ori": (arith.OrIOp, 0),
}
# arith::AtomicRMWKind by its number, as MLIR's generic form prints `reductions`
_ATOMIC_RMW_KINDS = ("addf", "addi", "andi", "assign", "maximumf", "maxnumf", "maxs", "maxu",
                     "minimumf", "minnumf", "mins", "minu", "mulf", "muli", "ori", "xori")
_AFFINE_PARALLEL_PROPS = ("lowerBoundsMap", "lowerBoundsGroups", "upperBoundsMap",
                          "upperBoundsGroups", "steps")


def _reduction_kinds(op: affine.ParallelOp) -> list[str]:
    """The `reduce` kinds of an affine.parallel: upstream prints them as
    AtomicRMWKind numbers, xDSL declares them as strings; both are read."""
    attr = op.properties.get("reductions")
    kinds = []
    for a in attr.data if isinstance(attr, ArrayAttr) else ():
        if isinstance(a, IntegerAttr) and 0 <= a.value.data < len(_ATOMIC_RMW_KINDS):
            kinds.append(_ATOMIC_RMW_KINDS[a.value.data])
        else:
            kinds.append(a.data if isinstance(a, StringAttr) else str(a))
    return kinds


def _kind_fits(kind: str, t) -> bool:
    """A `reduce` kind -lower-affine lowers, on a result type it accepts (a
    float identity: a float type; an integer one: an integer type)."""
    spec = _AFFINE_REDUCTIONS.get(kind)
    if spec is None:
        return False
    return type(t) in _NP_FLOAT if isinstance(spec[1], float) else isinstance(t, IntegerType)


def _affine_parallel_unsupported(op: affine.ParallelOp) -> str | None:
    """Why an affine.parallel cannot run, or None.  Checked here rather than
    by xDSL's verifier, which counts the results among the operands and
    wants string reductions (upstream's generic form has numbers)."""
    missing = [p for p in _AFFINE_PARALLEL_PROPS if p not in op.properties]
    if missing:
        return f"lacks {', '.join(missing)}"
    lb, ub = op.lowerBoundsMap.data, op.upperBoundsMap.data
    groups = (op.lowerBoundsGroups.get_values(), op.upperBoundsGroups.get_values())
    n = len(op.body.block.args)
    if len(op.steps.data) != n or any(len(g) != n for g in groups) or \
            (sum(groups[0]), sum(groups[1])) != (len(lb.results), len(ub.results)) or \
            len(op.operands) != lb.num_dims + lb.num_symbols + ub.num_dims + ub.num_symbols:
        return "has bound maps, bound groups, steps and operands that do not match"
    kinds = _reduction_kinds(op)
    last = op.body.block.last_op
    yielded = last.operands if isinstance(last, affine.YieldOp) else ()
    if not len(kinds) == len(op.results) == len(yielded):
        return (f"has {len(kinds)} reductions and {len(op.results)} results and yields "
                f"{len(yielded)} values")
    for kind, res in zip(kinds, op.results):
        if not _kind_fits(kind, res.type):
            return (f'reduces with "{kind}" into {res.type} (supported, as upstream '
                    "-lower-affine lowers them: addf, mulf, maximumf, minimumf on floats; "
                    "addi, muli, andi, ori on integers)")
    return None


def _affine_reductions(op: affine.ParallelOp) -> list[tuple[Operation, Any]]:
    """(combiner, identity) per `reduce` result of a checked affine.parallel:
    the combiner is the arith op of its kind on a detached (accumulator,
    value) pair of the result type, so that running it through the
    interpreter rounds or wraps exactly as that op does in a body."""
    out = []
    for kind, res in zip(_reduction_kinds(op), op.results):
        make, identity = _AFFINE_REDUCTIONS[kind]
        acc, value = Block(arg_types=[res.type, res.type]).args
        out.append((make(acc, value), identity))
    return out


# ops whose xDSL verifier checks, as MLIR's, what their implementation here
# relies on (operand, result and region counts; the shapes of reduce/broadcast)
_VERIFIED = (*_AsGeneric.OPS, scf.ParallelOp, scf.ReduceOp)


def _unsupported(op: Operation, impls) -> str | None:
    """Why `op` cannot run in the kernel interpreter, or None."""
    if type(op) not in impls:
        return "has no implementation in the kernel interpreter"
    if isinstance(op, _AsGeneric.OPS) and len(op.operands) != 2:
        return (f"is supported only with one input and one init (it has {len(op.operands)} "
                "operands; xDSL 0.74 defines no variadic form)")
    if isinstance(op, _VERIFIED):
        why = _verify_failure(op)
        if why is not None:
            return f"does not verify ({why})"
    if isinstance(op, _STRUCTURED):
        return _linalg_unsupported(_structured(op))
    if isinstance(op, affine.ParallelOp):
        return _affine_parallel_unsupported(op)
    return None


def _rounders(ops) -> dict:
    """op -> the rounding of each result (None: none), for the ops with a
    floating-point result."""
    table = {}
    for op in ops:
        rd = [_rounder(r.type) for r in op.results]
        if any(f is not None for f in rd):
            table[op] = rd
    return table


class KernelInterpreter(Interpreter):
    """Rounds floating-point op results to their result type (see module doc);
    `reductions` holds each affine.parallel's (combiner, identity) pairs.
    Counts the ops it runs, for a progress callback."""

    rounders: dict = {}
    reductions: dict = {}
    _done = 0
    _total = 0
    _t0 = 0.0

    _progress = None

    def start_progress(self, total: int, progress) -> None:
        self._done, self._total, self._t0 = 0, total, time.perf_counter()
        self._progress = progress

    def _run_op(self, op: Operation, inputs) -> OpImplResult:
        self._done += 1
        if not self._done & 0x3FFF and self._progress is not None:
            elapsed = time.perf_counter() - self._t0
            if elapsed >= 1.0:
                self._progress(self._done, self._total, elapsed)
        r = super()._run_op(op, inputs)
        rd = self.rounders.get(op)
        if rd is not None and r.values:
            r = OpImplResult(tuple(f(v) if f is not None else v for f, v in zip(rd, r.values)),
                             r.terminator_value)
        return r


@lru_cache(maxsize=1)
def _context() -> Context:
    ctx = Context(allow_unregistered=True)
    for d in (builtin.Builtin, func.Func, arith.Arith, affine.Affine, memref.MemRef, math.Math,
              scf.Scf, linalg.Linalg):
        ctx.load_dialect(d)
    register_mlir_dialects(ctx)  # the upstream ops xDSL lacks (affine.max, ...)
    return ctx


def _opname(op: Operation) -> str:
    name = getattr(op, "op_name", None)   # UnregisteredOp keeps the written name
    return name.data if name is not None and hasattr(name, "data") else op.name


def _where(text: str, fn: Operation, op: Operation) -> str:
    """`kernel:LINE:COL` of `op` in the kernel text: the k-th occurrence of its
    name, k = its rank among the same-named ops in textual (walk) order."""
    name = _opname(op)
    k = [o for o in fn.walk() if _opname(o) == name].index(op)
    pos = -1
    for _ in range(k + 1):
        pos = text.find(name, pos + 1)
        if pos < 0:
            return "kernel"
    line = text.count("\n", 0, pos) + 1
    return f"kernel:{line}:{pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


class CompiledKernel:
    """A parsed kernel with its interpreter; built once per kernel text."""

    def __init__(self, text: str):
        try:
            module = Parser(_context(), text, "kernel").parse_module()
        except Exception as e:  # noqa: BLE001 - parse errors become NotSupported
            raise NotSupported(f"{OPNAME}: the kernel text does not parse: "
                               f"{_first_line(e)}") from None
        fns = [o for o in module.ops if isinstance(o, func.FuncOp)]
        if len(fns) != 1 or fns[0].sym_name.data != "kernel":
            raise NotSupported(f"{OPNAME}: the kernel must hold exactly one func.func @kernel")
        self.fn = fns[0]
        self.arg_types = list(self.fn.function_type.inputs.data)
        interp = KernelInterpreter(module)
        for ft in (ArithFunctions(), MemRefFunctions(), MathFunctions(), FuncFunctions(),
                   BuiltinFunctions(), ScfFunctions(), LinalgFunctions()):
            interp.register_implementations(ft)
        for ft in (AffineKernelFunctions(), ScfKernelFunctions(), ScalarKernelFunctions(),
                   LinalgKernelFunctions()):
            interp.register_implementations(ft, override=True)
        impls = interp._impls._impl_dict  # noqa: SLF001 - the table of implemented ops
        ops = list(self.fn.body.walk())
        for op in ops:
            why = _unsupported(op, impls)
            if why is not None:
                raise NotSupported(f"{OPNAME}: {_opname(op)} at {_where(text, self.fn, op)} {why}; "
                                   "the task cannot run in the reference runtime")
        interp.reductions = {op: _affine_reductions(op) for op in ops
                             if isinstance(op, affine.ParallelOp)}
        combiners = [c for pairs in interp.reductions.values() for c, _ in pairs]
        interp.rounders = _rounders([*ops, *combiners])
        self.interp = interp
        self.text, self.module = text, module
        # ops the interpreter runs per call (a lower bound unless exact)
        self.estimate, self.estimate_exact = scalar_ops(self.fn)

    def bind(self, ins: list, outs: list, index_args: list[int]) -> tuple[tuple, list[int]]:
        """Check the task's operands against the signature; `group[k]` is
        the first operand over the same memory as operand k."""
        n_mem = len(ins) + len(outs)
        types = self.arg_types
        if len(types) != n_mem + len(index_args) or \
                not all(isinstance(t, MemRefType) for t in types[:n_mem]) or \
                not all(isinstance(t, IndexType) for t in types[n_mem:]):
            raise NotSupported(f"{OPNAME}: @kernel takes {len(types)} arguments; the task has "
                               f"{len(ins)} ins, {len(outs)} outs and {len(index_args)} "
                               "index_args (contract: a memref per operand, then an index per "
                               "index_args entry)")
        operands = (*ins, *outs)
        for k, (t, ty) in enumerate(zip(operands, types)):
            _check_type(t, ty, k)
        # operands over the same memory (e.g. `compute in Y out Y`) share one memref
        group = list(range(n_mem))
        for k in range(n_mem):
            for j in range(k):
                if _same_memory(operands[j].array, operands[k].array):
                    group[k] = group[j]
                    break
        return operands, group

    def run_interpreted(self, operands, group: list[int], n_in: int,
                         index_args: list[int], progress=None) -> list[np.ndarray]:
        """Run the kernel in the interpreter on `bind`'s operands; returns
        the outs' new contents.  `progress(done, estimate, seconds)` is called
        now and then once the run takes longer than a second."""
        n_mem = len(operands)
        wrapped: dict[int, NumpyShapedArray] = {}
        for g in sorted(set(group)):
            a = operands[g].array
            if any(group[k] == g for k in range(n_in, n_mem)):
                data = np.array(a, order="C", copy=True)   # out: read-modify-write copy
            else:
                data = np.ascontiguousarray(a).view()      # in: read-only view
                data.flags.writeable = False
            wrapped[g] = NumpyShapedArray(data, 4 if operands[g].elem == "i4" else None)
        args: list = [wrapped[group[k]] for k in range(n_mem)]
        out_arrays = [wrapped[group[k]].array for k in range(n_in, n_mem)]
        args.extend(int(v) for v in index_args)
        self.interp.start_progress(self.estimate, progress)
        try:
            with np.errstate(all="ignore"):   # IEEE overflow/invalid give inf/NaN, no warnings
                self.interp.call_op(self.fn, tuple(args))
        except KernelError:
            raise
        except Exception as e:  # noqa: BLE001 - interpreter failures are data-dependent
            root = _cause(e)
            if isinstance(root, KernelError):   # e.g. an out-of-bounds access, re-raised as is
                raise root from None
            raise NumericError(f"{OPNAME}: the kernel failed while running: "
                               f"{_root_cause(e)}") from None
        return [np.asarray(a, dtype=t.array.dtype).reshape(t.array.shape)
                for a, t in zip(out_arrays, operands[n_in:])]


def _cause(e: BaseException) -> BaseException:
    seen = set()
    while id(e) not in seen:
        seen.add(id(e))
        nxt = e.__cause__ or e.__context__ or next(
            (a for a in getattr(e, "args", ()) if isinstance(a, BaseException)), None)
        if nxt is None:
            break
        e = nxt
    return e


def _root_cause(e: BaseException) -> str:
    e = _cause(e)
    if isinstance(e, KernelError):
        return str(e)
    return f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    ia, ib = a.__array_interface__, b.__array_interface__
    return (ia["data"][0] == ib["data"][0] and a.shape == b.shape and a.strides == b.strides
            and a.dtype == b.dtype)


def _check_type(t, ty: MemRefType, k: int) -> None:
    shape = tuple(ty.get_shape())
    el = ty.get_element_type()
    want = _ELEM_MLIR.get(t.elem)
    got = str(el)
    if isinstance(el, IntegerType) and t.elem in ("u8", "u16", "u32"):
        ok = el.width.data == int(t.elem[1:])   # signless iN memref over an unsigned region
    else:
        ok = got == want
    if not ok or shape != tuple(t.array.shape):
        raise NotSupported(f"{OPNAME}: argument {k} of @kernel is {ty} but the task's operand "
                           f"{k} is {t.elem}{list(t.array.shape)}")


_CACHE: dict[str, CompiledKernel] = {}


def compiled(text: str) -> CompiledKernel:
    ck = _CACHE.get(text)
    if ck is None:
        ck = _CACHE[text] = CompiledKernel(text)
    return ck


# ---------------------------------------------------------------------------
# How much work a kernel is for the interpreter (escape_hatch's estimates)
# ---------------------------------------------------------------------------


def _trip(lb: int | None, ub: int | None, step: int | None) -> int | None:
    if lb is None or ub is None or step is None:
        return None
    return max(0, -(-(ub - lb) // step))


def _const_map(attr) -> int | None:
    m = attr.data
    if m.num_dims or m.num_symbols or len(m.results) != 1:
        return None
    return m.eval([], [])[0]


def _const_value(v) -> int | None:
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _product(trips) -> int | None:
    n = 1
    for t in trips:
        if t is None:
            return None
        n *= t
    return n


def _iterations(op: Operation) -> int | None:
    """How many times `op` runs its region: 1 for ops that are not loops,
    None for a loop whose trip count is not known statically."""
    if isinstance(op, affine.ForOp):
        if op.operands:
            return None
        return _trip(_const_map(op.lowerBoundMap), _const_map(op.upperBoundMap),
                     op.step.value.data)
    if isinstance(op, scf.ForOp):
        return _trip(_const_value(op.lb), _const_value(op.ub), _const_value(op.step))
    if isinstance(op, affine.ParallelOp):
        if op.operands:
            return None
        lbs, ubs = op.lowerBoundsMap.data.eval([], []), op.upperBoundsMap.data.eval([], [])
        return _product(_trip(lb, ub, st.value.data)
                        for lb, ub, st in zip(lbs, ubs, op.steps.data))
    if isinstance(op, scf.ParallelOp):
        return _product(_trip(_const_value(lb), _const_value(ub), _const_value(st))
                        for lb, ub, st in zip(op.lowerBound, op.upperBound, op.step))
    if isinstance(op, _STRUCTURED):
        s = _structured(op)
        shapes = [d for v in (*s.inputs, *s.outputs) if isinstance(v.type, MemRefType)
                  for d in v.type.get_shape()]
        return _product(max(r, 0) for r in s.get_shapes_to_loops_map().eval(shapes, []))
    if isinstance(op, scf.WhileOp):
        return None
    return 1


def scalar_ops(op: Operation) -> tuple[int, bool]:
    """How many ops the interpreter runs for `op`'s regions, and whether that
    is exact: a loop whose trip count is not known statically counts once
    (and makes the count a lower bound)."""
    total, exact = 0, True
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                n = _iterations(inner)
                ops, ok = scalar_ops(inner)
                total += 1 + (1 if n is None else n) * ops
                exact = exact and ok and n is not None
    return total, exact
