"""Replayed functional runs (D-RT-REPLAY) and the f32 elementwise fast path
(D-NUM-FLOAT): both must be indistinguishable from the general path."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_programs import ELTWISE, pingpong

from nem.runtime import NemInterpreter
from nem.runtime import scheduler as sched_mod
from nem.runtime.kernel_support import Tensor, numeric_kernel
from nem.runtime.kernels import _BINARY, _EXACT_IN_F32, _UNARY, KERNELS

DIVS = """\
program divs:
buffer X : L1 (size=1024, align=64)
buffer Y : L1 (size=1024, align=64)
buffer Z : L1 (size=1024, align=64)
loop i in [0..3] @max_in_flight(1):
  let x = region(X, i * 256, 256) elem=i32, shape=[64], layout=C
  let y = region(Y, i * 256, 256) elem=i32, shape=[64], layout=C
  let z = region(Z, i * 256, 256) elem=i32, shape=[64], layout=C
  tD = div.sync in x, y out z
endloop
"""


def _summary(it: NemInterpreter, r) -> tuple:
    return (r.status, r.tasks_run, r.counts, r.race_count, [str(x) for x in r.races],
            [str(u) for u in r.unconsumed], r.max_active_iterations,
            r.error.message if r.error else None, r.error.loc if r.error else None)


def _issues(monkeypatch) -> list:
    calls: list = []
    orig = sched_mod.Scheduler._issue

    def counting(self, frame, tpl):
        calls.append(tpl)
        return orig(self, frame, tpl)
    monkeypatch.setattr(sched_mod.Scheduler, "_issue", counting)
    return calls


def test_second_run_is_replayed_with_the_same_result(monkeypatch):
    x = np.random.default_rng(0).uniform(-2, 2, 1024).astype(np.float32)
    y = np.random.default_rng(1).uniform(-2, 2, 1024).astype(np.float32)
    it = NemInterpreter()
    it.load_string(ELTWISE, "e.nem")
    issued = _issues(monkeypatch)
    it.write_tensor("X_L2", x)
    it.write_tensor("Y_L2", y)
    first = it.run()
    assert issued and it.program.compiled.replay is not None
    issued.clear()
    it.write_tensor("X_L2", -x)        # new data: the effects run, the schedule is reused
    second = it.run()
    assert issued == []                # no task was scheduled: the plan was replayed
    assert _summary(it, second) == _summary(it, first)
    np.testing.assert_array_equal(it.read_tensor("Z_L2").reshape(-1),
                                  np.maximum(-x + y, 0).astype(np.float32))


def test_replay_reports_the_same_races_and_trace():
    it = NemInterpreter()
    it.load_string(pingpong(N=3), "pp.nem")
    a = it.start()
    ra = a.run_to_end()
    b = it.start()
    rb = b.run_to_end()
    assert ra.race_count > 0
    assert _summary(it, rb) == _summary(it, ra)
    assert b.dump_trace() == a.dump_trace()


def test_failing_effect_during_replay_reports_as_a_normal_run():
    it = NemInterpreter()
    it.load_string(DIVS, "d.nem")
    it.write_tensor("X", np.arange(256, dtype=np.int32))
    it.write_tensor("Y", np.ones(256, np.int32))
    assert it.run().status == "completed"
    y = np.ones(256, np.int32)
    y[200] = 0                          # iteration 3 divides by zero
    it.write_tensor("Y", y)
    replayed = it.run()
    fresh = NemInterpreter()
    fresh.load_string(DIVS, "d.nem")
    fresh.write_tensor("X", np.arange(256, dtype=np.int32))
    fresh.write_tensor("Y", y)
    normal = fresh.run()
    assert replayed.status == "error" and "iteration i=3" in replayed.error.message
    assert _summary(it, replayed) == _summary(fresh, normal)
    # iterations 0-2 ran in both (iteration 3's slot still holds the first run's values)
    np.testing.assert_array_equal(it.read_tensor("Z")[:192], fresh.read_tensor("Z")[:192])


NESTED = """\
program nested:
buffer A : L2 (size=256, align=64)
buffer B : L1 (size=64, align=64)
loop i in [0..3] @max_in_flight({N}):
  loop j in [0..1] @max_in_flight(1):
    t = transfer.async(dst=region(B, 0, 64), src=region(A, i * 64, 64))
  endloop
