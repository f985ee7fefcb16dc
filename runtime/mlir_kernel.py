"""Executing `compute ... op="mlir.kernel"` escape-hatch tasks (D-RT-MLIR-KERNEL).

The lowering (`passes/raise_compute.py`, D-LOW-ESCAPE) turns a loop nest it
cannot raise into a `compute` task whose `kernel` attribute is the generic
MLIR text of `func.func @kernel(memref per operand (ins, then outs), index
per index_args entry)`.  Running the body once on those arguments is the
task.  This module runs it with xDSL's interpreter:

* the text is parsed once per distinct kernel string and cached together
  with a configured interpreter (not once per task instance);
* before the first run every op of the body is checked against the
  interpreter's implementations; an op it lacks (or an unsupported form, e.g.
  a multi-output `linalg.generic`) raises `NotSupported("compute
  op=mlir.kernel: <op> at kernel:<line>:<col> ...")`, never a wrong answer;
* memref arguments are `ShapedArray`s backed directly by numpy arrays
  (`NumpyShapedArray`): inputs wrap the region's data, outputs a copy of
  their current contents (read-modify-write); loads and stores index the
  numpy array (bounds-checked) instead of packing bytes through `TypedPtr`;
* floating-point results are rounded to their MLIR result type after every
  op (f32, f16, bf16), so each `arith` op is the IEEE operation of its type:
  the interpreter computes in Python floats (binary64), and rounding a
  binary64 `+ - * /` result of two f32/f16/bf16 operands to the narrower type
  is the correctly rounded narrow result (53 >= 2p + 2); `math.*` functions
  are libm's binary64 value rounded once.  Integer ops wrap at their width
  (xDSL's arith implementations); storing an integer wraps to the memref's
  element width;
* `affine.load/store/apply/for/min` are re-implemented here: xDSL's
  versions pass every map operand as a dimension and ignore `affine.for`
  bound operands and `iter_args`, which the kernels use (`()[s0, s1] ->
  (s0, s1)` load maps, loop bounds from `index_args`).
"""

from __future__ import annotations

from functools import lru_cache
from math import erf as _erf
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects import affine, arith, builtin, func, linalg, math, memref, scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IndexType,
    IntegerType,
    MemRefType,
)
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
from xdsl.interpreters.linalg import LinalgFunctions
from xdsl.interpreters.math import MathFunctions
from xdsl.interpreters.memref import MemRefFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.interpreters.shaped_array import ShapedArray
from xdsl.dialects.linalg.ops import GenericOp as LinalgGenericOp
from xdsl.dialects.linalg.ops import YieldOp as LinalgYieldOp
from xdsl.ir import Operation
from xdsl.parser import Parser

from nem.frontends.mlir import register_mlir_dialects
from nem.frontends.mlir.affine_max import AffineMaxOp
from nem.runtime.numerics import KernelError, NotSupported, NumericError

OPNAME = "compute op=mlir.kernel"

# spec element name -> MLIR element type name accepted for it
_ELEM_MLIR = {"f32": "f32", "f16": "f16", "bf16": "bf16", "i8": "i8", "i16": "i16",
              "i32": "i32", "u8": "ui8", "u16": "ui16", "u32": "ui32", "i4": "i4"}


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
            raise NumericError(f"{OPNAME}: access at {list(index)} is outside the memref of "
                               f"shape {self.shape} (HAZ-04)")
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


def _eval_map(m, operands) -> list[int]:
    nd = m.num_dims
    return m.eval(list(operands[:nd]), list(operands[nd:]))


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

    @impl_terminator(affine.YieldOp)
    def run_yield(self, interpreter: Interpreter, op: affine.YieldOp, args: tuple[Any, ...]):
        return ReturnedValues(args), ()


def _int_result(op: Operation, value: int) -> int:
    """Wrap an integer result to its type's width (two's complement; index
    results are unbounded), as the hardware integer ops do (D-RT-MLIR-KERNEL)."""
    t = op.results[0].type
    if not isinstance(t, IntegerType):
        return value
    w = t.width.data
    value &= (1 << w) - 1
    return value - (1 << w) if value >= 1 << (w - 1) else value


