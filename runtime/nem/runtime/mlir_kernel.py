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
  dimension order, the body region interpreted per point and rounded per op
  (`linalg.index` gives the point's index: session 66);
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

The op implementations live apart: `mlir_kernel_scalar` (arith/math, the
undefined cases, rounding), `mlir_kernel_loops` (affine, scf, linalg, and
what makes one unsupported).  This module holds the interpreter that rounds
after every op, the parsed-kernel cache and the work estimates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Self, TypeVar

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects import affine, arith, builtin, func, linalg, math, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
)
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    OpImplResult,
    PythonValues,
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
from xdsl.ir import Operation, SSAValue
from xdsl.irdl import IRDLOperation, OptionalDef
from xdsl.traits import IsTerminator

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.elements import ELEM_TYPES
from nem.dialect.per_class import PerClass
from nem.frontends.upstream_dialects import register_mlir_dialects
from nem.frontends.upstream_dialects.affine_ssa_maps import UpstreamParser
from nem.frontends.upstream_dialects.mlir_input import check_mlir_text
from nem.runtime.mlir_kernel_loops import (
    STRUCTURED,
    AffineKernelFunctions,
    LinalgKernelFunctions,
    ScfKernelFunctions,
    affine_reductions,
    as_structured,
    first_line,
    unsupported,
)
from nem.runtime.mlir_kernel_scalar import OPNAME, ScalarKernelFunctions, outside_error, rounder
from nem.runtime.mlir_kernel_views import ViewKernelFunctions
from nem.runtime.numerics import KernelError, NotSupported, NumericError

if TYPE_CHECKING:
    from nem.runtime.kernel_support import Tensor

Progress = Callable[[int, int, float], None]
"""progress(done, estimated, seconds): a long interpreted run's progress."""

MemrefSig = tuple[tuple[int, ...], str, int | None]
"""(shape, element type text, integer width or None) of a memref argument."""

Rounding = Callable[[float], float] | None
"""How an op's result is rounded to its type (None: not a float result)."""

# spec element name -> MLIR element type name accepted for it
_ELEM_MLIR = {n: e.mlir for n, e in ELEM_TYPES.items()}


class NumpyShapedArray(ShapedArray[float]):
    """A memref value whose elements live in a numpy array (C order).

    `load`/`store` index the array directly; indices are bounds-checked
    (numpy would silently wrap negative ones)."""

    def __init__(self, array: np.ndarray, bits: int | None = None) -> None:
        # `_data` is not used by the implementations registered here; the
        # numpy array is the storage.  `bits`: element width when narrower
        # than the array's dtype (i4 unpacked to int8, D-RT-I4).
        super().__init__(None, list(array.shape))  # type: ignore[arg-type]
        self.array = array
        self.bits = bits
        self._is_float = array.dtype.kind == "f" or array.dtype == ml_dtypes.bfloat16
        if not self._is_float:
            info = np.iinfo(array.dtype)
            self._lo, self._span = int(info.min), int(info.max) - int(info.min) + 1
            if bits is not None and bits < 8 * array.dtype.itemsize:
                self._lo, self._span = -(1 << (bits - 1)), 1 << bits

    def _check(self, index: Sequence[int]) -> tuple[int, ...]:
        index = tuple(index)
        if len(index) != len(self.shape) or any(not 0 <= i < d for i, d in zip(index, self.shape)):
            raise outside_error(index, self.shape)
        return index

    def load(self, index: Sequence[int]) -> float:
        value: float = self.array.item(self._check(index))
        return value

    def store(self, index: Sequence[int], value: float) -> None:
        at = self._check(index)
        if not self._is_float:
            value = (int(value) - self._lo) % self._span + self._lo
        self.array[at] = value

    def copy(self) -> Self:
        return type(self)(self.array.copy())

    def sharing(self, view: np.ndarray, bits: int | None = None) -> Self:
        """A memref view of this one (`mlir_kernel_views`): `view`, a numpy
        view of this array's storage, of this element width unless `bits`."""
        return type(self)(view, self.bits if bits is None else bits)


def _rounders(ops: Iterable[Operation]) -> dict[Operation, list[Rounding]]:
    """op -> the rounding of each result (None: none), for the ops with a
    floating-point result."""
    table = {}
    for op in ops:
        rd = [rounder(r.type) for r in op.results]
        if any(f is not None for f in rd):
            table[op] = rd
    return table


