"""Preparing an escape-hatch kernel for native compilation (D-RT-MLIR-JIT).

`mlir_native` compiles an `op="mlir.kernel"` kernel with upstream MLIR.  This
module rewrites a copy of the kernel's xDSL IR first, so that the native
code computes what the interpreter (`mlir_kernel`, D-RT-MLIR-KERNEL-OPS)
computes, bit for bit, and stops where the interpreter stops:

* What MLIR leaves undefined (division by zero, signed division overflow, a
  shift by >= the width, `ipowi(0, b < 0)`, `fptosi`/`fptoui` out of range,
  a non-positive `scf.for`/`scf.parallel` step) and accesses outside a
  memref are checked before the op: a failing check calls `nem_trap(site,
  payload...)` (the first call is recorded and reported with the
  interpreter's message, `mlir_kernel_scalar.UNDEFINED`) and the op runs on safe
  operands instead (divisor 1, shift 0, no access), so native code never
  faults.  `remsi(MIN, -1)`, which the interpreter defines as 0 and x86
  faults on, runs as `remsi(MIN, 1)`.
* Floating point: f16/bf16 arithmetic is f32 arithmetic rounded to the type
  after each op (exact, as in the interpreter, for + - * / sqrt since
  24 >= 2p + 2; upstream's `arith-emulate-unsupported-floats` marks its
  conversions `contract`, which lets LLVM drop the roundings); every narrowing to
  f16/bf16 from f64 (a `truncf`, an int-to-float conversion, a math result)
  rounds to odd at f32 first, then to nearest-even, which is the one
  correct rounding (the interpreter's `_f32_odd`; LLVM would round twice or
  call a helper the process lacks); the transcendental math ops
  (`mlir_kernel_scalar.LIBM_OPS`) call the C library's binary64 function through
  `nem_libm_<name>` symbols bound to the same functions the interpreter
  calls, and round once to the result type; `rsqrt` is `1 / sqrt` at f64.
* `arith.maximumf`/`minimumf` become selects that order -0 < +0 (upstream's
  `arith-expand`, needed for the bf16 conversions, does not).
* `memref.alloc` is zero-filled (the interpreter's allocations are).
* Affine maps get only dimensions (xDSL's parser makes `%m[%i, %j]`
  subscripts symbols, which upstream rejects for loop indices), and
  `affine.parallel` reductions are written as upstream's numbers.
* Arguments over the same memory (`compute in Y out Y`) become one value,
  as the interpreter binds them to one memref; unsigned memref elements
  become signless (the same bytes).
* A parallel loop is moved innermost where that is exact (`loop_sink`).

A kernel this cannot prepare raises `JitUnsupported` with the reason; the
runtime then interprets it.
"""

from __future__ import annotations

import platform
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from io import StringIO

from xdsl.builder import Builder
from xdsl.dialects import affine, arith, func, math, memref, scf
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    BFloat16Type,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    NoneAttr,
    Signedness,
    UnitAttr,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstraintExpr, AffineExpr, AffineMap, AffineSet
from xdsl.printer import Printer
from xdsl.rewriter import InsertPoint, Rewriter

from nem.runtime import mlir_kernel_loops as kl
from nem.runtime import mlir_kernel_scalar as ks
from nem.runtime.loop_sink import sink_parallel_loops
from nem.runtime.numerics import NumericError

TRAP = "nem_trap"
PAYLOAD = 8  # payload words of a trap call (indices of a memref of rank <= 8)
LIBM_PREFIX = "nem_libm_"
I1, I64, F32, F64, IDX = IntegerType(1), IntegerType(64), Float32Type(), Float64Type(), IndexType()
_NARROW = (Float16Type, BFloat16Type)
_FLOATS = (Float16Type, BFloat16Type, Float32Type, Float64Type)
_SIGNED_QUOTIENTS = (arith.DivSIOp, arith.FloorDivSIOp, arith.CeilDivSIOp)
_DIVISIONS = (*_SIGNED_QUOTIENTS, arith.RemSIOp, arith.DivUIOp, arith.CeilDivUIOp, arith.RemUIOp)
_SHIFTS = (arith.ShLIOp, arith.ShRSIOp, arith.ShRUIOp)
# ops computed at f32 for f16/bf16 operands, each result rounded to the type:
# exact (+ - * / sqrt: 24 >= 2 * 11 + 2; the others are exact at any width)
_AT_F32 = (
    arith.AddfOp,
    arith.SubfOp,
    arith.MulfOp,
    arith.DivfOp,
    arith.MaxnumfOp,
    arith.MinnumfOp,
    arith.CmpfOp,
    math.SqrtOp,
    math.AbsFOp,
    math.CopySignOp,
    math.FloorOp,
    math.CeilOp,
    math.TruncOp,
    math.RoundOp,
    math.RoundEvenOp,
)


