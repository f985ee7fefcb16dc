"""Replayed functional runs (D-RT-REPLAY) and the f32 elementwise fast path
(D-NUM-FLOAT): both must be indistinguishable from the general path."""

from __future__ import annotations

import numpy as np
import pytest
from runtime_programs import DIVS, ELTWISE, issued_tasks, pingpong, run_summary

from nem.runtime import NemInterpreter
from nem.runtime import scheduler as sched_mod
from nem.runtime.kernel_support import Tensor, numeric_kernel
from nem.runtime.kernels import _BINARY, _EXACT_IN_F32, _UNARY, KERNELS


def test_second_run_is_replayed_with_the_same_result(monkeypatch):
    x = np.random.default_rng(0).uniform(-2, 2, 1024).astype(np.float32)
    y = np.random.default_rng(1).uniform(-2, 2, 1024).astype(np.float32)
    it = NemInterpreter()
    it.load_string(ELTWISE, "e.nem")
    issued = issued_tasks(monkeypatch)
    it.write_tensor("X_L2", x)
    it.write_tensor("Y_L2", y)
    first = it.run()
    assert issued and it.program.compiled.replay is not None
    issued.clear()
    it.write_tensor("X_L2", -x)  # new data: the effects run, the schedule is reused
    second = it.run()
    assert issued == []  # no task was scheduled: the plan was replayed
    assert run_summary(it, second) == run_summary(it, first)
    np.testing.assert_array_equal(
        it.read_tensor("Z_L2").reshape(-1), np.maximum(-x + y, 0).astype(np.float32)
    )


def test_replay_reports_the_same_races_and_trace():
    it = NemInterpreter()
    it.load_string(pingpong(N=3), "pp.nem")
    a = it.start()
    ra = a.run_to_end()
    b = it.start()
    rb = b.run_to_end()
    assert ra.race_count > 0
    assert run_summary(it, rb) == run_summary(it, ra)
    assert b.dump_trace() == a.dump_trace()


def test_failing_effect_during_replay_reports_as_a_normal_run():
    it = NemInterpreter()
    it.load_string(DIVS, "d.nem")
    it.write_tensor("X", np.arange(256, dtype=np.int32))
    it.write_tensor("Y", np.ones(256, np.int32))
    assert it.run().status == "completed"
    y = np.ones(256, np.int32)
    y[200] = 0  # iteration 3 divides by zero
    it.write_tensor("Y", y)
    replayed = it.run()
    fresh = NemInterpreter()
    fresh.load_string(DIVS, "d.nem")
    fresh.write_tensor("X", np.arange(256, dtype=np.int32))
    fresh.write_tensor("Y", y)
    normal = fresh.run()
    assert replayed.status == "error" and "iteration i=3" in replayed.error.message
    assert run_summary(it, replayed) == run_summary(fresh, normal)
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
    assert run_summary(it, second) == run_summary(it, first)


ESCAPE = """\
program escape:
buffer X : L1 (size=256, align=64)
buffer Y : L1 (size=256, align=64)
loop i in [0..1] @max_in_flight(1):
  c = compute.sync in region(X, i * 128, 128) elem=f32, shape=[32], layout=C out region(Y, i * 128, 128) elem=f32, shape=[32], layout=C op="mlir.kernel" kernel="{K}"
endloop
"""
SQUARE = " ".join(
    """func.func @kernel(%x: memref<32xf32>, %y: memref<32xf32>) {
  affine.for %i = 0 to 32 {
    %a = affine.load %x[%i] : memref<32xf32>
    %b = affine.load %y[%i] : memref<32xf32>
    %p = arith.mulf %a, %a : f32
    %s = arith.addf %p, %b : f32
    affine.store %s, %y[%i] : memref<32xf32>
  }
  func.return
}""".split()
)


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_replayed_escape_hatch_reads_and_writes_the_current_contents(backend):
    """A replayed `mlir.kernel` task, bound to its operands once (packed
    pointers, D-RT-MLIR-JIT), reads the inputs and the outputs' current
    contents at each run (read-modify-write, D-RT-MLIR-KERNEL)."""
    from nem.runtime import mlir_native

    if backend == "native" and mlir_native.unavailable() is not None:
        pytest.skip(str(mlir_native.unavailable()))
    it = NemInterpreter()
    it.escape_hatch.set_backend(backend)
    it.load_string(ESCAPE.format(K=SQUARE), "e.nem")
    x = np.arange(64, dtype=np.float32)
    it.write_tensor("X", x)
    assert it.run().status == "completed"
    assert it.program.compiled.replay is not None
    np.testing.assert_array_equal(it.read_tensor("Y").reshape(-1), x * x)
    it.write_tensor("X", -2 * x)
    it.write_tensor("Y", np.ones(64, np.float32))
    assert it.run().status == "completed"  # replayed
    np.testing.assert_array_equal(it.read_tensor("Y").reshape(-1), 4 * x * x + 1)


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
    issued = issued_tasks(monkeypatch)
    it.run()
    assert issued


