"""Escape-hatch kernels that are a constant fill, run as one numpy fill
(D-RT-MLIR-FILL).

The lowering emits `linalg.fill` (and the init of a max pool or a
reduction) as an `mlir.kernel` task (NEM has no fill opcode, D-LOW-BCAST):
a perfect `affine.for` nest storing one `arith.constant` into every element
of one memref argument.  Compiling each such kernel costs 40-70 ms in a
fresh process (one per distinct shape and value) and interpreting it ~16 us
per element, for work numpy does in a microsecond.  `fill_of` recognizes
exactly that form and nothing else; the result is the interpreter's (the
reference, D-RT-MLIR-KERNEL): every element holds the constant converted to
the element type as a store does (floats rounded to nearest even, integers
wrapped to the width), and every other operand keeps its contents.  A
kernel that differs in any way (a bound other than the dimension, a step,
an offset in the map, a loaded or computed value, a second store, index
arguments, iter_args, elements other than f32 and signless integers) is not recognized and runs as
before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import affine, arith, func
from xdsl.dialects.builtin import (
    AffineMapAttr,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    Signedness,
)
from xdsl.ir import BlockArgument, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap, AffineSymExpr


def _constant_bound(m: AffineMap) -> int | None:
    if m.num_dims or m.num_symbols or len(m.results) != 1:
        return None
    e = m.results[0]
    return e.value if isinstance(e, AffineConstantExpr) else None


def fill_of(fn: func.FuncOp, n_mem: int) -> tuple[int, float | int] | None:
    """(memref argument, constant) when `fn` stores one constant into every
    element of that argument and does nothing else; None otherwise."""
    block = fn.body.block
    if len(block.args) != n_mem:
        return None
    consts: dict[SSAValue, arith.ConstantOp] = {}
    loop = None
    for op in block.ops:
        if isinstance(op, arith.ConstantOp):
            consts[op.result] = op
        elif isinstance(op, affine.ForOp) and loop is None:
            loop = op
        elif not (isinstance(op, func.ReturnOp) and not op.operands):
            return None
    ivs: list[SSAValue] = []
    trips: list[int] = []
    while loop is not None:
        if (
            loop.lowerBoundOperands
            or loop.upperBoundOperands
            or loop.inits
            or loop.res
            or loop.step.value.data != 1
            or _constant_bound(loop.lowerBoundMap.data) != 0
        ):
            return None
        ub = _constant_bound(loop.upperBoundMap.data)
        if ub is None or ub <= 0:
            return None
        ivs.append(loop.body.block.args[0])
        trips.append(ub)
        ops = list(loop.body.block.ops)
        if len(ops) != 2 or not isinstance(ops[1], affine.YieldOp) or ops[1].operands:
            return None
        inner = ops[0]
        if isinstance(inner, affine.ForOp):
            loop = inner
            continue
        if not isinstance(inner, affine.StoreOp):
            return None
        return _stored(inner, ivs, trips, consts, block.args)
    return None


def _stored(
    store: affine.StoreOp,
    ivs: list[SSAValue],
    trips: list[int],
    consts: dict[SSAValue, arith.ConstantOp],
    args: Sequence[BlockArgument],
) -> tuple[int, float | int] | None:
    """The (argument, constant) of a store that covers its memref exactly once."""
    mem = store.memref
    const = consts.get(store.value)
    if not isinstance(mem, BlockArgument) or mem not in args or const is None:
        return None
    ty = mem.type
    if (
        not isinstance(ty, MemRefType)
        or not isinstance(ty.layout, NoneAttr)
        or not isinstance(ty.memory_space, NoneAttr)
    ):
        return None
    shape = ty.get_shape()
    m = (
        store.map.data
        if isinstance(store.map, AffineMapAttr)
        else AffineMap.identity(len(store.indices))
    )
    if (
        m.num_dims + m.num_symbols != len(store.indices)
        or len(m.results) != len(shape)
        or len(shape) != len(ivs)
    ):
        return None
    used: list[SSAValue] = []
    for d, e in enumerate(m.results):
        if isinstance(e, AffineDimExpr):
            k = e.position
        elif isinstance(e, AffineSymExpr):
            k = m.num_dims + e.position
        else:
            return None
        v = store.indices[k]
        if v not in ivs or v in used or trips[ivs.index(v)] != shape[d]:
            return None
        used.append(v)
    attr = const.value
    elem = ty.element_type
    if const.result.type != elem:
        return None
    if isinstance(elem, Float32Type) and isinstance(attr, FloatAttr):
        return args.index(mem), float(attr.value.data)
    if (
        isinstance(elem, IntegerType)
        and elem.signedness.data == Signedness.SIGNLESS
        and isinstance(attr, IntegerAttr)
    ):
        return args.index(mem), int(attr.value.data)
    return None


class FillKernel:
    """A recognized fill with the interface of a native kernel (`bind`)."""

    def __init__(self, arg: int, value: float | int):
        self.arg = arg
        self.value = value

    def bind(self, arrays: Sequence[np.ndarray], index_args: Sequence[int]) -> Callable[[], None]:
        a = arrays[self.arg]
        src = np.float64 if isinstance(self.value, float) else np.int64
        v = np.array(self.value, dtype=src).astype(a.dtype)  # a store's conversion
        return lambda: a.fill(v)


def fill_kernel(fn: func.FuncOp, group: Sequence[int], n_in: int) -> FillKernel | None:
    """The fill kernel `fn` is, when its stored argument shares its memory
    with an output (`group`: the first operand over the same memory, as
    `CompiledKernel.bind` gives it); the caller (an interpreter's
    `EscapeHatch`) keeps it."""
    got = fill_of(fn, len(group))
    if got is not None and not any(group[k] == group[got[0]] for k in range(n_in, len(group))):
        return None  # a fill of an input only: left to the backends
    return FillKernel(*got) if got is not None else None
