"""What the reference kernels' tests share (test_kernels.py,
test_kernels_conv.py): calling a kernel as the engine does, operand and
comparison helpers, and the integer requantization step their expected values
end with (`requant_ref`, written from D-NUM-LINEAR-INT, not from the kernels)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nem.dialect.registry import opcodes
from nem.runtime.kernels import KERNELS, Quant, Tensor

BF16 = ml_dtypes.bfloat16
NP = {
    "i4": np.int8,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "u8": np.uint8,
    "f16": np.float16,
    "bf16": BF16,
    "f32": np.float32,
}
RNG = np.random.default_rng(1234)


def T(arr, elem, quant=None):
    return Tensor(np.asarray(arr).astype(NP[elem]), elem, quant)


def out(shape, elem, quant=None):
    return Tensor(np.zeros(shape, NP[elem]), elem, quant)


def pt(scale, zp):
    return Quant("per_tensor", np.array(scale, np.float64), np.array(zp, np.int64))


def pc(axis, scales, zps):
    return Quant("per_channel", np.array(scales, np.float64), np.array(zps, np.int64), axis=axis)


def pg(axis, gs, scales, zps):
    return Quant(
        "per_group", np.array(scales, np.float64), np.array(zps, np.int64), axis=axis, group_size=gs
    )


def run(opname, ins, outs, **attrs):
    """Call the kernel with registry defaults applied, as the engine does."""
    spec = opcodes()[opname]
    full = {}
    for name, a in spec.attributes.items():
        if name in attrs:
            full[name] = attrs.pop(name)
        elif not a.required:
            full[name] = None if a.default == "family_accum" else a.default
    full.update(attrs)
    res = KERNELS[opname](ins, outs, full)
    assert len(res) == len(outs)
    for r, o in zip(res, outs):
        assert r.shape == o.array.shape and r.dtype == o.array.dtype, (r.shape, r.dtype)
    return res[0] if len(res) == 1 else res


def f_out(v64, elem):
    """Expected float result: f64 value -> f32 (RNE) -> elem (RNE) (D-NUM-FLOAT)."""
    return np.asarray(v64, np.float64).astype(np.float32).astype(NP[elem])


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind == "f" or a.dtype == BF16:
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        assert np.array_equal(a64, b64, equal_nan=True), (a64, b64)
    else:
        assert np.array_equal(a, b), (a, b)


def rand_float(shape, elem, lo=-3.0, hi=3.0):
    return RNG.uniform(lo, hi, shape).astype(NP[elem])


def rand_int(shape, lo, hi):
    return RNG.integers(lo, hi + 1, shape)


def requant_ref(acc, sx, sw, sy, zy, lo, hi):
    """y = sat(rne(acc * ((sx*sw)/sy)) + zy)  (D-NUM-LINEAR-INT)."""
    return np.clip(np.rint(acc.astype(np.float64) * ((sx * sw) / sy)) + zy, lo, hi)
