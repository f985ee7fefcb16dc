"""What every reference kernel uses: the `Tensor` operands, the opcode
families' element types (from the registry), and the checks and the
float / integer / quantized dispatch shared by the kernel families
(`kernels`, `kernels_linear`, `kernels_views`, `kernels_reduce`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from nem.runtime.numerics import (
    FLOAT_TYPES,
    INT_TYPES,
    NotSupported,
    NumericError,
    UserKernelError,
    is_float,
    saturate_int,
    to_float_out,
)
from nem.runtime.quant import Quant, dequantize, requantize


@dataclass(frozen=True)
class Tensor:
    """A kernel operand: the region's data in its logical shape, its spec
    element name and its quant descriptor (None: not quantized)."""

    array: np.ndarray
    elem: str
    quant: Quant | None = None


Kernel = Callable[[list[Tensor], list[Tensor], dict[str, object]], list[np.ndarray]]

Attrs = dict[str, Any]
"""A task's resolved attributes as the reference kernels read them: int, float,
str or lists of them by attribute name, converted (`int(...)`, `list(...)`) where
a kernel reads one; what a key holds depends on the opcode, hence `Any`."""

BoundKernel = Callable[[], list[np.ndarray] | None]
"""A kernel bound to one task instance's operands (`Preparable`); None: it has
written the results into the output arrays itself."""

ElementOp = Callable[..., np.ndarray]
"""An element-wise computation on f64 (or int64) arrays, one per operand."""


class UserKernel:
    """A kernel of the user's (`NemInterpreter(kernels={opcode: fn})`): its
    inputs are read-only views, so that it cannot change device memory behind
    the race detector's back (a write raises, and names the kernel), and
    whatever else than `NotSupported` or `NumericError` it raises is a
    `UserKernelError` naming it, which the engine reports at the task."""

    __slots__ = ("fn", "opcode")

    def __init__(self, fn: Kernel, opcode: str) -> None:
        self.fn, self.opcode = fn, opcode

    def __call__(
        self, ins: list[Tensor], outs: list[Tensor], attrs: dict[str, object]
    ) -> list[np.ndarray]:
        frozen = []
        for t in ins:
            view = t.array.view()
            view.flags.writeable = False
            frozen.append(Tensor(view, t.elem, t.quant))
        try:
            results = self.fn(frozen, outs, attrs)
        except (NotSupported, NumericError):
            raise  # the kernel's documented refusals, reported as the reference kernels'
        except Exception as e:  # the user's code: any other exception is theirs to fix
            raise UserKernelError(
                f"your kernel for '{self.opcode}' raised {type(e).__name__}: {e}"
            ) from e
        if not isinstance(results, (list, tuple)):
            raise UserKernelError(
                f"your kernel for '{self.opcode}' returned "
                f"{type(results).__name__}, not a list of arrays"
            )
        return list(results)


class Preparable:
    """A kernel that can also be bound to one task instance's operands
    (`task_effects.prepare_compute`, for a replayed run, D-RT-REPLAY):
    `prepare(ins, outs, attrs)` checks what depends on the operands' shapes,
    types and attributes once and returns a call without arguments that gives
    what `kernel(ins, outs, attrs)` would, reading the operands' contents
    when called.  A call that returns None has written the results into the
    output tensors' arrays itself (views of the output regions, so a replayed
    small task costs one numpy call with `out=`); it reads every input before
    a later step reads what an earlier one wrote, so inputs that overlap the
    outputs give the kernel's results (numpy's ufuncs copy overlapping
    operands)."""

    __slots__ = ("kernel", "prepare")

    def __init__(
        self,
        kernel: Kernel,
        prepare: Callable[[list[Tensor], list[Tensor], dict[str, object]], BoundKernel | None],
    ) -> None:
        self.kernel = kernel
        self.prepare = prepare  # None from it: no binding, call the kernel

    def __call__(
        self, ins: list[Tensor], outs: list[Tensor], attrs: dict[str, object]
    ) -> list[np.ndarray]:
        return self.kernel(ins, outs, attrs)


def family_types(family: str) -> tuple[str, ...]:
    """The element types a one-parameter type family admits, read from the
    shipped catalog (devices/nem/devices/nem_baseline_1.0.nem)."""
    from nem.dialect.verifier import baseline_catalog

    ((_, domain),) = baseline_catalog().families[family].params
    return tuple(domain)


ELTWISE_T = family_types("eltwise")
VIEW_T = family_types("view")
REDUCE_T = family_types("reduce")
POOL_T = family_types("pool")
NORM_T = family_types("norm")
SOFTMAX_T = family_types("softmax")
ALL_T = INT_TYPES + FLOAT_TYPES
F64_EXACT = float(2**53)


# --------------------------------------------------------------------------
# helpers


def signature(ins: list[Tensor], outs: list[Tensor]) -> str:
    def one(t: Tensor) -> str:
        q = f"[{t.quant.kind}]" if t.quant is not None else ""
        return f"{t.elem}{q}{list(t.array.shape)}"

    return f"in {', '.join(one(t) for t in ins) or '-'} -> out {', '.join(one(t) for t in outs) or '-'}"


def unsupported(op: str, ins: list[Tensor], outs: list[Tensor], why: str) -> NotSupported:
    return NotSupported(f"{op}: {why} ({signature(ins, outs)})")


def same_types(op: str, ins: list[Tensor], outs: list[Tensor], allowed: tuple[str, ...]) -> str:
    elems = {t.elem for t in (*ins, *outs)}
    if len(elems) != 1:
        raise unsupported(
            op, ins, outs, "operands must share one element type (no implicit casts, TYPE-03)"
        )
    (e,) = elems
    if e not in allowed:
        raise unsupported(
            op, ins, outs, f"element type {e} is outside the opcode's family ({', '.join(allowed)})"
        )
    return e


def check_count(
    op: str,
    ins: list[Tensor],
    outs: list[Tensor],
    n_in: tuple[int, int],
    n_out: tuple[int, int] = (1, 1),
) -> None:
    if not (n_in[0] <= len(ins) <= n_in[1] and n_out[0] <= len(outs) <= n_out[1]):
        raise unsupported(
            op, ins, outs, f"wrong operand count: {len(ins)} inputs, {len(outs)} outputs"
        )


def resolve_axis(
    op: str, ins: list[Tensor], outs: list[Tensor], axis: int | str | None, rank: int
) -> int:
    if axis is None or axis == "last":
        return rank - 1
    if isinstance(axis, str) or not -rank <= int(axis) < rank:
        raise unsupported(op, ins, outs, f"axis {axis!r} out of range for rank {rank}")
    return int(axis) % rank


def check_shape(
    op: str, ins: list[Tensor], outs: list[Tensor], got: tuple[int, ...], out: Tensor
) -> None:
    if tuple(got) != tuple(out.array.shape):
        raise unsupported(
            op,
            ins,
            outs,
            f"result shape {list(got)} differs from the output region's "
            f"shape {list(out.array.shape)}",
        )


def finish_int(v: np.ndarray, out: Tensor) -> np.ndarray:
    return saturate_int(v, out.elem)


def requant_out(op: str, v: np.ndarray, out: Tensor) -> np.ndarray:
    """Real f64 values -> the output's stored integers (D-NUM-QELT)."""
    if np.isnan(v).any():
        raise NumericError(f"{op}: NaN result cannot be quantized to {out.elem}")
    assert out.quant is not None, op  # callers requantize only quantized outputs
    return saturate_int(requantize(v, out.quant, out.array.shape, f"{op} output"), out.elem)