class KernelInterpreter(Interpreter):
    """Rounds floating-point op results to their result type (see module doc);
    `reductions` holds each affine.parallel's (combiner, identity) pairs.
    Counts the ops it runs, for a progress callback."""

    rounders: dict[Operation, list[Rounding]] = {}
    reductions: dict[Operation, list[tuple[Operation, Any]]] = {}
    _done = 0
    _total = 0
    _t0 = 0.0

    _progress: Progress | None = None

    def start_progress(self, total: int, progress: Progress | None) -> None:
        self._done, self._total, self._t0 = 0, total, time.perf_counter()
        self._progress = progress

    def _run_op(self, op: Operation, inputs: PythonValues) -> OpImplResult:
        self._done += 1
        if not self._done & 0x3FFF and self._progress is not None:
            elapsed = time.perf_counter() - self._t0
            if elapsed >= 1.0:
                self._progress(self._done, self._total, elapsed)
        r = super()._run_op(op, inputs)
        rd = self.rounders.get(op)
        if rd is not None and r.values:
            r = OpImplResult(
                tuple(f(v) if f is not None else v for f, v in zip(rd, r.values)),
                r.terminator_value,
            )
        return r


_InterpreterT = TypeVar("_InterpreterT", bound=Interpreter)


def _with_implementations(interp: _InterpreterT) -> _InterpreterT:
    """`interp` with xDSL's op implementations and the kernel ones over them."""
    for ft in (
        ArithFunctions(),
        MemRefFunctions(),
        MathFunctions(),
        FuncFunctions(),
        BuiltinFunctions(),
        ScfFunctions(),
        LinalgFunctions(),
    ):
        interp.register_implementations(ft)
    for kernel_ft in (
        AffineKernelFunctions(),
        ScfKernelFunctions(),
        ScalarKernelFunctions(),
        LinalgKernelFunctions(),
        ViewKernelFunctions(),
    ):
        interp.register_implementations(kernel_ft, override=True)
    return interp


def _implemented(op_type: type[Operation]) -> bool:
    """Whether the kernel interpreter implements `op_type`.  xDSL has no
    public query (docs/upstream-reports.md, 11), but its
    `register_implementations` refuses, with a ValueError, a second
    implementation of an op type without `override`: a table implementing
    `op_type` alone is refused by an interpreter configured as the kernel's
    exactly when that interpreter implements it."""

    def run(ft: InterpreterFunctions, interpreter: Interpreter, op: Operation, args: Any) -> Any:
        raise AssertionError("a probe is never run")

    mark = impl_terminator if op_type.has_trait(IsTerminator) else impl
    probe: type[InterpreterFunctions] = register_impls(
        type("Probe", (InterpreterFunctions,), {"run": mark(op_type)(run)})
    )
    try:
        _with_implementations(Interpreter(builtin.ModuleOp([]))).register_implementations(probe())
    except ValueError:
        return True
    return False


class _Implemented(Container[type[Operation]]):
    """The op types the kernel interpreter implements (`_implemented`, once per type)."""

    def __init__(self) -> None:
        self.table = PerClass(_implemented)

    def __contains__(self, op_type: object) -> bool:
        return isinstance(op_type, type) and self.table[op_type]


IMPLEMENTED = _Implemented()


@lru_cache(maxsize=1)
def _context() -> Context:
    ctx = Context(allow_unregistered=True)
    register_mlir_dialects(ctx)  # affine, memref with the upstream ops xDSL lacks (affine.max, ...)
    for d in (builtin.Builtin, func.Func, arith.Arith, math.Math, scf.Scf, linalg.Linalg):
        if d.name in ctx.registered_dialect_names:  # linalg, with linalg.softmax
            ctx.load_registered_dialect(d.name)
        else:
            ctx.load_dialect(d)
    return ctx


def _opname(op: Operation) -> str:
    name = getattr(op, "op_name", None)  # UnregisteredOp keeps the written name
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


def _check_required_fields(module: builtin.ModuleOp, text: str) -> None:
    """Generic-form text parses without an op's required properties and
    attributes (a `func.func` without `function_type`), which reading them
    then raises on (issue 11).  The full verifier is not run: its messages
    are less precise than the kernel checks' own (operand types, ops)."""
    for op in module.walk():
        if not isinstance(op, IRDLOperation):
            continue
        d = op.get_irdl_definition()
        for kind, defs, present in (
            ("property", d.properties, op.properties),
            ("attribute", d.attributes, op.attributes),
        ):
            for name, fdef in defs.items():
                if (
                    name not in present
                    and not isinstance(fdef, OptionalDef)
                    and getattr(fdef, "default_value", None) is None
                ):
                    raise NotSupported(
                        f"{OPNAME}: {op.name} at {_where(text, module, op)} lacks its "
                        f"required {kind} '{name}'"
                    )


