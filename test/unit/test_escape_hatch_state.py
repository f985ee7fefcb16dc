"""The escape hatch's settings and caches belong to one interpreter, and its
caches are bounded (issue 36, item 4): two interpreters in one process with
different backends and limits do not see each other's state; a cache holds
at most its bound."""

from __future__ import annotations

import numpy as np
import pytest

from nem.dialect.bounded_cache import BoundedCache
from nem.runtime.api import NemInterpreter
from nem.runtime.escape_hatch import EscapeHatch
from nem.runtime.mlir_native import unavailable

KERNEL = " ".join(
    """func.func @kernel(%x: memref<8xf32>, %y: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %a = affine.load %x[%i] : memref<8xf32>
    %p = arith.mulf %a, %a : f32
    affine.store %p, %y[%i] : memref<8xf32>
  }
  func.return
}""".split()
)
PROGRAM = f"""program squares:
buffer X : L1 (size=32, align=32)
buffer Y : L1 (size=32, align=32)
c = compute.sync in region(X, 0, 32) elem=f32, shape=[8], layout=C out region(Y, 0, 32) elem=f32, shape=[8], layout=C op="mlir.kernel" kernel="{KERNEL}"
"""


def _run(it: NemInterpreter) -> np.ndarray:
    it.load_string(PROGRAM, "squares.nem")
    it.write_tensor("X", np.arange(8, dtype=np.float32))
    r = it.run()
    assert r.ok, r.error
    return it.read_tensor("Y").reshape(-1)


def test_two_interpreters_keep_their_own_backend_and_kernels():
    if unavailable():
        pytest.skip(unavailable())
    native, interpreted = NemInterpreter(), NemInterpreter()
    native.escape_hatch.set_backend("native")
    interpreted.escape_hatch.set_backend("interpreter")
    want = np.arange(8, dtype=np.float32) ** 2
    np.testing.assert_array_equal(_run(native), want)
    np.testing.assert_array_equal(_run(interpreted), want)
    assert len(native.escape_hatch._native) == 1  # compiled natively
    assert len(interpreted.escape_hatch._native) == 0  # never asked the native backend
    assert interpreted.escape_hatch.backend == "interpreter"
    assert native.escape_hatch.compiled(KERNEL) is not interpreted.escape_hatch.compiled(KERNEL)


def test_a_limit_set_on_one_interpreter_leaves_the_other_alone():
    strict, loose = NemInterpreter(), NemInterpreter()
    strict.escape_hatch.max_kernel_ops = 10
    strict.load_string(PROGRAM, "squares.nem")
    refused = strict.run()
    assert not refused.ok and "above the limit of 10" in refused.error.render()
    np.testing.assert_array_equal(_run(loose), np.arange(8, dtype=np.float32) ** 2)


def test_notices_are_per_interpreter(monkeypatch):
    monkeypatch.setattr("nem.runtime.mlir_native.unavailable", lambda: "no module named 'mlir'")
    seen: list[list[str]] = [[], []]
    for k in range(2):
        it = NemInterpreter()
        it.escape_hatch.notice = seen[k].append
        it.escape_hatch.compile_after = 0
        _run(it)
    assert len(seen[0]) == 1 and seen[0] == seen[1]  # each interpreter says it once


def test_a_cache_holds_at_most_its_bound():
    hatch = EscapeHatch("interpreter", cache_size=2)
    texts = [KERNEL.replace("0 to 8", f"0 to {n}") for n in (2, 4, 6)]
    for t in texts:
        hatch.compiled(t)
    assert len(hatch._compiled) == 2 and texts[0] not in hatch._compiled
    cache: BoundedCache[int, int] = BoundedCache(3)
    for k in range(10):
        cache[k] = k
        cache[k] = k  # storing a held key again evicts nothing
    assert len(cache) == 3 and cache.keys() == [7, 8, 9]
    with pytest.raises(ValueError):
        BoundedCache(0)