class JitUnsupported(Exception):
    """The native backend cannot take this kernel (the message says why)."""


Site = Callable[[list[int]], NumericError]  # trap payload -> the interpreter's error


@dataclass
class Prepared:
    """A kernel ready for upstream MLIR: its generic text, its trap sites
    (site k is `sites[k - 1]`) and the libm functions it calls."""

    text: str
    sites: list[Site] = field(default_factory=list)
    libm: set[str] = field(default_factory=set)


def _width(t: Attribute) -> int:
    return t.width.data if isinstance(t, IntegerType) else 64


def _reading(signed: bool) -> Callable[[int, int], int]:
    """How the interpreter reads an integer operand (signed or unsigned)."""
    return ks.as_signed if signed else ks.as_unsigned


def _f64_of(bits: int) -> float:
    value: float = struct.unpack("<d", struct.pack("<q", bits))[0]
    return value


@lru_cache(maxsize=1)
def host_converts_f16() -> bool:
    """Whether LLVM converts f16 <-> f32 with instructions on this host
    (x86-64 with F16C, arm64); elsewhere it calls helpers (`__truncsfhf2`)
    that this process does not provide."""
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return True
    if machine not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " f16c" in line for line in f)
    except OSError:
        return False


def _type_unsupported(t: Attribute) -> str | None:
    if isinstance(t, MemRefType):
        elem, shape = t.element_type, t.get_shape()
        if not isinstance(t.layout, NoneAttr) or not isinstance(t.memory_space, NoneAttr):
            return f"a memref with a layout or memory space ({t})"
        if any(d < 0 for d in shape):
            return f"a memref of dynamic shape ({t})"
        if len(shape) > PAYLOAD:
            return f"a memref of rank {len(shape)} (at most {PAYLOAD})"
        if isinstance(elem, IntegerType) and elem.width.data not in (8, 16, 32, 64):
            return (
                f"a memref of {elem} (the runtime stores such elements unpacked, one per "
                "byte, D-RT-I4)"
            )
        return _type_unsupported(elem)
    if isinstance(t, Float16Type) and not host_converts_f16():
        return "f16 values on a host without f16 conversion instructions"
    if isinstance(
        t, IntegerType | IndexType | Float32Type | Float64Type | BFloat16Type | Float16Type
    ):
        return None
    return f"values of type {t}"


def _op_unsupported(op: Operation) -> str | None:
    if isinstance(op, math.FmaOp) and isinstance(op.result.type, _NARROW):
        return f"math.fma on {op.result.type} (an f32 fma would round twice)"
    if (
        isinstance(op, arith.SIToFPOp | arith.UIToFPOp)
        and isinstance(op.result.type, BFloat16Type)
        and _width(op.operands[0].type) > 32
    ):
        return f"{op.name} from {op.operands[0].type} to bf16 (no exact native rounding)"
    if isinstance(op, affine.ParallelOp) and any(s.value.data <= 0 for s in op.steps.data):
        return "a non-positive affine.parallel step"
    if isinstance(op, memref.DeallocOp) and not isinstance(op.memref.owner, memref.AllocOp):
        return "memref.dealloc of a memref the kernel did not allocate"
    if isinstance(op, memref.SubviewOp | memref.ViewOp | memref.CastOp):
        # the native accesses are checked against the view's shape only; the
        # interpreter checks the view against its source (mlir_kernel_views)
        return f"{op.name} (a view is checked against its source by the interpreter only)"
    return None


