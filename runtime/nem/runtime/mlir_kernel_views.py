"""memref views in escape-hatch kernels (D-RT-MLIR-KERNEL, D-LOW-ESCAPE).

A loop nest lowered as one `compute op="mlir.kernel"` task may make views
of its memref arguments (a row of an output through `memref.subview`, an
i8 scratch buffer read as f32 through `memref.view`, a `memref.cast`).
Each runs here as a numpy view of the argument's array, so a store through
it writes the argument, as MLIR's views alias their source.  Every view is
bounds-checked against its source first: numpy's slicing would clip what
MLIR leaves undefined.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects import memref
from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    register_impls,
)

from nem.dialect.elements import ELEM_TYPES, elem_of_xdsl
from nem.runtime.mlir_kernel_scalar import OPNAME, OUTSIDE_FIX
from nem.runtime.numerics import NotSupported, NumericError


def _static_or(static: tuple[int, ...], dynamic: list[int]) -> list[int]:
    """The values of a static list whose `DYNAMIC_INDEX` entries are the
    dynamic operands, in order."""
    rest = iter(dynamic)
    return [next(rest) if s == DYNAMIC_INDEX else s for s in static]


def _shaped(array: np.ndarray, shape: list[int], op: str) -> np.ndarray:
    """`array` with `shape` (dropped unit dimensions), never a copy."""
    out = array.view()
    try:
        out.shape = shape
    except AttributeError:
        raise NotSupported(f"{OPNAME}: {op} to {shape} is not a view of its source") from None
    return out


@register_impls
class ViewKernelFunctions(InterpreterFunctions):
    """`memref.subview`, `memref.view` and `memref.cast` as numpy views."""

    @impl(memref.SubviewOp)
    def run_subview(
        self, interpreter: Interpreter, op: memref.SubviewOp, args: PythonValues
    ) -> PythonValues:
        src, *rest = args
        n_off, n_size = len(op.offsets), len(op.sizes)
        offsets = _static_or(op.static_offsets.get_values(), rest[:n_off])
        sizes = _static_or(op.static_sizes.get_values(), rest[n_off : n_off + n_size])
        strides = _static_or(op.static_strides.get_values(), rest[n_off + n_size :])
        box = []
        for off, size, step, dim in zip(offsets, sizes, strides, src.array.shape):
            last = off + (size - 1) * step
            if off < 0 or size < 0 or step < 1 or (size and not 0 <= last < dim):
                raise NumericError(
                    f"{OPNAME}: memref.subview offsets {offsets}, sizes {sizes}, strides "
                    f"{strides} leave the memref of shape {list(src.array.shape)} (HAZ-04)",
                    OUTSIDE_FIX,
                )
            box.append(slice(off, off + size * step, step))
        view = src.array[tuple(box)]
        result = op.result.type
        assert isinstance(result, MemRefType)
        if len(result.get_shape()) != len(sizes):  # rank-reducing: unit dimensions dropped
            kept = [s for s in result.get_shape()]
            if DYNAMIC_INDEX in kept:
                kept = [s for s in sizes if s != 1]
            view = _shaped(view, kept, "memref.subview")
        return (src.sharing(view),)

    @impl(memref.ViewOp)
    def run_view(
        self, interpreter: Interpreter, op: memref.ViewOp, args: PythonValues
    ) -> PythonValues:
        src, shift, *dynamic = args
        result = op.result.type
        assert isinstance(result, MemRefType)
        elem = elem_of_xdsl(result.get_element_type())
        if elem is None or elem == "i4":
            raise NotSupported(f"{OPNAME}: memref.view to {result}: no element type of NEM's")
        dtype = ELEM_TYPES[elem].dtype
        shape = _static_or(tuple(result.get_shape()), dynamic)
        if src.array.ndim != 1 or not src.array.flags.c_contiguous:  # (else reshape copies)
            raise NotSupported(f"{OPNAME}: memref.view of a memref that is not 1-d and contiguous")
        raw = src.array.view(np.uint8)  # the source's bytes
        end = shift + int(np.prod(shape)) * dtype.itemsize
        if shift < 0 or end > raw.size:
            raise NumericError(
                f"{OPNAME}: memref.view of {int(np.prod(shape)) * dtype.itemsize} bytes at "
                f"byte {shift} leaves the memref of {raw.size} bytes (HAZ-04)",
                OUTSIDE_FIX,
            )
        view = _shaped(raw[shift:end].view(dtype), shape, "memref.view")
        return (src.sharing(view, ELEM_TYPES[elem].bits),)

    @impl(memref.CastOp)
    def run_cast(
        self, interpreter: Interpreter, op: memref.CastOp, args: PythonValues
    ) -> PythonValues:
        (src,) = args
        shape: Any = op.dest.type
        assert isinstance(shape, MemRefType)
        if any(a != b for a, b in zip(shape.get_shape(), src.array.shape) if a != DYNAMIC_INDEX):
            raise NumericError(
                f"{OPNAME}: memref.cast to {shape} of a memref of shape {list(src.array.shape)}",
                OUTSIDE_FIX,
            )
        return (src,)