def _check_text(text: str) -> None:
    """The linear pre-scan of MLIR text (`check_mlir_text`: strings that
    close, with MLIR's escapes; bounded nesting; ASCII) before xDSL's lexer,
    whose string regex backtracks exponentially on a string that does not
    close (D-XDSL-STRING-LEXER, docs/upstream-reports.md 1)."""
    try:
        check_mlir_text(text, "kernel")
    except NemDiagnosticError as e:
        d = e.diagnostics[0]
        raise NotSupported(
            f"{OPNAME}: the kernel text does not parse: {d.loc}: {d.message}"
            if d.loc
            else d.message
        ) from None


class CompiledKernel:
    """A parsed kernel with its interpreter; built once per kernel text."""

    def __init__(self, text: str):
        _check_text(text)
        try:
            module = UpstreamParser(_context(), text, "kernel").parse_module()
        except Exception as e:  # noqa: BLE001 - parse errors become NotSupported
            # xDSL's ParseError: location, source line, caret, message
            lines = str(e).strip().splitlines()
            where = f"{lines[0]}: {lines[-1].strip()}" if len(lines) > 1 else first_line(e)
            raise NotSupported(f"{OPNAME}: the kernel text does not parse: {where}") from None
        _check_required_fields(module, text)
        fns = [o for o in module.ops if isinstance(o, func.FuncOp)]
        if len(fns) != 1 or fns[0].sym_name.data != "kernel":
            raise NotSupported(f"{OPNAME}: the kernel must hold exactly one func.func @kernel")
        self.fn = fns[0]
        self.arg_types = list(self.fn.function_type.inputs.data)
        self._arg_sigs: dict[int, MemrefSig] = {}  # argument -> _memref_sig (bind)
        interp = _with_implementations(KernelInterpreter(module))
        ops = list(self.fn.body.walk())
        for op in ops:
            why = unsupported(op, IMPLEMENTED)
            if why is not None:
                raise NotSupported(
                    f"{OPNAME}: {_opname(op)} at {_where(text, self.fn, op)} {why}; "
                    "the task cannot run in the reference runtime"
                )
        interp.reductions = {
            op: affine_reductions(op) for op in ops if isinstance(op, affine.ParallelOp)
        }
        combiners = [c for pairs in interp.reductions.values() for c, _ in pairs]
        interp.rounders = _rounders([*ops, *combiners])
        self.interp = interp
        self.text, self.module = text, module
        # ops the interpreter runs per call (a lower bound unless exact)
        self.estimate, self.estimate_exact = scalar_ops(self.fn)

    def bind(
        self, ins: list[Tensor], outs: list[Tensor], index_args: list[int]
    ) -> tuple[tuple[Tensor, ...], list[int]]:
        """Check the task's operands against the signature; `group[k]` is
        the first operand over the same memory as operand k."""
        n_mem = len(ins) + len(outs)
        types = self.arg_types
        if (
            len(types) != n_mem + len(index_args)
            or not all(isinstance(t, MemRefType) for t in types[:n_mem])
            or not all(isinstance(t, IndexType) for t in types[n_mem:])
        ):
            raise NotSupported(
                f"{OPNAME}: @kernel takes {len(types)} arguments; the task has "
                f"{len(ins)} ins, {len(outs)} outs and {len(index_args)} "
                "index_args (contract: a memref per operand, then an index per "
                "index_args entry)"
            )
        operands = [*ins, *outs]
        sigs = self._arg_sigs
        for k, (t, ty) in enumerate(zip(operands, types)):
            assert isinstance(ty, MemRefType)  # checked above
            sig = sigs.get(k)
            if sig is None:
                sig = sigs[k] = _memref_sig(ty)
            if sig[0] == () and t.array.shape == (1,):
                # a 0-d memref over a one-element region: NEM regions have a
                # rank, the lowering gives a 0-d memref `shape=[1]` (D-LOW-REGION)
                t = operands[k] = replace(t, array=t.array.reshape(()))
            _check_type(t, ty, sig, k)
        # operands over the same memory (e.g. `compute in Y out Y`) share one memref
        group = list(range(n_mem))
        for k in range(n_mem):
            for j in range(k):
                if _same_memory(operands[j].array, operands[k].array):
                    group[k] = group[j]
                    break
        return tuple(operands), group

    def run_interpreted(
        self,
        operands: Sequence[Tensor],
        group: list[int],
        n_in: int,
        index_args: list[int],
        progress: Progress | None = None,
    ) -> list[np.ndarray]:
        """Run the kernel in the interpreter on `bind`'s operands; returns
        the outs' new contents.  `progress(done, estimate, seconds)` is called
        now and then once the run takes longer than a second."""
        n_mem = len(operands)
        wrapped: dict[int, NumpyShapedArray] = {}
        for g in sorted(set(group)):
            a = operands[g].array
            if any(group[k] == g for k in range(n_in, n_mem)):
                data = np.array(a, order="C", copy=True)  # out: read-modify-write copy
            else:
                data = np.asarray(a, order="C").view()  # in: read-only view (0-d kept)
                data.flags.writeable = False
            wrapped[g] = NumpyShapedArray(data, 4 if operands[g].elem == "i4" else None)
        args: list[NumpyShapedArray | int] = [wrapped[group[k]] for k in range(n_mem)]
        out_arrays = [wrapped[group[k]].array for k in range(n_in, n_mem)]
        args.extend(int(v) for v in index_args)
        self.interp.start_progress(self.estimate, progress)
        try:
            with np.errstate(all="ignore"):  # IEEE overflow/invalid give inf/NaN, no warnings
                self.interp.call_op(self.fn, tuple(args))
        except KernelError:
            raise
        except Exception as e:  # noqa: BLE001 - interpreter failures are data-dependent
            root = _cause(e)
            if isinstance(root, KernelError):  # e.g. an out-of-bounds access, re-raised as is
                raise root from None
            raise NumericError(
                f"{OPNAME}: the kernel failed while running: {_root_cause(e)}"
            ) from None
        return [
            np.asarray(a, dtype=t.array.dtype).reshape(t.array.shape)
            for a, t in zip(out_arrays, operands[n_in:])
        ]


