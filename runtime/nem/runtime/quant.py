"""Quantization descriptors as the kernels see them, and their expansion to arrays.

`Quant` mirrors a region's quant attribute (nem.dialect.attributes
PerTensorQuantAttr / PerChannelQuantAttr / PerGroupQuantAttr).  Real value of a
stored integer q: (q - zero_point) * scale (D-NUM-QUANT).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import Attribute

from nem.dialect.attributes import (
    PerChannelQuantAttr,
    PerGroupQuantAttr,
    PerTensorQuantAttr,
    num_value,
)
from nem.runtime.numerics import NotSupported


@dataclass(frozen=True)
class Quant:
    kind: str  # "per_tensor" | "per_channel" | "per_group"
    scales: np.ndarray  # float64, shape () for per_tensor, (n,) otherwise
    zero_points: np.ndarray  # int64, same shape
    axis: int | None = None
    group_size: int | None = None

    def describe(self) -> str:
        if self.kind == "per_tensor":
            return f"per_tensor(scale={float(self.scales)}, zero_point={int(self.zero_points)})"
        g = f", group_size={self.group_size}" if self.kind == "per_group" else ""
        return f"{self.kind}(axis={self.axis}{g}, {np.size(self.scales)} scales)"


def quant_of(q: Attribute | None) -> Quant | None:
    """The descriptor of a region type's quant attribute (None: not quantized)."""
    if q is None:
        return None
    if isinstance(q, PerTensorQuantAttr):
        return Quant(
            "per_tensor",
            np.array(num_value(q.scale), dtype=np.float64),
            np.array(num_value(q.zero_point), dtype=np.int64),
        )
    if isinstance(q, PerChannelQuantAttr):
        return Quant(
            "per_channel",
            np.array([num_value(a) for a in q.scales.data], np.float64),
            np.array([num_value(a) for a in q.zero_points.data], np.int64),
            axis=q.axis.data,
        )
    if isinstance(q, PerGroupQuantAttr):
        return Quant(
            "per_group",
            np.array([num_value(a) for a in q.scales.data], np.float64),
            np.array([num_value(a) for a in q.zero_points.data], np.int64),
            axis=q.axis.data,
            group_size=q.group_size.data,
        )
    return None


def expand(q: Quant, shape: tuple[int, ...], what: str) -> tuple[np.ndarray, np.ndarray]:
    """(scale f64, zero point int64) arrays broadcastable to `shape`.

    per_channel: one entry per index of `axis`; per_group: index i of `axis`
    uses entry i // group_size (the last group may be shorter, QUANT-03)."""
    scales = np.asarray(q.scales, dtype=np.float64)
    zps = np.asarray(q.zero_points)
    if zps.dtype.kind == "f":
        if not np.all(zps == np.rint(zps)):
            raise NotSupported(f"{what}: zero points must be integers, got {zps.tolist()}")
    zps = zps.astype(np.int64)
    if not (np.all(np.isfinite(scales)) and np.all(scales > 0)):
        raise NotSupported(
            f"{what}: quant scales must be positive and finite, got "
            f"{np.atleast_1d(scales).tolist()}"
        )
    if q.kind == "per_tensor":
        if scales.size != 1 or zps.size != 1:
            raise NotSupported(f"{what}: per_tensor quant needs one scale and one zero point")
        return scales.reshape(()), zps.reshape(())
    if q.kind not in ("per_channel", "per_group"):
        raise NotSupported(f"{what}: unknown quant kind {q.kind!r}")
    rank = len(shape)
    axis = q.axis
    if axis is None or not 0 <= axis < rank:
        raise NotSupported(f"{what}: quant axis {axis} out of range for rank {rank}")
    dim = shape[axis]
    if q.kind == "per_channel":
        if scales.shape != (dim,) or zps.shape != (dim,):
            raise NotSupported(
                f"{what}: per_channel quant needs {dim} scales and zero points, "
                f"got {scales.size} and {zps.size}"
            )
        idx = np.arange(dim)
    else:
        gs = q.group_size
        if gs is None or gs <= 0:
            raise NotSupported(f"{what}: per_group quant needs a positive group_size")
        n = -(-dim // gs)
        if scales.shape != (n,) or zps.shape != (n,):
            raise NotSupported(
                f"{what}: per_group quant needs ceil({dim}/{gs}) = {n} scales and "
                f"zero points, got {scales.size} and {zps.size}"
            )
        idx = np.arange(dim) // gs
    bshape = [1] * rank
    bshape[axis] = dim
    return scales[idx].reshape(bshape), zps[idx].reshape(bshape)


def same(a: Quant | None, b: Quant | None) -> bool:
    """Identical descriptors (kind, axis, group size, every scale and zero point)."""
    if a is None or b is None:
        return a is b
    return (
        a.kind == b.kind
        and a.axis == b.axis
        and a.group_size == b.group_size
        and np.array_equal(np.asarray(a.scales, np.float64), np.asarray(b.scales, np.float64))
        and np.array_equal(np.asarray(a.zero_points), np.asarray(b.zero_points))
    )


def dequantize(q: np.ndarray, quant: Quant, what: str) -> np.ndarray:
    """Real values in f64: (q - zp) * scale, one f64 rounding (D-NUM-QUANT)."""
    s, z = expand(quant, q.shape, what)
    out: np.ndarray = (q.astype(np.int64) - z).astype(np.float64) * s
    return out


def requantize(
    v: np.ndarray | np.float64, quant: Quant, shape: tuple[int, ...], what: str
) -> np.ndarray:
    """Integral f64 rne(v / scale) + zp, before saturation (D-NUM-QUANT)."""
    s, z = expand(quant, shape, what)
    with np.errstate(invalid="ignore", over="ignore"):
        out: np.ndarray = np.rint(v / s) + z.astype(np.float64)
    return out
