"""Executing a task instance's data effect: the copy a transfer or store
makes (D-SEM-TRANSFER) and the kernel call a compute task makes, each bound
once per region instance as a call without arguments.

The scheduler calls these for every task it starts and a replayed run
(D-RT-REPLAY) calls the bound effect again, so what depends only on the
region instances (element types, sizes, byte views, the kernel) is checked
here once, and the call itself pays only for the data.  `engine` compiles the
templates these take; the timed cost of the same task is `task_cost`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, cast

import numpy as np

from nem.dialect.elements import ELEM_DTYPES as DTYPES
from nem.dialect.semantics.transfers import fills_range
from nem.runtime.engine import RunError
from nem.runtime.kernel_support import Attrs, Kernel, Tensor, UserKernel
from nem.runtime.memory import RegionInst
from nem.runtime.numerics import NotSupported, NumericError, UserKernelError

if TYPE_CHECKING:
    from nem.runtime.engine import TaskTpl


_SAME_DATA_FIX = (
    "a transfer copies elements as they are: give source and destination the same "
    "element type and element count (convert with a compute task)"
)
_FILLS_FIX = (
    "a typed region facing an untyped one must be dense (row-major, its extent exactly "
    "its elements' bytes): type both regions, or make the typed one dense"
)


def _fills(r: RegionInst) -> bool:
    """A typed region whose elements are its whole byte range (D-SEM-TRANSFER)."""
    assert r.elem is not None
    return fills_range(r.elem, r.shape or (), r.strides, r.extent)


WIDE_MIN = 8
"""Bytes an element-wise copy must move per contiguous run for `_wide_views`
to copy the runs as opaque elements instead."""


def _wide_views(
    src: RegionInst, s: np.ndarray, dst: RegionInst, d: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(dst, src) views of the same bytes as the typed views `d` and `s`
    (same shape and element type), their innermost dimensions that are
    contiguous in both merged into one opaque element (numpy's void type,
    copied as bytes): a strided tile copy then moves its contiguous runs
    (a weight tile's 16 output channels: 64 bytes) with one `memcpy` each
    instead of element by element.  The bytes moved are the same, in the
    same places: a move copies elements bit for bit (D-SEM-TRANSFER).  None
    when the runs are too short to gain (`WIDE_MIN` bytes), the views
    overlap, or an operand is i4."""
    if src.elem == "i4" or s.shape != d.shape or s.ndim == 0:
        return None
    if (
        src.level is dst.level
        and src.start < dst.start + dst.extent
        and dst.start < src.start + src.extent
    ):
        return None
    run = s.itemsize
    i = s.ndim
    while i > 0:
        n = s.shape[i - 1]
        if n != 1 and (s.strides[i - 1] != run or d.strides[i - 1] != run):
            break
        run *= n
        i -= 1
    if run < WIDE_MIN or run == s.itemsize:
        return None
    wt = np.dtype((np.void, run))
    shape = s.shape[:i]
    out = []
    for r, v in ((dst, d), (src, s)):
        out.append(
            np.ndarray(shape, wt, buffer=r.level.data, offset=r.start, strides=v.strides[:i])
        )
    return out[0], out[1]


def prepare_move(t: TaskTpl, dst: RegionInst, src: RegionInst) -> Callable[[], None]:
    """The data effect of a transfer (TASK-06) or store (TASK-10) as a call
    without arguments: what depends on the region instances only (element
    types, sizes, the byte views) is checked and bound once, so a replayed run
    (D-RT-REPLAY), which performs the same instance's effect again, pays only
    for the copy.

    What moves (D-SEM-TRANSFER, `nem.dialect.semantics.transfers.moved_bytes`): a
    typed region's elements (row-major over its shape, gaps between strided
    elements and extent past the last one untouched), an untyped region's
    whole byte range.  Two typed regions: same element type and count,
    element i to element i; a typed region facing an untyped one must fill
    its range, and then both are byte ranges."""
    if src.elem is not None and dst.elem is not None:
        if src.elem != dst.elem:
            raise RunError(
                f"{t.opcode} from {src.elem} region {src.name} to {dst.elem} region "
                f"{dst.name}: element types differ",
                "TASK-07",
                t.op,
                fix=_SAME_DATA_FIX,
            )
        s, d = src.read(), dst.read()
        if s.size != d.size:
            raise RunError(
                f"{t.opcode}: {src.name} has {s.size} elements, {dst.name} has {d.size}",
                "TASK-07",
                t.op,
                fix=_SAME_DATA_FIX,
            )
        if not (_fills(src) and _fills(dst)):
            shape = d.shape
            wide = _wide_views(src, s, dst, d)
            if wide is not None:
                return partial(np.copyto, *wide)

            def typed() -> None:
                v = src.read()  # i4: unpacked now, not when prepared
                dst.write(v.reshape(shape) if v.shape != shape else v)

            return typed
    else:
        for side in (src, dst):
            if side.elem is not None and not _fills(side):
                raise RunError(
                    f"{t.opcode} between a typed and an untyped region: the typed "
                    f"{side.name} ({side.elem}{list(side.shape or ())}, "
                    f"{side.extent} bytes) is not dense",
                    "TASK-07",
                    t.op,
                    fix=_FILLS_FIX,
                )
    n = src.extent
    if dst.extent < n:
        raise RunError(
            f"{t.opcode}: source {src.name} has {n} bytes but destination "
            f"{dst.name} only {dst.extent}",
            "TASK-07",
            t.op,
            fix=_SAME_DATA_FIX,
        )
    a, b = src.start, dst.start
    sv = src.level.data[a : a + n]
    dv = dst.level.data[b : b + n]
    if src.level is dst.level and a < b + n and b < a + n:

        def overlapping() -> None:  # @memmove (HAZ-02): copy through a temporary
            dv[...] = sv.copy()

        return overlapping
    return partial(np.copyto, dv, sv)


