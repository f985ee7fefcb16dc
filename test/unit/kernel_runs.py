"""Running one escape-hatch kernel in the tests of the `compute
op="mlir.kernel"` executor (test_mlir_kernel.py, test_mlir_kernel_ops.py):
`run` calls the escape hatch as the engine does, and the autouse
`backend` fixture (import it into the test module) runs each test once per
backend (D-RT-MLIR-JIT), in an escape hatch of its own (`HATCH[0]`, as an
interpreter has one): xDSL's interpreter and the native code compiled
with upstream MLIR ("native" refuses rather than falls back, so a test that
passes there ran natively, or, for a constant fill, as a numpy fill:
D-RT-MLIR-FILL, test_mlir_fill.py)."""

from __future__ import annotations

import numpy as np
import pytest

from nem.runtime.escape_hatch import EscapeHatch
from nem.runtime.mlir_native import unavailable

HATCH: list[EscapeHatch] = []
"""The escape hatch of the running test (its backend the fixture's)."""


@pytest.fixture(autouse=True, params=["interpreter", "native"])
def backend(request):
    """Each test once per backend, in a new escape hatch."""
    if request.param == "native" and unavailable():
        pytest.skip(unavailable())
    HATCH[:] = [EscapeHatch(request.param)]
    yield request.param
    HATCH.clear()


def run(text, ins, outs, index_args=()):
    attrs = {"op": "mlir.kernel", "kernel": text}
    if index_args:
        attrs["index_args"] = list(index_args)
    return HATCH[0].run_task(ins, outs, attrs)


def assert_bits(z, ref):
    """Equal bit for bit (so -0.0 != 0.0), any NaN matching any NaN."""
    z = np.asarray(z)
    ref = np.asarray(ref, dtype=z.dtype)
    if z.dtype.kind in "iu":
        np.testing.assert_array_equal(z, ref)
        return
    nan = np.isnan(z.astype(np.float32))
    np.testing.assert_array_equal(nan, np.isnan(ref.astype(np.float32)))
    word = np.dtype(f"u{z.dtype.itemsize}")
    np.testing.assert_array_equal(z[~nan].view(word), ref[~nan].view(word))


def wrap8(v) -> np.ndarray:
    """Integers wrapped to i8, as an i8 kernel result holds them."""
    return np.asarray(v, np.int64).astype(np.int8)