endloop
"""


@pytest.mark.parametrize("n,racy", [(1, False), (2, True)])
def test_nested_window_races_in_the_first_run_and_the_replay(n, racy):
    """RULE: LOOP-06 - every iteration writes B.  With @max_in_flight(1) an
    outer iteration, its inner loop's tasks included, completes before the
    next opens: no race (the iteration stream's completion clock must take in
    the inner loop's, which the scheduler keeps for loop iterations only);
    with 2 in flight the outer iterations race, found when the run is
    scheduled and reported again when it is replayed (D-RT-REPLAY)."""
    it = NemInterpreter()
    it.load_string(NESTED.format(N=n), "n.nem")
    first = it.run()
    assert it.program.compiled.replay is not None
    second = it.run()
    assert (first.race_count > 0) == racy
    assert _summary(it, second) == _summary(it, first)


ESCAPE = """\
program escape:
buffer X : L1 (size=256, align=64)
buffer Y : L1 (size=256, align=64)
loop i in [0..1] @max_in_flight(1):
  c = compute.sync in region(X, i * 128, 128) elem=f32, shape=[32], layout=C out region(Y, i * 128, 128) elem=f32, shape=[32], layout=C op="mlir.kernel" kernel="{K}"
endloop
"""
SQUARE = " ".join("""func.func @kernel(%x: memref<32xf32>, %y: memref<32xf32>) {
  affine.for %i = 0 to 32 {
    %a = affine.load %x[%i] : memref<32xf32>
    %b = affine.load %y[%i] : memref<32xf32>
    %p = arith.mulf %a, %a : f32
    %s = arith.addf %p, %b : f32
    affine.store %s, %y[%i] : memref<32xf32>
  }
  func.return
}""".split())


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_replayed_escape_hatch_reads_and_writes_the_current_contents(backend):
    """A replayed `mlir.kernel` task, bound to its operands once (packed
    pointers, D-RT-MLIR-JIT), reads the inputs and the outputs' current
    contents at each run (read-modify-write, D-RT-MLIR-KERNEL)."""
    from nem.runtime import escape_hatch, mlir_native
    if backend == "native" and mlir_native.unavailable() is not None:
        pytest.skip(str(mlir_native.unavailable()))
    escape_hatch.set_backend(backend)
    try:
        it = NemInterpreter()
        it.load_string(ESCAPE.format(K=SQUARE), "e.nem")
        x = np.arange(64, dtype=np.float32)
        it.write_tensor("X", x)
        assert it.run().status == "completed"
        assert it.program.compiled.replay is not None
        np.testing.assert_array_equal(it.read_tensor("Y").reshape(-1), x * x)
        it.write_tensor("X", -2 * x)
        it.write_tensor("Y", np.ones(64, np.float32))
        assert it.run().status == "completed"       # replayed
        np.testing.assert_array_equal(it.read_tensor("Y").reshape(-1), 4 * x * x + 1)
    finally:
        escape_hatch.set_backend("auto")


@pytest.mark.parametrize("policy", ["random", "timed"])
def test_random_and_timed_runs_are_not_replayed(monkeypatch, policy):
    it = NemInterpreter()
    it.load_string(ELTWISE, "e.nem")
    if policy == "timed":
        it.set_mode("timed")
    else:
        it.set_scheduling("random", seed=3)
    it.run()
    assert it.program.compiled.replay is None
    issued = _issues(monkeypatch)
    it.run()
    assert issued


def _specials() -> np.ndarray:
    rng = np.random.default_rng(7)
    v = rng.standard_normal(4000).astype(np.float32) * np.float32(10) ** \
        rng.integers(-40, 39, 4000).astype(np.float32)
    s = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4028235e38,
                  -3.4028235e38, 1.1754944e-38], np.float32)
    return np.concatenate([v, s, -s])


@pytest.mark.parametrize("op", sorted(_EXACT_IN_F32))
def test_f32_fast_path_is_bitwise_the_f64_formula(op):
    """RULE: D-NUM-FLOAT - evaluating these ops in f32 gives the f64 formula's
    bits (innocuous double rounding; NaNs compared as NaNs)."""
    a = _specials()
    b = np.roll(a, 17)
    arity = 1 if op in _UNARY else 2
    fop = (_UNARY if arity == 1 else _BINARY)[op][0]
    ins = [Tensor(a, "f32", None), Tensor(b, "f32", None)][:arity]
    out = Tensor(np.zeros_like(a), "f32", None)
    got = KERNELS[op](ins, [out], {})[0]
    want = numeric_kernel(op, ins, out, fop, None)
    assert got.dtype == np.float32
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))



@pytest.mark.parametrize("elem", ["f32", "f16"])
@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1]},
                                   {"pads": [0, 1, 2, 0], "strides": [2, 1], "dilations": [1, 2]}])
def test_prepared_conv_is_bitwise_the_kernel(attrs, elem):
    """D-NUM-LINEAR-FLOAT - a float convolution bound to its operands
    (Preparable, D-RT-REPLAY) gives the kernel's bits, reading the operands'
    current contents at each call."""
    rng = np.random.default_rng(3)
    dt = np.float32 if elem == "f32" else np.float16
    x = rng.standard_normal((1, 9, 10, 5)).astype(dt)
    w = rng.standard_normal((3, 3, 5, 4)).astype(dt)
    b = rng.standard_normal(4).astype(dt)
    p = attrs.get("pads", [0, 0, 0, 0])
    s, d = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    shape = (1, *((n + p[i] + p[2 + i] - (d[i] * 2 + 1)) // s[i] + 1 for i, n in enumerate((9, 10))),
             4)
    ins = [Tensor(x, elem), Tensor(w, elem), Tensor(b, elem)]
    outs = [Tensor(np.zeros(shape, dt), elem)]
    call = KERNELS["conv2d"].prepare(ins, outs, attrs)
    for _ in range(2):
        (got,), (want,) = call(), KERNELS["conv2d"](ins, outs, attrs)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
        x[...] = rng.standard_normal(x.shape)
        w[...] = rng.standard_normal(w.shape)