def unsupported(fn: func.FuncOp) -> str | None:
    """Why the native backend cannot take `fn` (the interpreter can), or None."""
    for op in fn.walk():
        values = [*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)]
        for v in values:
            why = _type_unsupported(v.type)
            if why is not None:
                return why
        why = _op_unsupported(op)
        if why is not None:
            return f"{why}"
    return None


def _dims_only(m: AffineMap) -> AffineMap:
    nd, ns = m.num_dims, m.num_symbols
    if not ns:
        return m
    return m.replace_dims_and_symbols(
        [AffineExpr.dimension(i) for i in range(nd)],
        [AffineExpr.dimension(nd + i) for i in range(ns)],
        nd + ns,
        0,
    )


def _dims_only_set(s: AffineSet) -> AffineSet:
    nd, ns = s.num_dims, s.num_symbols
    dims = [AffineExpr.dimension(i) for i in range(nd)]
    syms = [AffineExpr.dimension(nd + i) for i in range(ns)]
    return AffineSet(
        nd + ns,
        0,
        tuple(
            AffineConstraintExpr(
                c.kind,
                c.lhs.replace_dims_and_symbols(dims, syms),
                c.rhs.replace_dims_and_symbols(dims, syms),
            )
            for c in s.constraints
        ),
    )


_MAP_PROPS = ("map", "lowerBoundMap", "upperBoundMap", "lowerBoundsMap", "upperBoundsMap")


def _upstream_affine(fn: func.FuncOp) -> None:
    """Affine maps and sets with dimensions only; `affine.parallel`
    reductions as upstream's AtomicRMWKind numbers."""
    for op in fn.walk():
        for p in _MAP_PROPS:
            a = op.properties.get(p)
            if isinstance(a, AffineMapAttr):
                op.properties[p] = AffineMapAttr(_dims_only(a.data))
        c = op.properties.get("condition")
        if isinstance(c, AffineSetAttr):
            op.properties["condition"] = AffineSetAttr(_dims_only_set(c.data))
        if isinstance(op, affine.ParallelOp):
            kinds = kl.reduction_kinds(op)
            op.properties["reductions"] = ArrayAttr(
                [IntegerAttr(kl.ATOMIC_RMW_KINDS.index(k), I64) for k in kinds]
            )


def _signless_type(t: Attribute) -> Attribute:
    if isinstance(t, IntegerType) and t.signedness.data != Signedness.SIGNLESS:
        return IntegerType(t.width.data)
    if isinstance(t, MemRefType) and _signless_type(t.element_type) != t.element_type:
        return MemRefType(_signless_type(t.element_type), t.get_shape())
    return t


def _signless(fn: func.FuncOp) -> None:
    """Unsigned memref elements become signless (the same bytes; arith ops
    read signedness from the op, not the type)."""
    values = [
        v
        for op in fn.walk()
        for v in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args))
    ]
    for v in values:
        t = _signless_type(v.type)
        if t != v.type:
            Rewriter.replace_value_with_new_type(v, t)
    fn.function_type = FunctionType.from_lists(
        [a.type for a in fn.body.block.args], list(fn.function_type.outputs.data)
    )