def _cause(e: BaseException) -> BaseException:
    seen: set[int] = set()
    while id(e) not in seen:
        seen.add(id(e))
        nxt = (
            e.__cause__
            or e.__context__
            or next((a for a in getattr(e, "args", ()) if isinstance(a, BaseException)), None)
        )
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
    return (
        ia["data"][0] == ib["data"][0]
        and a.shape == b.shape
        and a.strides == b.strides
        and a.dtype == b.dtype
    )


def _memref_sig(ty: MemRefType) -> MemrefSig:
    """(shape, element type text, integer width or None) of a memref argument:
    computed once per kernel (printing an xDSL type is slow)."""
    el = ty.get_element_type()
    return (tuple(ty.get_shape()), str(el), el.width.data if isinstance(el, IntegerType) else None)


def _check_type(t: Tensor, ty: MemRefType, sig: MemrefSig, k: int) -> None:
    shape, got, width = sig
    if width is not None and t.elem in ("u8", "u16", "u32"):
        ok = width == int(t.elem[1:])  # signless iN memref over an unsigned region
    else:
        ok = got == _ELEM_MLIR.get(t.elem)
    if not ok or shape != t.array.shape:
        raise NotSupported(
            f"{OPNAME}: argument {k} of @kernel is {ty} but the task's operand "
            f"{k} is {t.elem}{list(t.array.shape)}"
        )


# ---------------------------------------------------------------------------
# How much work a kernel is for the interpreter (escape_hatch's estimates)
# ---------------------------------------------------------------------------


def _trip(lb: int | None, ub: int | None, step: int | None) -> int | None:
    if lb is None or ub is None or step is None:
        return None
    return max(0, -(-(ub - lb) // step))


def _const_map(attr: AffineMapAttr) -> int | None:
    m = attr.data
    if m.num_dims or m.num_symbols or len(m.results) != 1:
        return None
    return m.eval([], [])[0]


def _const_value(v: SSAValue) -> int | None:
    owner = v.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _product(trips: Iterable[int | None]) -> int | None:
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
        return _trip(_const_map(op.lowerBoundMap), _const_map(op.upperBoundMap), op.step.value.data)
    if isinstance(op, scf.ForOp):
        return _trip(_const_value(op.lb), _const_value(op.ub), _const_value(op.step))
    if isinstance(op, affine.ParallelOp):
        if op.operands:
            return None
        lbs, ubs = op.lowerBoundsMap.data.eval([], []), op.upperBoundsMap.data.eval([], [])
        return _product(_trip(lb, ub, st.value.data) for lb, ub, st in zip(lbs, ubs, op.steps.data))
    if isinstance(op, scf.ParallelOp):
        return _product(
            _trip(_const_value(lb), _const_value(ub), _const_value(st))
            for lb, ub, st in zip(op.lowerBound, op.upperBound, op.step)
        )
    if isinstance(op, STRUCTURED):
        s = as_structured(op)
        shapes = [
            d
            for v in (*s.inputs, *s.outputs)
            if isinstance(v.type, MemRefType)
            for d in v.type.get_shape()
        ]
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