def _specials() -> np.ndarray:
    rng = np.random.default_rng(7)
    v = rng.standard_normal(4000).astype(np.float32) * np.float32(10) ** rng.integers(
        -40, 39, 4000
    ).astype(np.float32)
    s = np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            1e-45,
            -1e-45,
            3.4028235e38,
            -3.4028235e38,
            1.1754944e-38,
        ],
        np.float32,
    )
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
@pytest.mark.parametrize(
    "attrs",
    [{}, {"pads": [1, 1, 1, 1]}, {"pads": [0, 1, 2, 0], "strides": [2, 1], "dilations": [1, 2]}],
)
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
    shape = (
        1,
        *((n + p[i] + p[2 + i] - (d[i] * 2 + 1)) // s[i] + 1 for i, n in enumerate((9, 10))),
        4,
    )
    ins = [Tensor(x, elem), Tensor(w, elem), Tensor(b, elem)]
    outs = [Tensor(np.zeros(shape, dt), elem)]
    call = KERNELS["conv2d"].prepare(ins, outs, attrs)
    for _ in range(2):
        (got,), (want,) = _prepared(call, outs), KERNELS["conv2d"](ins, outs, attrs)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
        x[...] = rng.standard_normal(x.shape)
        w[...] = rng.standard_normal(w.shape)


def _prepared(call, outs: list[Tensor]) -> list[np.ndarray]:
    """What a prepared call gives: its results, or the outputs it wrote in place."""
    results = call()
    return [o.array.copy() for o in outs] if results is None else results


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8)


def _nan_specials(n: int, seed: int) -> np.ndarray:
    """f32 values with signalling and quiet NaNs of both signs and payloads,
    +-0, +-inf, subnormals and +-max among random magnitudes."""
    rng = np.random.default_rng(seed)
    nans = np.array([0x7F800001, 0xFF800001, 0x7FC00001, 0xFFC12345, 0x7FBFFFFF], np.uint32).view(
        np.float32
    )
    v = np.concatenate([_specials(), nans])
    return rng.permutation(np.resize(v, n))


CLAMPS = [
    (0, 0),
    (-3.4028234663852886e38, -3.4028234663852886e38),
    (-0.5, 0.5),
    (0, 6),
    (-0.0, 0.0),
    (0.0, -0.0),
    (2, 1),
    (float("nan"), 1),
    (1e39, 1e39),
    (0.1, 0.30000001),
]


@pytest.mark.parametrize("lo,hi", CLAMPS)
def test_f32_clamp_is_bitwise_the_f64_formula(lo, hi):
    """RULE: D-NUM-FLOAT - an f32 clamp evaluated in f32 (bounds rounded to
    f32 first; max and min are exact) gives the f64 formula's bits, NaN
    payloads included (quieted as the f64 round trip quiets them); the call
    bound to its operands (D-RT-REPLAY) gives the same bits."""
    a = _nan_specials(4100, 1)
    ins, outs = [Tensor(a, "f32")], [Tensor(np.zeros_like(a), "f32")]
    attrs = {"min": lo, "max": hi}
    got = KERNELS["clamp"](ins, outs, attrs)[0]
    with np.errstate(all="ignore"):
        want = numeric_kernel(
            "clamp", ins, outs[0], lambda x: np.minimum(np.maximum(x, float(lo)), float(hi)), None
        )
    np.testing.assert_array_equal(_bits(got), _bits(want))
    np.testing.assert_array_equal(
        _bits(_prepared(KERNELS["clamp"].prepare(ins, outs, attrs), outs)[0]), _bits(want)
    )