def _fdiv(a: float, b: float) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(a) / np.float64(b))


def _trunc_div(a: int, b: int) -> int:
    if b == 0:
        raise NumericError(f"{OPNAME}: integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _unary(fn):
    return lambda self, interpreter, op, args: (fn(args[0]),)


def _int_binary(fn):
    return lambda self, interpreter, op, args: (_int_result(op, fn(args[0], args[1])),)


class ScalarKernelFunctions(InterpreterFunctions):
    """arith/math ops xDSL's interpreter lacks.  Float results are rounded to
    their type by `KernelInterpreter`; integer results wrap to their width.
    (Registered below, once the numpy-backed unary math ops are added.)"""

    run_divf = impl(arith.DivfOp)(lambda self, interpreter, op, args: (_fdiv(*args),))
    run_negf = impl(arith.NegfOp)(_unary(lambda a: -a))
    run_maxnumf = impl(arith.MaxnumfOp)(lambda self, i, op, args: (float(np.fmax(*args)),))
    run_minnumf = impl(arith.MinnumfOp)(lambda self, i, op, args: (float(np.fmin(*args)),))
    run_extf = impl(arith.ExtFOp)(_unary(float))
    run_truncf = impl(arith.TruncFOp)(_unary(float))
    run_sitofp = impl(arith.SIToFPOp)(_unary(float))
    run_fptosi = impl(arith.FPToSIOp)(
        lambda self, i, op, args: (_int_result(op, int(np.trunc(args[0]))),))
    run_extsi = impl(arith.ExtSIOp)(_unary(int))
    run_trunci = impl(arith.TruncIOp)(lambda self, i, op, args: (_int_result(op, args[0]),))
    run_maxsi = impl(arith.MaxSIOp)(_int_binary(max))
    run_minsi = impl(arith.MinSIOp)(_int_binary(min))
    run_divsi = impl(arith.DivSIOp)(_int_binary(_trunc_div))
    run_absf = impl(math.AbsFOp)(_unary(abs))
    run_absi = impl(math.AbsIOp)(lambda self, i, op, args: (_int_result(op, abs(args[0])),))
    run_erf = impl(math.ErfOp)(_unary(_erf))
    run_powf = impl(math.PowFOp)(lambda self, i, op, args: (float(np.power(*args)),))


_NUMPY_UNARY = {
    math.TanhOp: np.tanh, math.CosOp: np.cos, math.SinOp: np.sin, math.TanOp: np.tan,
    math.AtanOp: np.arctan, math.AsinOp: np.arcsin, math.AcosOp: np.arccos,
    math.SinhOp: np.sinh, math.CoshOp: np.cosh, math.AtanhOp: np.arctanh,
    math.AsinhOp: np.arcsinh, math.AcoshOp: np.arccosh, math.FloorOp: np.floor,
    math.CeilOp: np.ceil, math.TruncOp: np.trunc, math.RoundEvenOp: np.rint,
    math.CbrtOp: np.cbrt,
}
"""Float math ops evaluated in f64 by numpy, then rounded to the result type."""


def _numpy_unary(fn):
    def run(self, interpreter, op, args):
        with np.errstate(all="ignore"):
            return (float(fn(np.float64(args[0]))),)
    return run


for _op, _fn in _NUMPY_UNARY.items():
    setattr(ScalarKernelFunctions, f"run_{_op.name.split('.')[1]}",
            impl(_op)(_numpy_unary(_fn)))
ScalarKernelFunctions = register_impls(ScalarKernelFunctions)

def _rounder(t):
    if isinstance(t, Float32Type):
        return lambda v: float(np.float32(v))
    if isinstance(t, Float16Type):
        return lambda v: float(np.float16(v))
    if isinstance(t, BFloat16Type):
        return lambda v: float(ml_dtypes.bfloat16(v))
    return None


class KernelInterpreter(Interpreter):
    """Rounds floating-point op results to their result type (see module doc)."""

    rounders: dict = {}

    def _run_op(self, op: Operation, inputs) -> OpImplResult:
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
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise NotSupported(f"{OPNAME}: the kernel text does not parse: {first}") from None
        fns = [o for o in module.ops if isinstance(o, func.FuncOp)]
        if len(fns) != 1 or fns[0].sym_name.data != "kernel":
            raise NotSupported(f"{OPNAME}: the kernel must hold exactly one func.func @kernel")
        self.fn = fns[0]
        self.arg_types = list(self.fn.function_type.inputs.data)
        interp = KernelInterpreter(module)
        for ft in (ArithFunctions(), MemRefFunctions(), MathFunctions(), FuncFunctions(),
                   BuiltinFunctions(), ScfFunctions(), LinalgFunctions()):
            interp.register_implementations(ft)
        interp.register_implementations(AffineKernelFunctions(), override=True)
        interp.register_implementations(ScalarKernelFunctions(), override=True)
        impls = interp._impls._impl_dict  # noqa: SLF001 - the table of implemented ops
        rounders: dict = {}
        for op in self.fn.body.walk():
            why = None
            if type(op) not in impls:
                why = "has no implementation in the kernel interpreter"
            elif isinstance(op, LinalgGenericOp) and (
                    len(op.outputs) != 1 or op.results or op.library_call is not None):
                why = "is supported only with one memref output, no results, no library_call"
            elif op.name.startswith("linalg.") and \
                    not isinstance(op, LinalgGenericOp | LinalgYieldOp):
                why = "(a named linalg op) is not supported by the kernel interpreter"
            if why is not None:
                raise NotSupported(f"{OPNAME}: {_opname(op)} at {_where(text, self.fn, op)} {why}; "
                                   "the task cannot run in the reference runtime")
            rd = [_rounder(r.type) for r in op.results]
            if any(f is not None for f in rd):
                rounders[op] = rd
        interp.rounders = rounders
        self.interp = interp

    def run(self, ins: list, outs: list, index_args: list[int]) -> list[np.ndarray]:
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
        wrapped: dict[int, NumpyShapedArray] = {}
        for g in sorted(set(group)):
            a = operands[g].array
            if any(group[k] == g for k in range(len(ins), n_mem)):
                data = np.array(a, order="C", copy=True)   # out: read-modify-write copy
            else:
                data = np.ascontiguousarray(a).view()      # in: read-only view
                data.flags.writeable = False
            wrapped[g] = NumpyShapedArray(data, 4 if operands[g].elem == "i4" else None)
        args: list = [wrapped[group[k]] for k in range(n_mem)]
        out_arrays = [wrapped[group[k]].array for k in range(len(ins), n_mem)]
        args.extend(int(v) for v in index_args)
        try:
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
                for a, t in zip(out_arrays, outs)]


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


def run_mlir_kernel(ins: list, outs: list, attrs: dict) -> list[np.ndarray]:
    """`KERNELS["compute"]` for op="mlir.kernel": ins/outs are `Tensor`s, attrs
    hold `kernel` (text) and `index_args` (ints, evaluated by the engine)."""
    text = attrs.get("kernel")
    if not isinstance(text, str):
        raise NotSupported(f"{OPNAME}: missing string attribute 'kernel'")
    extra = sorted(set(attrs) - {"op", "kernel", "index_args"})
    if extra:
        raise NotSupported(f"{OPNAME}: unknown attribute(s) {', '.join(extra)}")
    idx = attrs.get("index_args", [])
    if not isinstance(idx, list) or not all(isinstance(v, int) for v in idx):
        raise NotSupported(f"{OPNAME}: index_args must be a list of integer expressions")
    if any(t.quant is not None for t in (*ins, *outs)):
        raise NotSupported(f"{OPNAME}: quantized operands are not supported (the kernel sees "
                           "raw element values)")
    return compiled(text).run(ins, outs, idx)