class _Prep:
    """The rewrites of the module doc, one method per kind of op."""

    def __init__(self) -> None:
        self.sites: list[Site] = []
        self.libm: set[str] = set()

    # -- building blocks -----------------------------------------------------
    @staticmethod
    def _const(value: float, t: Attribute) -> arith.ConstantOp:
        if isinstance(t, _FLOATS):
            return arith.ConstantOp(FloatAttr(float(value), t))
        assert isinstance(t, IntegerType | IndexType)  # the kernels' other scalar types
        return arith.ConstantOp.from_int_and_width(int(value), t)

    @staticmethod
    def _c(b: Builder, value: float, t: Attribute) -> SSAValue:
        return b.insert(_Prep._const(value, t)).result

    @staticmethod
    def _cmpi(b: Builder, x: SSAValue, y: SSAValue, pred: str) -> SSAValue:
        return b.insert(arith.CmpiOp(x, y, pred)).result

    @staticmethod
    def _sel(b: Builder, cond: SSAValue, x: SSAValue, y: SSAValue) -> SSAValue:
        return b.insert(arith.SelectOp(cond, x, y)).result

    def _i64(self, b: Builder, v: SSAValue, signed: bool = True) -> SSAValue:
        t = v.type
        if isinstance(t, IndexType):
            return b.insert(arith.IndexCastOp(v, I64)).result
        if _width(t) == 64:
            return v
        return b.insert(arith.ExtSIOp(v, I64) if signed else arith.ExtUIOp(v, I64)).result

    def _trap_call(self, b: Builder, site: Site, payload: list[SSAValue]) -> Operation:
        """The call reporting `site` (not inserted); its constant operands
        are inserted at `b`."""
        self.sites.append(site)
        args = [self._c(b, len(self.sites), I64), *payload]
        args += [self._c(b, 0, I64)] * (PAYLOAD - len(payload))
        return func.CallOp(TRAP, args, [])

    def _trap_if(self, b: Builder, cond: SSAValue, site: Site, payload: list[SSAValue]) -> None:
        call = self._trap_call(b, site, payload)
        b.insert(scf.IfOp(cond, [], [call, scf.YieldOp()]))

    @staticmethod
    def _replace(op: Operation, new: SSAValue) -> None:
        op.results[0].replace_all_uses_with(new)
        Rewriter.erase_op(op)

    def _widen(self, b: Builder, x: SSAValue, t: Attribute) -> SSAValue:
        if isinstance(x.type, _NARROW):
            x = b.insert(arith.ExtFOp(x, F32)).result
        if isinstance(t, Float64Type) and not isinstance(x.type, Float64Type):
            x = b.insert(arith.ExtFOp(x, F64)).result
        return x

    def _narrow(self, b: Builder, x64: SSAValue, t: Attribute) -> SSAValue:
        """f64 `x64` rounded once to `t`: to f16/bf16 through f32 rounded to odd."""
        if isinstance(t, Float64Type):
            return x64
        r = b.insert(arith.TruncFOp(x64, F32)).result
        if isinstance(t, Float32Type):
            return r
        i32 = IntegerType(32)
        back = b.insert(arith.ExtFOp(r, F64)).result
        inexact = b.insert(arith.CmpfOp(back, x64, "one")).result
        bits = b.insert(arith.BitcastOp(r, i32)).result
        low = b.insert(arith.AndIOp(bits, self._c(b, 1, i32))).result
        even = self._cmpi(b, low, self._c(b, 0, i32), "eq")
        need = b.insert(arith.AndIOp(inexact, even)).result
        ax, ab = (b.insert(math.AbsFOp(v)).result for v in (x64, back))
        up = b.insert(arith.CmpfOp(ax, ab, "ogt")).result
        step = self._sel(b, up, self._c(b, 1, i32), self._c(b, -1, i32))
        moved = b.insert(arith.AddiOp(bits, step)).result
        odd = b.insert(arith.BitcastOp(self._sel(b, need, moved, bits), F32)).result
        return b.insert(arith.TruncFOp(odd, t)).result

    # -- undefined behaviour ---------------------------------------------------
    def division(self, op: Operation) -> None:
        b = Builder(InsertPoint.before(op))
        t = op.results[0].type
        w = _width(t)
        a, d = op.operands
        is0 = self._cmpi(b, d, self._c(b, 0, t), "eq")
        self._trap_if(b, is0, lambda pl: ks.undefined_error(ks.UNDEFINED["div0"]()), [])
        bad = is0
        if isinstance(op, (*_SIGNED_QUOTIENTS, arith.RemSIOp)):
            ovf = b.insert(
                arith.AndIOp(
                    self._cmpi(b, a, self._c(b, -(1 << (w - 1)), t), "eq"),
                    self._cmpi(b, d, self._c(b, -1, t), "eq"),
                )
            ).result
            if not isinstance(op, arith.RemSIOp):  # remsi(MIN, -1) is 0 (D-RT-MLIR-KERNEL-OPS)
                self._trap_if(
                    b,
                    ovf,
                    lambda pl: ks.undefined_error(ks.UNDEFINED["sdiv_overflow"](pl[0], pl[1], w)),
                    [self._i64(b, a), self._i64(b, d)],
                )
            bad = b.insert(arith.OrIOp(is0, ovf)).result
        op.operands = [a, self._sel(b, bad, self._c(b, 1, t), d)]

    def shift(self, op: Operation) -> None:
        b = Builder(InsertPoint.before(op))
        t = op.results[0].type
        w = _width(t)
        a, d = op.operands
        signed = isinstance(op, arith.ShRSIOp)
        bad = self._cmpi(b, d, self._c(b, w, t), "uge")
        self._trap_if(
            b,
            bad,
            lambda pl: ks.undefined_error(ks.UNDEFINED["shift"](_reading(signed)(pl[0], w), w)),
            [self._i64(b, d, signed)],
        )
        op.operands = [a, self._sel(b, bad, self._c(b, 0, t), d)]

    def ipowi(self, op: math.IPowIOp) -> None:
        b = Builder(InsertPoint.before(op))
        t = op.results[0].type
        a, d = op.operands
        bad = b.insert(
            arith.AndIOp(
                self._cmpi(b, a, self._c(b, 0, t), "eq"), self._cmpi(b, d, self._c(b, 0, t), "slt")
            )
        ).result
        self._trap_if(b, bad, lambda pl: ks.undefined_error(ks.UNDEFINED["ipowi0"]()), [])
        op.operands = [self._sel(b, bad, self._c(b, 1, t), a), d]

    def float_to_int(self, op: Operation) -> None:
        b = Builder(InsertPoint.before(op))
        x = op.operands[0]
        w = _width(op.results[0].type)
        signed = isinstance(op, arith.FPToSIOp)
        x64 = self._widen(b, x, F64)
        t = b.insert(math.TruncOp(x64)).result
        lo, hi = (-(1 << (w - 1)), 1 << (w - 1)) if signed else (0, 1 << w)
        ok = b.insert(
            arith.AndIOp(
                b.insert(arith.CmpfOp(t, self._c(b, lo, F64), "oge")).result,
                b.insert(arith.CmpfOp(t, self._c(b, hi, F64), "olt")).result,
            )
        ).result
        bad = b.insert(arith.XOrIOp(ok, self._c(b, 1, I1))).result
        bits = b.insert(arith.BitcastOp(x64, I64)).result
        name = op.name
        self._trap_if(
            b,
            bad,
            lambda pl: ks.undefined_error(ks.UNDEFINED["fptoi"](name, _f64_of(pl[0]), w)),
            [bits],
        )
        op.operands = [self._sel(b, ok, x, self._c(b, 0.0, x.type))]

    def for_step(self, op: scf.ForOp) -> None:
        step = op.step
        if _positive_constant(step):
            return
        b = Builder(InsertPoint.before(op))
        t = step.type
        bad = self._cmpi(b, step, self._c(b, 0, t), "sle")
        self._trap_if(
            b,
            bad,
            lambda pl: ks.undefined_error(ks.UNDEFINED["for_step"](pl[0])),
            [self._i64(b, step)],
        )
        op.operands = [
            op.lb,
            self._sel(b, bad, op.lb, op.ub),
            self._sel(b, bad, self._c(b, 1, t), step),
            *op.iter_args,
        ]

    def parallel_steps(self, op: scf.ParallelOp) -> None:
        steps = list(op.step)
        if all(_positive_constant(s) for s in steps):
            return
        b = Builder(InsertPoint.before(op))
        bad, low = None, None
        for s in steps:
            c = self._cmpi(b, s, self._c(b, 0, IDX), "sle")
            bad = c if bad is None else b.insert(arith.OrIOp(bad, c)).result
            low = s if low is None else b.insert(arith.MinSIOp(low, s)).result
        assert bad is not None and low is not None  # a step per dimension, at least one
        self._trap_if(
            b,
            bad,
            lambda pl: ks.undefined_error(ks.UNDEFINED["parallel_step"](pl[0])),
            [self._i64(b, low)],
        )
        lbs = list(op.lowerBound)
        op.operands = [
            *lbs,
            *(self._sel(b, bad, lb, ub) for lb, ub in zip(lbs, op.upperBound)),
            *(self._sel(b, bad, self._c(b, 1, IDX), s) for s in steps),
            *op.initVals,
        ]

    def access(self, op: affine.LoadOp | affine.StoreOp | memref.LoadOp | memref.StoreOp) -> None:
        """A load or store, checked against the memref's shape."""
        b = Builder(InsertPoint.before(op))
        mem = op.memref
        mtype = mem.type
        assert isinstance(mtype, MemRefType)  # the operand's type (the ops verified)
        shape = mtype.get_shape()
        idx: list[SSAValue]
        if isinstance(op, affine.LoadOp | affine.StoreOp):
            m = op.map.data
            idx = [
                b.insert(
                    affine.ApplyOp(
                        list(op.indices), AffineMapAttr(AffineMap(m.num_dims, m.num_symbols, (e,)))
                    )
                ).result
                for e in m.results
            ]
        else:
            idx = list(op.indices)
        new: memref.LoadOp | memref.StoreOp
        if isinstance(op, affine.LoadOp | memref.LoadOp):
            is_load, new = True, memref.LoadOp.get(mem, idx)
        else:
            is_load, new = False, memref.StoreOp.get(op.value, mem, idx)
        if not shape:
            b.insert(new)
            if is_load:
                self._replace(op, new.results[0])
            else:
                Rewriter.erase_op(op)
            return
        ok = None
        for i, d in zip(idx, shape):
            c = b.insert(
                arith.AndIOp(
                    self._cmpi(b, i, self._c(b, 0, IDX), "sge"),
                    self._cmpi(b, i, self._c(b, d, IDX), "slt"),
                )
            ).result
            ok = c if ok is None else b.insert(arith.AndIOp(ok, c)).result
        assert ok is not None  # one check per dimension, and `shape` is not empty
        n = len(idx)
        call = self._trap_call(
            b, lambda pl: ks.outside_error(pl[:n], shape), [self._i64(b, i) for i in idx]
        )
        if is_load:
            elem = mtype.element_type
            zero = self._const(0, elem)
            if_op = b.insert(
                scf.IfOp(ok, [elem], [new, scf.YieldOp(new)], [call, zero, scf.YieldOp(zero)])
            )
            self._replace(op, if_op.results[0])
        else:
            b.insert(scf.IfOp(ok, [], [new, scf.YieldOp()], [call, scf.YieldOp()]))
            Rewriter.erase_op(op)

    # -- floating point --------------------------------------------------------
    def truncf(self, op: arith.TruncFOp) -> None:
        x, t = op.operands[0], op.results[0].type
        if isinstance(t, _NARROW) and isinstance(x.type, Float64Type):
            b = Builder(InsertPoint.before(op))
            self._replace(op, self._narrow(b, x, t))

    def extf(self, op: arith.ExtFOp) -> None:
        x, t = op.operands[0], op.results[0].type
        if isinstance(x.type, _NARROW) and isinstance(t, Float64Type):
            b = Builder(InsertPoint.before(op))
            self._replace(op, self._widen(b, x, F64))

    def int_to_float(self, op: arith.SIToFPOp | arith.UIToFPOp) -> None:
        x, t = op.operands[0], op.results[0].type
        if not isinstance(t, _NARROW):
            return
        b = Builder(InsertPoint.before(op))
        if _width(x.type) <= 32:  # exact in f64, then rounded once
            wide = b.insert(type(op)(x, F64)).result
            self._replace(op, self._narrow(b, wide, t))
        else:  # f16 only: |x| >= 2^24 overflows f16 either way
            wide = b.insert(type(op)(x, F32)).result
            self._replace(op, b.insert(arith.TruncFOp(wide, t)).result)

    def libm_call(self, op: Operation) -> None:
        name = ks.LIBM_OPS[type(op)]
        self._call_libm(op, name, list(op.operands))

    def fpowi(self, op: math.FPowIOp) -> None:
        b = Builder(InsertPoint.before(op))
        x, n = op.operands
        self._call_libm(op, "pow", [x, b.insert(arith.SIToFPOp(n, F64)).result])

    def _call_libm(self, op: Operation, name: str, operands: list[SSAValue]) -> None:
        b = Builder(InsertPoint.before(op))
        self.libm.add(name)
        args = [self._widen(b, v, F64) for v in operands]
        r = b.insert(func.CallOp(LIBM_PREFIX + name, args, [F64])).results[0]
        self._replace(op, self._narrow(b, r, op.results[0].type))

    def rsqrt(self, op: math.RsqrtOp) -> None:
        b = Builder(InsertPoint.before(op))
        s = b.insert(math.SqrtOp(self._widen(b, op.operands[0], F64))).result
        r = b.insert(arith.DivfOp(self._c(b, 1.0, F64), s)).result
        self._replace(op, self._narrow(b, r, op.results[0].type))

    def at_f32(self, op: Operation) -> None:
        """An arith or math op on f16/bf16 operands as the same op at f32,
        its result rounded back to the type (comparisons: the i1 as is)."""
        if not any(isinstance(v.type, _NARROW) for v in op.operands):
            return
        b = Builder(InsertPoint.before(op))
        t = op.results[0].type
        wide = b.insert(
            type(op).create(
                operands=[self._widen(b, v, F32) for v in op.operands],
                result_types=[F32 if isinstance(t, _NARROW) else t],
                properties=dict(op.properties),
                attributes=dict(op.attributes),
            )
        ).results[0]
        self._replace(
            op, b.insert(arith.TruncFOp(wide, t)).result if isinstance(t, _NARROW) else wide
        )

    def minmax(self, op: arith.MaximumfOp | arith.MinimumfOp) -> None:
        """maximumf/minimumf as selects: NaN if either operand is NaN, and
        -0 < +0 (upstream's `arith-expand` returns the second operand of
        equal zeros)."""
        b = Builder(InsertPoint.before(op))
        t = op.results[0].type
        wt = F32 if isinstance(t, _NARROW) else t
        x, y = (self._widen(b, v, wt) for v in op.operands)
        word = IntegerType(32 if isinstance(wt, Float32Type) else 64)
        gt = b.insert(arith.CmpfOp(x, y, "ogt")).result
        lt = b.insert(arith.CmpfOp(x, y, "olt")).result
        x_neg = self._cmpi(b, b.insert(arith.BitcastOp(x, word)).result, self._c(b, 0, word), "slt")
        if isinstance(op, arith.MaximumfOp):
            r = self._sel(b, gt, x, self._sel(b, lt, y, self._sel(b, x_neg, y, x)))
        else:
            r = self._sel(b, lt, x, self._sel(b, gt, y, self._sel(b, x_neg, x, y)))
        uno = b.insert(arith.CmpfOp(x, y, "uno")).result
        r = self._sel(b, uno, b.insert(arith.AddfOp(x, y)).result, r)
        self._replace(op, b.insert(arith.TruncFOp(r, t)).result if wt is not t else r)

    # -- dispatch ----------------------------------------------------------------
    def rewrite(self, op: Operation) -> None:
        for types, method in _REWRITES:
            if isinstance(op, types):
                getattr(self, method)(op)
                return