_KERNEL_FIX = (
    "use an opcode and element types the runtime implements (docs/ops.md), or pass "
    "your own kernel for the opcode: NemInterpreter(kernels={opcode: fn}) "
    "(docs/python-api.md)"
)
_USER_KERNEL_FIX = (
    "your kernel for this opcode refused these operands (it raised NotSupported): "
    "extend it, or leave the opcode to the reference kernel"
)
_NUMERIC_FIX = (
    "the input values have no defined result (decision D-NUM-UNSUPPORTED): check "
    "the data this task reads, or the tasks that write it"
)
_KERNEL_RESULT_FIX = (
    "a kernel takes (inputs, outputs, attrs) and returns a list of one array per "
    "output operand, of that operand's element type and size; it does not "
    "write its inputs (docs/python-api.md)"
)


def prepare_compute(
    t: TaskTpl, regions: list[RegionInst], attrs: Attrs, kernels: Mapping[str, Kernel]
) -> Callable[[], None]:
    """The data effect of a compute task as a call without arguments (see
    `prepare_move`): the kernel and its operand tensors (views of the regions,
    whose contents the kernel reads when called) are bound once; i4 operands
    are unpacked at each call."""
    fn = kernels.get(t.opcode)
    n_in = t.n_in
    outs = regions[n_in:]
    if fn is None:
        raise RunError(
            f"not supported: no kernel for opcode '{t.opcode}' "
            f"({', '.join(r.elem or 'untyped' for r in regions)})",
            "EXEC-03",
            t.op,
            fix=_KERNEL_FIX,
        )
    refused = _USER_KERNEL_FIX if isinstance(fn, UserKernel) else _KERNEL_FIX
    wants = [DTYPES[r.elem] if r.elem else np.dtype(np.uint8) for r in outs]
    views = [r.read() if r.elem != "i4" else None for r in regions]
    static = all(v is not None for v in views)

    def tensors() -> tuple[list[Tensor], list[Tensor]]:
        # compute operands have an element type (REG-03)
        ts = [
            Tensor(r.read() if v is None else v, cast(str, r.elem), r.quant)
            for r, v in zip(regions, views)
        ]
        return ts[:n_in], ts[n_in:]

    bound = tensors() if static else None
    call = None
    prepare = getattr(fn, "prepare", None)
    if bound is not None and prepare is not None:
        try:
            call = prepare(*bound, attrs)
        except NotSupported as e:
            raise RunError(f"not supported: {e}", "EXEC-03", t.op, fix=e.fix or refused) from None

    def compute() -> None:
        try:
            if call is not None:
                results = call()
                if results is None:  # written into the output views (Preparable)
                    return
            else:
                tin, tout = bound if bound is not None else tensors()
                results = fn(tin, tout, attrs)
        except NotSupported as e:
            raise RunError(f"not supported: {e}", "EXEC-03", t.op, fix=e.fix or refused) from None
        except NumericError as e:
            fix = e.fix or _NUMERIC_FIX
            raise RunError(f"no defined result: {e}", "EXEC-03", t.op, fix=fix) from None
        except UserKernelError as e:
            raise RunError(str(e), "EXEC-03", t.op, fix=_KERNEL_RESULT_FIX) from None
        if len(results) != len(outs):
            raise RunError(
                f"kernel '{t.opcode}' returned {len(results)} arrays for {len(outs)} outputs",
                "EXEC-03",
                t.op,
                fix=_KERNEL_RESULT_FIX,
            )
        for r, arr, want in zip(outs, results, wants):
            arr = np.asarray(arr)
            if arr.dtype != want:
                raise RunError(
                    f"kernel '{t.opcode}' returned {arr.dtype} for output {r.name} of "
                    f"type {r.elem}",
                    "EXEC-03",
                    t.op,
                    fix=_KERNEL_RESULT_FIX,
                )
            if r.shape is not None and arr.size != math.prod(r.shape):
                raise RunError(
                    f"kernel '{t.opcode}' returned {arr.size} elements for output "
                    f"{r.name} of shape {list(r.shape)}",
                    "EXEC-03",
                    t.op,
                    fix=_KERNEL_RESULT_FIX,
                )
            r.write(arr)

    return compute