@pytest.mark.parametrize("elem", ["i8", "i16", "i32"])
@pytest.mark.parametrize(
    "lo,hi", [(0, 0), (-5, 5), (-1000, 70000), (3, -3), (-1e10, 1e10), (200, 300)]
)
def test_integer_clamp_in_its_own_type_is_the_int64_formula(elem, lo, hi):
    """RULE: D-NUM-INT - bounds saturated to the type's range, then clamped in
    the type (a fill when min >= max), give the saturated int64 formula."""
    dt = np.dtype(elem.replace("i", "int"))
    info = np.iinfo(dt)
    x = np.random.default_rng(2).integers(info.min, info.max, 3000, endpoint=True).astype(dt)
    x[:4] = [info.min, info.max, 0, -1]
    ins, outs = [Tensor(x, elem)], [Tensor(np.zeros_like(x), elem)]
    attrs = {"min": lo, "max": hi}
    want = numeric_kernel(
        "clamp", ins, outs[0], None, lambda v: np.minimum(np.maximum(v, int(lo)), int(hi))
    )
    for got in (
        KERNELS["clamp"](ins, outs, attrs)[0],
        _prepared(KERNELS["clamp"].prepare(ins, outs, attrs), outs)[0],
    ):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("relu", {}),
        ("add", {}),
        ("mul", {}),
        ("max", {}),
        ("sub", {}),
        ("div", {}),
        ("neg", {}),
        ("clamp", {"min": -0.5, "max": 0.5}),
        ("clamp", {"min": 1.0, "max": 1.0}),
    ],
)
@pytest.mark.parametrize("alias", ["none", "in_place", "overlap"])
def test_bound_small_kinds_write_the_kernels_bits_into_their_outputs(op, attrs, alias):
    """D-RT-REPLAY - f32 relu / clamp / binary ops bound to their operands
    write into the output's view the bits the kernel returns, reading the
    inputs' current contents at each call, also when the output is the input
    (in place) or overlaps it shifted (numpy copies overlapping operands)."""
    rng = np.random.default_rng(4)
    mem = np.zeros(600, np.float32)
    arity = 2 if op in _BINARY else 1
    x = mem[:256].reshape(16, 16)
    b = rng.standard_normal((16, 16)).astype(np.float32).T  # a strided operand
    out = {"none": mem[300:556], "in_place": mem[:256], "overlap": mem[5:261]}[alias]
    ins = [Tensor(x, "f32"), Tensor(b, "f32")][:arity]
    outs = [Tensor(out.reshape(16, 16), "f32")]
    call = KERNELS[op].prepare(ins, outs, attrs)
    assert call is not None
    for seed in range(3):
        mem[...] = _nan_specials(600, seed)
        want = KERNELS[op](ins, outs, attrs)[0]
        assert call() is None
        np.testing.assert_array_equal(_bits(outs[0].array), _bits(want))


KINDS = """\
program kinds:
buffer X : L1 (size=1024, align=64)
buffer B : L1 (size=1024, align=64)
buffer Y : L1 (size=1024, align=64)
buffer P : L1 (size=512, align=64)
buffer F : L1 (size=1024, align=64)
buffer Z : L1 (size=1024, align=64)
buffer Q : L1 (size=1024, align=64)
let x = region(X, 0, 1024) elem=f32, shape=[16, 16], layout=MN
let y = region(Y, 0, 1024) elem=f32, shape=[16, 16], layout=MN
let bt = region(B, 0, 1024) elem=f32, shape=[16, 16], strides=[1, 16]
tA = add.async in x, bt out y
tU = mul.async in y, bt out y deps=[tA]
tR = relu.sync in y out y deps=[tU]
tM = max.sync in region(X, 0, 1024) elem=f32, shape=[8, 16], strides=[32, 1], \
region(X, 64, 960) elem=f32, shape=[8, 16], strides=[32, 1] out region(P, 0, 512) elem=f32, \
shape=[8, 16], layout=MN
tZ = clamp.async in region(F, 0, 1024) elem=i8, shape=[1024], layout=C out region(F, 0, 1024) \
elem=i8, shape=[1024], layout=C min=0 max=0
tS = clamp.sync in region(F, 0, 1024) elem=f32, shape=[256], layout=C out region(F, 0, 1024) \
elem=f32, shape=[256], layout=C deps=[tZ] min=(0 - 3.4028234663852886e+38) \
max=(0 - 3.4028234663852886e+38)
tC = clamp.sync in x out region(Z, 0, 1024) elem=f32, shape=[16, 16], layout=MN \
min=(0 - 0.5) max=0.5
tI = clamp.sync in region(X, 0, 1024) elem=i32, shape=[256], layout=C out region(Q, 0, 1024) \
elem=i32, shape=[256], layout=C min=(0 - 1000) max=70000
""".replace("\\\n", "")
"""The small task kinds of a lowered CNN (D-LOW-FILL's zero and splat clamps, a
relu in place, max over strided views as a pooling, binary ops with a
transposed operand)."""