def numeric_kernel(
    op: str,
    ins: list[Tensor],
    out: Tensor,
    fop: ElementOp,
    iop: ElementOp | None,
    *,
    allowed: tuple[str, ...] = ELTWISE_T,
    outs: list[Tensor] | None = None,
) -> np.ndarray:
    """Shared float / raw-integer / quantized-integer dispatch (D-NUM-FLOAT, D-NUM-INT,
    D-NUM-QELT).  fop works on f64 arrays, iop on int64 arrays (None: float-only op)."""
    outs = outs or [out]
    elem = same_types(op, ins, outs, allowed)
    if is_float(elem):
        with np.errstate(all="ignore"):
            v = fop(*[t.array.astype(np.float64) for t in ins])
        return to_float_out(v, out.elem)
    quants = [t.quant for t in (*ins, *outs)]
    if all(q is None for q in quants):
        if iop is None:
            raise unsupported(
                op,
                ins,
                outs,
                f"{op} is defined on float types and on quantized integers "
                "only; this integer operand carries no quant descriptor",
            )
        return finish_int(iop(*[t.array.astype(np.int64) for t in ins]), out)
    if any(q is None for q in quants):
        raise unsupported(
            op,
            ins,
            outs,
            "either every integer operand carries a quant descriptor or none does (D-NUM-QELT)",
        )
    real = [dequantize(t.array, q, f"{op} input") for t, q in zip(ins, quants) if q is not None]
    with np.errstate(all="ignore"):
        v = fop(*real)
    return requant_out(op, v, out)