# op classes -> the `_Prep` method that rewrites them (first match wins)
_REWRITES: list[tuple[tuple[type, ...], str]] = [
    (_DIVISIONS, "division"),
    (_SHIFTS, "shift"),
    ((math.IPowIOp,), "ipowi"),
    ((arith.FPToSIOp, arith.FPToUIOp), "float_to_int"),
    ((scf.ForOp,), "for_step"),
    ((scf.ParallelOp,), "parallel_steps"),
    ((affine.LoadOp, affine.StoreOp, memref.LoadOp, memref.StoreOp), "access"),
    ((arith.TruncFOp,), "truncf"),
    ((arith.ExtFOp,), "extf"),
    ((arith.SIToFPOp, arith.UIToFPOp), "int_to_float"),
    (tuple(ks.LIBM_OPS), "libm_call"),
    ((math.FPowIOp,), "fpowi"),
    ((math.RsqrtOp,), "rsqrt"),
    ((arith.MaximumfOp, arith.MinimumfOp), "minmax"),
    (_AT_F32, "at_f32"),
]


def _positive_constant(v: SSAValue) -> bool:
    """Whether `v` is an integer `arith.constant` > 0."""
    op = v.owner
    return (
        isinstance(op, arith.ConstantOp)
        and isinstance(op.value, IntegerAttr)
        and op.value.value.data > 0
    )