def test_replayed_small_kinds_are_bitwise_a_scheduled_run(monkeypatch):
    """RULE: D-RT-REPLAY - a replayed run of the small kinds, bound once as
    in-place numpy calls, leaves the bytes a scheduled run leaves, on data
    with NaN payloads, -0, infinities and subnormals; no task runs the
    general (f64) path once bound."""
    from nem.runtime import kernels as kernels_mod

    def load(it: NemInterpreter, seed: int) -> None:
        for buf, k in (("X", 0), ("B", 10), ("F", 20)):  # as bytes: F is also i8
            it.write_tensor(buf, _nan_specials(256, seed + k), raw=True)

    it = NemInterpreter()
    it.load_string(KINDS, "k.nem")
    load(it, 0)
    assert it.run().status == "completed"
    assert it.program.compiled.replay is not None
    general = []
    orig = kernels_mod.numeric_kernel
    monkeypatch.setattr(
        kernels_mod, "numeric_kernel", lambda *a, **k: general.append(a[0]) or orig(*a, **k)
    )
    issued = issued_tasks(monkeypatch)
    load(it, 1)
    assert it.run().status == "completed"
    assert issued == [] and general == []  # replayed, by the bound calls only
    fresh = NemInterpreter()
    fresh.load_string(KINDS, "k.nem")
    fresh.set_scheduling("random", seed=5)  # scheduled (never replayed)
    load(fresh, 1)
    assert fresh.run().status == "completed"
    for buf in "YPFZQ":
        np.testing.assert_array_equal(
            it.read_tensor(buf, dtype=np.uint8), fresh.read_tensor(buf, dtype=np.uint8)
        )
    x = _nan_specials(256, 1)
    np.testing.assert_array_equal(
        it.read_tensor("F", dtype=np.uint8).view(np.float32),
        np.full(256, -3.4028234663852886e38, np.float32),
    )
    np.testing.assert_array_equal(
        it.read_tensor("Z", dtype=np.uint8),
        _bits(
            KERNELS["clamp"]([Tensor(x, "f32")], [Tensor(x, "f32")], {"min": -0.5, "max": 0.5})[0]
        ),
    )


def test_collector_is_paused_only_while_a_run_records_its_plan(monkeypatch):
    """D-RT-GC - the cyclic collector is off while a run records its plan, back
    on afterwards (also after a kernel error), untouched by other runs, and a
    collector the process disabled stays disabled."""
    import gc

    seen: list = []
    orig = sched_mod.Scheduler._run
    monkeypatch.setattr(
        sched_mod.Scheduler, "_run", lambda self, t: seen.append(gc.isenabled()) or orig(self, t)
    )
    assert gc.isenabled()
    it = NemInterpreter()
    it.load_string(ELTWISE, "e.nem")
    it.run()  # records
    assert seen and not any(seen) and gc.isenabled()
    seen.clear()
    it.set_scheduling("random", seed=1)
    it.run()  # not eligible: scheduled, collector on
    assert seen and all(seen)
    bad = NemInterpreter()
    bad.load_string(DIVS, "d.nem")  # Y = 0: the first division fails
    assert bad.run().status == "error" and gc.isenabled()
    gc.disable()
    try:
        fresh = NemInterpreter()
        fresh.load_string(ELTWISE, "e.nem")
        fresh.run()
        assert not gc.isenabled()
    finally:
        gc.enable()