def _zero_allocs(fn: func.FuncOp) -> None:
    """Fill each `memref.alloc` with zeros right after it (a loop nest)."""
    for alloc in [o for o in fn.walk() if isinstance(o, memref.AllocOp)]:
        t = alloc.memref.type
        elem, shape = t.element_type, t.get_shape()
        b = Builder(InsertPoint.after(alloc))
        zero = _Prep._c(b, 0, elem)
        blocks = [Block(arg_types=[IDX]) for _ in shape]
        store = memref.StoreOp.get(zero, alloc.memref, [blk.args[0] for blk in blocks])
        if not blocks:
            b.insert(store)
            continue
        blocks[-1].add_ops([store, affine.YieldOp.get()])
        for k in range(len(shape) - 1, -1, -1):
            loop = affine.ForOp.from_region([], [], [], [], 0, shape[k], Region(blocks[k]))
            if k:
                blocks[k - 1].add_ops([loop, affine.YieldOp.get()])
            else:
                b.insert(loop)


def _merge_aliases(fn: func.FuncOp, groups: Sequence[int]) -> None:
    """Argument k becomes argument `groups[k]` (the first over the same memory)."""
    args = fn.body.block.args
    for k, g in enumerate(groups):
        if g != k:
            args[k].replace_all_uses_with(args[g])


def _written(fn: func.FuncOp) -> list[SSAValue]:
    """The memrefs `fn` stores to (stores and structured linalg outputs)."""
    out: list[SSAValue] = []
    for op in fn.walk():
        if isinstance(op, affine.StoreOp | memref.StoreOp):
            out.append(op.memref)
        elif isinstance(op, kl.STRUCTURED):
            out.extend(kl.as_structured(op).outputs)
    return out


def prepare(module: ModuleOp, groups: Sequence[int], n_in: int) -> Prepared:
    """The upstream-ready text of `module` (a parsed, interpreter-checked
    kernel), for arguments aliased as `groups` (argument k is over the same
    memory as argument `groups[k]`; the first `n_in` are the task's ins)."""
    module = module.clone()
    fn = next(o for o in module.ops if isinstance(o, func.FuncOp))
    why = unsupported(fn)
    if why is not None:
        raise JitUnsupported(why)
    _merge_aliases(fn, groups)
    args = fn.body.block.args
    # distinct memref arguments never overlap where one is written (outputs are
    # fresh copies, aliased arguments merged): LLVM may keep values in registers
    fn.arg_attrs = ArrayAttr(
        [
            DictionaryAttr({"llvm.noalias": UnitAttr()} if isinstance(a.type, MemRefType) else {})
            for a in args
        ]
    )
    for k, g in enumerate(groups):
        if (
            g == k
            and args[k] in _written(fn)
            and all(groups[j] != g for j in range(n_in, len(groups)))
        ):
            raise JitUnsupported(f"it stores into argument {k}, an input (read-only)")
    _signless(fn)
    sink_parallel_loops(fn)
    _upstream_affine(fn)
    prep = _Prep()
    for op in list(fn.walk()):
        prep.rewrite(op)
    _zero_allocs(fn)
    decls = [func.FuncOp.external(TRAP, [I64] * (1 + PAYLOAD), [])]
    decls += [
        func.FuncOp.external(LIBM_PREFIX + n, [F64] * ks.LIBM_ARITY.get(n, 1), [F64])
        for n in sorted(prep.libm)
    ]
    module.body.block.add_ops(decls)
    buf = StringIO()
    Printer(stream=buf, print_generic_format=True, print_debuginfo=False).print_op(module)
    return Prepared(buf.getvalue(), prep.sites, prep.libm)
