"""The `compute op="mlir.kernel"` executor (runtime/nem/runtime/mlir_kernel.py,
decision D-RT-MLIR-KERNEL): argument binding, per-op rounding, integer
wrapping, bounds, index_args, caching and clear NotSupported errors; the
arith/math/linalg ops and affine/scf parallel loops added to xDSL's
interpreter (D-RT-MLIR-KERNEL-OPS), with reductions in sequential order.

Every test runs on both backends (D-RT-MLIR-JIT): xDSL's interpreter and the
native code compiled with upstream MLIR ("native" refuses rather than falls
back, so a test that passes there ran natively); the semantics, including
the errors for undefined results, are the same."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from nem.runtime import escape_hatch, mlir_kernel
from nem.runtime.api import NemInterpreter
from nem.runtime.kernels import KERNELS, NotSupported, NumericError, Tensor
from nem.runtime.mlir_native import unavailable


@pytest.fixture(autouse=True, params=["interpreter", "native"])
def backend(request, monkeypatch):
    """Each test once per backend (escape_hatch.BACKEND)."""
    if request.param == "native" and unavailable():
        pytest.skip(unavailable())
    monkeypatch.setattr(escape_hatch, "BACKEND", request.param)
    return request.param


def run(text, ins, outs, index_args=()):
    attrs = {"op": "mlir.kernel", "kernel": text}
    if index_args:
        attrs["index_args"] = list(index_args)
    return KERNELS["compute"](ins, outs, attrs)


FMA = """func.func @kernel(%x: memref<4x8xf32>, %z: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %a = affine.load %x[%i, %j] : memref<4x8xf32>
      %p = arith.mulf %a, %a : f32
      %s = arith.addf %p, %a : f32
      affine.store %s, %z[%i, %j] : memref<4x8xf32>
    }
  }
  func.return
}"""


def test_f32_each_op_rounded():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
    (z,) = run(FMA, [Tensor(x, "f32")], [Tensor(np.zeros((4, 8), np.float32), "f32")])
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z, x * x + x)       # numpy f32: rounds after each op


@pytest.mark.parametrize("elem,dt", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_narrow_floats_each_op_rounded(elem, dt):
    text = FMA.replace("f32", elem)
    rng = np.random.default_rng(1)
    x = rng.uniform(-4, 4, (4, 8)).astype(dt)
    (z,) = run(text, [Tensor(x, elem)], [Tensor(np.zeros((4, 8), dt), elem)])
    assert z.dtype == np.dtype(dt)
    want = ((x.astype(np.float32) * x.astype(np.float32)).astype(dt).astype(np.float32)
            + x.astype(np.float32)).astype(dt)
    np.testing.assert_array_equal(z.astype(np.float32), want.astype(np.float32))


def test_outs_read_modify_write_and_index_args():
    # z[i, j] += x[i, j] * (base + i), loop bound from an index argument
    text = """func.func @kernel(%x: memref<3x5xi32>, %z: memref<3x5xi32>, %base: index, %n: index) {
      affine.for %i = 0 to 3 {
        affine.for %j = 0 to affine_map<()[s0] -> (s0)>()[%n] {
          %a = affine.load %x[%i, %j] : memref<3x5xi32>
          %c = affine.load %z[%i, %j] : memref<3x5xi32>
          %r = affine.apply affine_map<(d0)[s0] -> (d0 + s0)>(%i)[%base]
          %ri = arith.index_cast %r : index to i32
          %p = arith.muli %a, %ri : i32
          %s = arith.addi %c, %p : i32
          affine.store %s, %z[%i, %j] : memref<3x5xi32>
        }
      }
      func.return
    }"""
    x = np.arange(15, dtype=np.int32).reshape(3, 5)
    z0 = np.full((3, 5), 7, np.int32)
    (z,) = run(text, [Tensor(x, "i32")], [Tensor(z0, "i32")], index_args=[10, 4])
    want = z0.copy()
    want[:, :4] += x[:, :4] * (10 + np.arange(3))[:, None]
    np.testing.assert_array_equal(z, want)
    assert (z0 == 7).all()                 # the runtime writes the result back, not the kernel


def test_integer_ops_wrap_at_their_width():
    text = """func.func @kernel(%x: memref<4xi8>, %z: memref<4xi8>) {
      affine.for %i = 0 to 4 {
        %a = affine.load %x[%i] : memref<4xi8>
        %s = arith.muli %a, %a : i8
        affine.store %s, %z[%i] : memref<4xi8>
      }
      func.return
    }"""
    x = np.array([100, -128, 3, 127], np.int8)
    (z,) = run(text, [Tensor(x, "i8")], [Tensor(np.zeros(4, np.int8), "i8")])
    np.testing.assert_array_equal(z, (x.astype(np.int64) ** 2).astype(np.int8))


def test_i4_stores_wrap_to_four_bits(backend):
    """i4 regions are unpacked, one element per byte (D-RT-I4): interpreted
    only; the native backend refuses them (in "auto" mode: interpreted)."""
    text = """func.func @kernel(%x: memref<4xi4>, %z: memref<4xi4>) {
      affine.for %i = 0 to 4 {
        %a = affine.load %x[%i] : memref<4xi4>
        %s = arith.addi %a, %a : i4
        affine.store %s, %z[%i] : memref<4xi4>
      }
      func.return
    }"""
    x = np.array([7, -8, 3, -3], np.int8)       # i4 unpacked (D-RT-I4)
    args = [Tensor(x, "i4")], [Tensor(np.zeros(4, np.int8), "i4")]
    if backend == "native":
        with pytest.raises(NotSupported, match="native backend does not take this kernel: a "
                                               "memref of i4"):
            run(text, *args)
        return
    (z,) = run(text, *args)
    np.testing.assert_array_equal(z, [-2, 0, 6, -6])


def test_iter_args_reduction():
    text = """func.func @kernel(%x: memref<2x6xf32>, %z: memref<2xf32>) {
      %zero = arith.constant 0.0 : f32
      affine.for %i = 0 to 2 {
        %r = affine.for %k = 0 to 6 iter_args(%acc = %zero) -> (f32) {
          %a = affine.load %x[%i, %k] : memref<2x6xf32>
          %s = arith.addf %acc, %a : f32
          affine.yield %s : f32
        }
        affine.store %r, %z[%i] : memref<2xf32>
      }
      func.return
    }"""
    x = np.random.default_rng(2).uniform(-1, 1, (2, 6)).astype(np.float32)
    (z,) = run(text, [Tensor(x, "f32")], [Tensor(np.zeros(2, np.float32), "f32")])
    want = np.zeros(2, np.float32)
    for k in range(6):
        want = want + x[:, k]                       # sequential f32 sum
    np.testing.assert_array_equal(z, want)


def test_in_and_out_on_the_same_memory_alias():
    # `compute in Y out Y` (the lowering's form for a nest that only writes)
    text = """func.func @kernel(%y: memref<4xf32>, %y2: memref<4xf32>) {
      %one = arith.constant 1.0 : f32
      affine.for %i = 0 to 4 {
        %a = affine.load %y[%i] : memref<4xf32>
        %s = arith.addf %a, %one : f32
        affine.store %s, %y[%i] : memref<4xf32>
      }
      func.return
    }"""
    y = np.arange(4, dtype=np.float32)
    (out,) = run(text, [Tensor(y, "f32")], [Tensor(y, "f32")])
    np.testing.assert_array_equal(out, y + 1)


def test_kernel_parsed_once_per_text():
    x = np.ones((4, 8), np.float32)
    run(FMA, [Tensor(x, "f32")], [Tensor(np.zeros((4, 8), np.float32), "f32")])
    ck = mlir_kernel.compiled(FMA)
    run(FMA, [Tensor(x, "f32")], [Tensor(np.zeros((4, 8), np.float32), "f32")])
    assert mlir_kernel.compiled(FMA) is ck


def test_unsupported_op_is_named():
    # math.erfc: not in xDSL 0.74's math dialect (generic form parses it unregistered)
    text = FMA.replace("%s = arith.addf %p, %a : f32", '%s = "math.erfc"(%p) : (f32) -> f32')
    with pytest.raises(NotSupported, match=r"compute op=mlir.kernel: math.erfc at kernel:6:13 "
                                           r"has no implementation"):
        run(text, [Tensor(np.ones((4, 8), np.float32), "f32")],
            [Tensor(np.zeros((4, 8), np.float32), "f32")])


def test_unregistered_op_is_named():
    text = FMA.replace('%s = arith.addf %p, %a : f32', '%s = "my.op"(%p) : (f32) -> f32')
    with pytest.raises(NotSupported, match="my.op at kernel"):
        run(text, [Tensor(np.ones((4, 8), np.float32), "f32")],
            [Tensor(np.zeros((4, 8), np.float32), "f32")])


def test_signature_mismatch_is_not_supported():
    with pytest.raises(NotSupported, match="argument 0 of @kernel is memref<4x8xf32>"):
        run(FMA, [Tensor(np.ones((4, 4), np.float32), "f32")],
            [Tensor(np.zeros((4, 8), np.float32), "f32")])
    with pytest.raises(NotSupported, match="index_args"):
        run(FMA, [Tensor(np.ones((4, 8), np.float32), "f32")],
            [Tensor(np.zeros((4, 8), np.float32), "f32")], index_args=[3])
    with pytest.raises(NotSupported, match="does not parse"):
        run("func.func @kernel(", [], [])


def test_out_of_bounds_is_an_error():
    text = FMA.replace("affine.for %j = 0 to 8", "affine.for %j = 0 to 9")
    with pytest.raises(NumericError, match=r"outside the memref of shape \[4, 8\]"):
        run(text, [Tensor(np.ones((4, 8), np.float32), "f32")],
            [Tensor(np.zeros((4, 8), np.float32), "f32")])


PROGRAM = """program k:
buffer X : DDR (size=128, align=64)
buffer Z : DDR (size=128, align=64)
c = compute.async in region(X, 0, 128) elem=f32, shape=[4, 8], layout=MN out region(Z, 0, 128) elem=f32, shape=[4, 8], layout=MN op="mlir.kernel" kernel="KERNEL"
wait(c)
"""


def _program(kernel: str) -> str:
    return PROGRAM.replace("KERNEL", " ".join(kernel.split()).replace('"', '\\"'))


def test_engine_runs_a_kernel_task():
    it = NemInterpreter()
    it.load_string(_program(FMA))
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    it.write_tensor("X", x)
    res = it.run()
    assert res.status == "completed" and res.counts.get("compute") == 1
    np.testing.assert_array_equal(it.read_tensor("Z", (4, 8), np.float32), x * x + x)


def test_engine_reports_unsupported_kernel_with_location():
    it = NemInterpreter()
    it.load_string(_program(FMA.replace("%s = arith.addf %p, %a : f32",
                                        '%s = "math.erfc"(%p) : (f32) -> f32')), file="k.nem")
    res = it.run()
    assert res.status == "error"
    msg = str(res.error)
    assert "not supported: compute op=mlir.kernel: math.erfc at kernel:1:" in msg
    assert res.error.rule == "EXEC-03" and res.error.loc.line == 4


SCALAR_OPS = """func.func @kernel(%x: memref<16xf32>, %n: memref<16xi32>, %z: memref<16xf32>, %q: memref<16xi32>) {
  %c3 = arith.constant 3 : i32
  %one = arith.constant 1.0 : f32
  affine.for %i = 0 to 16 {
    %a = affine.load %x[%i] : memref<16xf32>
    %k = affine.load %n[%i] : memref<16xi32>
    %d = arith.divf %one, %a : f32
    %t = math.tanh %d : f32
    %g = arith.negf %t : f32
    %h = math.absf %g : f32
    %kf = arith.sitofp %k : i32 to f32
    %s = arith.addf %h, %kf : f32
    affine.store %s, %z[%i] : memref<16xf32>
    %qd = arith.divsi %k, %c3 : i32
    %qm = arith.maxsi %qd, %c3 : i32
    affine.store %qm, %q[%i] : memref<16xi32>
  }
  func.return
}"""


def test_scalar_ops_xdsl_lacks():
    """divf, negf, tanh, absf, sitofp, divsi (truncating), maxsi run with
    per-op f32 rounding (D-RT-MLIR-KERNEL)."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0.5, 2, 16).astype(np.float32)
    n = rng.integers(-50, 50, 16).astype(np.int32)
    z, q = run(SCALAR_OPS, [Tensor(x, "f32"), Tensor(n, "i32")],
               [Tensor(np.zeros(16, np.float32), "f32"), Tensor(np.zeros(16, np.int32), "i32")])
    f = np.float32
    d = (f(1.0) / x).astype(f)
    t = np.array([f(np.tanh(np.float64(v))) for v in d], f)
    ref = (np.abs(-t) + n.astype(f)).astype(f)
    assert np.array_equal(z, ref)
    trunc = np.trunc(n / 3).astype(np.int32)  # toward zero, unlike Python's //
    assert np.array_equal(q, np.maximum(trunc, 3))


def test_numpy_backed_math_ops():
    """math.cos/floor/... run in f64 and round once to the result type."""
    text = FMA.replace("%s = arith.addf %p, %a : f32", "%c = math.cos %a : f32\n"
                       "      %s = math.floor %c : f32")
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
    (z,) = run(text, [Tensor(x, "f32")], [Tensor(np.zeros((4, 8), np.float32), "f32")])
    ref = np.floor(np.cos(x.astype(np.float64)).astype(np.float32))
    assert np.array_equal(z, ref)


# ---------------------------------------------------------------------------
# The scalar arith/math ops and linalg ops the kernel interpreter adds to
# xDSL's (D-RT-MLIR-KERNEL-OPS): one elementwise kernel per op, compared
# bit-exactly with numpy (or an exact reference where numpy has none).

_MLIR_ELEM = {"f32": "f32", "f16": "f16", "bf16": "bf16", "i8": "i8", "u8": "i8",
              "i16": "i16", "u16": "i16", "i32": "i32", "u32": "i32"}


def elementwise(body, ins, outs):
    """Run `body` once per element of 1-D operands: it sees `%x0, %x1, ...`
    (the elements of `ins`, (array, elem) pairs) and defines `%r0, %r1, ...`,
    stored to `outs`, (elem, dtype) pairs.  Returns the outs' arrays."""
    n = len(ins[0][0])
    mt = [f"memref<{n}x{_MLIR_ELEM[e]}>" for e in [e for _, e in ins] + [e for e, _ in outs]]
    params = [f"%a{k}: {mt[k]}" for k in range(len(ins))] + \
        [f"%z{k}: {mt[len(ins) + k]}" for k in range(len(outs))]
    loads = [f"%x{k} = affine.load %a{k}[%i] : {mt[k]}" for k in range(len(ins))]
    stores = [f"affine.store %r{k}, %z{k}[%i] : {mt[len(ins) + k]}" for k in range(len(outs))]
    text = (f"func.func @kernel({', '.join(params)}) {{\n  affine.for %i = 0 to {n} {{\n    "
            + "\n    ".join(loads + [body.strip()] + stores) + "\n  }\n  func.return\n}")
    res = run(text, [Tensor(np.asarray(a), e) for a, e in ins],
              [Tensor(np.zeros(n, dt), e) for e, dt in outs])
    return res if len(outs) > 1 else res[0]


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


F32_EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 1e-30, -1e-30, 3.0e-39, 88.0, 100.0,
                      1e30, -100.0, np.inf, -np.inf, np.nan, 0.3, -0.7, 7.25], np.float32)


def _f32_inputs(seed=11):
    rng = np.random.default_rng(seed)
    return np.concatenate([F32_EDGES, rng.uniform(-10, 10, 24).astype(np.float32),
                           rng.uniform(0, 2, 12).astype(np.float32)])


@pytest.mark.parametrize("name,ref", [
    ("exp", np.exp), ("exp2", np.exp2), ("expm1", np.expm1), ("log", np.log),
    ("log2", np.log2), ("log10", np.log10), ("log1p", np.log1p), ("sqrt", np.sqrt),
    ("rsqrt", lambda x: 1 / np.sqrt(x)), ("cbrt", np.cbrt), ("floor", np.floor),
    ("ceil", np.ceil), ("trunc", np.trunc), ("roundeven", np.rint),
])
@pytest.mark.parametrize("elem,dt", [("f32", np.float32), ("f16", np.float16)])
def test_float_math_ops(name, ref, elem, dt):
    """Each math op is libm's binary64 value rounded once to the result type;
    IEEE special cases (log(0) = -inf, sqrt(-1) = NaN, exp overflow = inf)
    are values, not errors (xDSL's exp/log/sqrt raise on them)."""
    with np.errstate(over="ignore"):
        x = _f32_inputs().astype(dt)
    z = elementwise(f"%r0 = math.{name} %x0 : {elem}", [(x, elem)], [(elem, dt)])
    with np.errstate(all="ignore"):
        assert_bits(z, ref(x.astype(np.float64)).astype(dt))


def test_math_round_ties_away_from_zero():
    x = np.array([0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, -0.2, -0.0, 8388609.0, np.inf,
                  np.nan], np.float32)
    z = elementwise("%r0 = math.round %x0 : f32", [(x, "f32")], [("f32", np.float32)])
    assert_bits(z, [1, -1, 2, 3, -3, 0, -0.0, -0.0, 8388609.0, np.inf, np.nan])


def _nearest(x: Fraction, dt) -> float:
    """Reference: the value of dtype `dt` nearest to the exact `x`, ties to
    even, found among the neighbours of a first guess (no double rounding)."""
    g = dt(float(x))
    cands = {float(g), float(np.nextafter(g, dt(np.inf))), float(np.nextafter(g, dt(-np.inf)))}

    def key(c):
        even = int(np.array(c, dt).view(f"u{np.dtype(dt).itemsize}")) % 2 == 0
        return (abs(Fraction(c) - x), not even)
    return min((c for c in cands if np.isfinite(c)), key=key)


def test_fma_rounds_once():
    """math.fma is a * b + c rounded once.  The first element is a case where
    rounding to f64 first and then to f32 gives the wrong f32 (a tie)."""
    a = np.array([3 * 2.0 ** -24 * (1 + 2.0 ** -18)], np.float32)
    b = np.array([1 - 2.0 ** -18], np.float32)
    c = np.array([1.0], np.float32)
    rng = np.random.default_rng(12)
    a, b, c = (np.concatenate([v, rng.uniform(-4, 4, 31).astype(np.float32)]) for v in (a, b, c))
    z = elementwise("%r0 = math.fma %x0, %x1, %x2 : f32",
                    [(a, "f32"), (b, "f32"), (c, "f32")], [("f32", np.float32)])
    want = [_nearest(Fraction(float(p)) * Fraction(float(q)) + Fraction(float(r)), np.float32)
            for p, q, r in zip(a, b, c)]
    assert_bits(z, np.array(want, np.float32))
    assert z[0] == np.float32(1 + 2.0 ** -23)
    assert np.float32(np.float64(a[0]) * np.float64(b[0]) + 1.0) != z[0]   # the double rounding


def test_fma_f64_and_special_values():
    # f64: 1 - 2^-60 is not a double, so (a * b) + c would give 0
    body = """%a = arith.constant 1.0000000009313226 : f64
    %b = arith.constant 0.9999999990686774 : f64
    %m = arith.constant -1.0 : f64
    %f = math.fma %a, %b, %m : f64
    %r0 = arith.truncf %f : f64 to f32"""
    z = elementwise(body, [(np.zeros(1, np.float32), "f32")], [("f32", np.float32)])
    assert z[0] == np.float32(-(2.0 ** -60))
    inf, nan = np.inf, np.nan
    a = np.array([inf, 0.0, 2.0, -0.0, 1.0, nan], np.float32)
    b = np.array([0.0, 5.0, 3.0, 1.0, 1.0, 1.0], np.float32)
    c = np.array([1.0, -0.0, -inf, -0.0, -1.0, 1.0], np.float32)
    z = elementwise("%r0 = math.fma %x0, %x1, %x2 : f32",
                    [(a, "f32"), (b, "f32"), (c, "f32")], [("f32", np.float32)])
    assert_bits(z, [nan, 0.0, -inf, -0.0, 0.0, nan])


def test_bf16_results_round_once():
    """A bf16 result is the exact value rounded once (ml_dtypes' float64 ->
    bf16 conversion rounds through f32, which can hit a false tie)."""
    x = np.array([1 + 2.0 ** -8], np.float32)       # f64 1 + 2^-8 + 2^-30 -> bf16 1 + 2^-7
    body = """%e = arith.extf %x0 : f32 to f64
    %t = arith.constant 9.3132257461547852e-10 : f64
    %s = arith.addf %e, %t : f64
    %r0 = arith.truncf %s : f64 to bf16"""
    z = elementwise(body, [(x, "f32")], [("bf16", ml_dtypes.bfloat16)])
    assert float(z[0]) == 1 + 2.0 ** -7
    n = np.array([2 ** 24 + 2 ** 16 + 1, -(2 ** 24 + 2 ** 16 + 1), 3], np.int32)
    z = elementwise("%r0 = arith.sitofp %x0 : i32 to bf16", [(n, "i32")],
                    [("bf16", ml_dtypes.bfloat16)])
    assert [float(v) for v in z] == [2 ** 24 + 2 ** 17, -(2 ** 24 + 2 ** 17), 3]


def test_float_min_max_nan_and_signed_zero():
    """maximumf/minimumf propagate NaN and order -0 < +0; maxnumf/minnumf
    return the non-NaN operand."""
    nan = np.nan
    a = np.array([nan, 1.0, -0.0, 0.0, 2.0, -3.0, nan], np.float32)
    b = np.array([1.0, nan, 0.0, -0.0, -5.0, 4.0, nan], np.float32)
    body = """%r0 = arith.maximumf %x0, %x1 : f32
    %r1 = arith.minimumf %x0, %x1 : f32
    %r2 = arith.maxnumf %x0, %x1 : f32
    %r3 = arith.minnumf %x0, %x1 : f32"""
    mx, mn, fmx, fmn = elementwise(body, [(a, "f32"), (b, "f32")], [("f32", np.float32)] * 4)
    assert_bits(mx, [nan, nan, 0.0, 0.0, 2.0, 4.0, nan])
    assert_bits(mn, [nan, nan, -0.0, -0.0, -5.0, -3.0, nan])
    assert_bits(fmx[[0, 1, 4, 5, 6]], [1.0, 1.0, 2.0, 4.0, nan])
    assert_bits(fmn[[0, 1, 4, 5, 6]], [1.0, 1.0, -5.0, -3.0, nan])
    assert fmx[2] == 0 and fmn[3] == 0                 # +-0: either zero (unspecified)


@pytest.mark.parametrize("name,ref", [
    ("math.copysign", np.copysign), ("math.atan2", np.arctan2), ("math.powf", np.power),
    ("arith.divf", np.divide), ("arith.subf", np.subtract),
])
def test_float_binary_ops(name, ref):
    x = _f32_inputs(13)
    y = np.roll(_f32_inputs(14), 5)
    z = elementwise(f"%r0 = {name} %x0, %x1 : f32", [(x, "f32"), (y, "f32")],
                    [("f32", np.float32)])
    with np.errstate(all="ignore"):
        assert_bits(z, ref(x.astype(np.float64), y.astype(np.float64)).astype(np.float32))


def test_fpowi():
    x = np.array([2.0, -2.0, 0.5, 0.0, -0.0, 3.0, np.nan, 10.0], np.float32)
    n = np.array([3, 3, -2, -1, -3, 0, 0, 40], np.int32)
    z = elementwise("%r0 = math.fpowi %x0, %x1 : f32, i32", [(x, "f32"), (n, "i32")],
                    [("f32", np.float32)])
    with np.errstate(all="ignore"):
        assert_bits(z, np.power(x.astype(np.float64), n.astype(np.float64)).astype(np.float32))


I8_EDGES = np.array([-128, -127, -100, -7, -1, 0, 1, 2, 3, 7, 100, 127], np.int8)
A8, B8 = (v.ravel() for v in np.meshgrid(I8_EDGES, I8_EDGES))


def _wrap8(v):
    return np.asarray(v, np.int64).astype(np.int8)


def _u(v):
    return np.asarray(v).astype(np.int8).view(np.uint8).astype(np.int64)


def _s(v):
    return np.asarray(v).astype(np.int64)


@pytest.mark.parametrize("name,ref,nonzero_b", [
    ("maxsi", lambda a, b: np.maximum(_s(a), _s(b)), False),
    ("minsi", lambda a, b: np.minimum(_s(a), _s(b)), False),
    ("maxui", lambda a, b: np.maximum(_u(a), _u(b)), False),
    ("minui", lambda a, b: np.minimum(_u(a), _u(b)), False),
    ("divsi", lambda a, b: np.fix(_s(a) / _s(b)), True),
    ("remsi", lambda a, b: np.fmod(_s(a), _s(b)), True),
    ("floordivsi", lambda a, b: np.floor_divide(_s(a), _s(b)), True),
    ("ceildivsi", lambda a, b: -np.floor_divide(-_s(a), _s(b)), True),
    ("divui", lambda a, b: np.floor_divide(_u(a), _u(b)), True),
    ("remui", lambda a, b: np.remainder(_u(a), _u(b)), True),
    ("ceildivui", lambda a, b: -np.floor_divide(-_u(a), _u(b)), True),
])
@pytest.mark.parametrize("elem", ["i8", "u8"])
def test_integer_binary_ops(name, ref, nonzero_b, elem):
    """Operands are read signed or unsigned at their width, whatever the
    memref's region holds (a u8 region is a signless i8 memref)."""
    keep = (B8 != 0) & ~((A8 == -128) & (B8 == -1)) if nonzero_b else np.ones(A8.shape, bool)
    a, b = A8[keep], B8[keep]
    dt = np.uint8 if elem == "u8" else np.int8
    z = elementwise(f"%r0 = arith.{name} %x0, %x1 : i8", [(a.view(dt), elem), (b.view(dt), elem)],
                    [(elem, dt)])
    np.testing.assert_array_equal(z.view(np.int8), _wrap8(ref(a, b)))


@pytest.mark.parametrize("name,ref", [
    ("shli", lambda a, b: _s(a) << b), ("shrsi", lambda a, b: _s(a) >> b),
    ("shrui", lambda a, b: _u(a) >> b),
])
def test_shifts(name, ref):
    a = np.repeat(I8_EDGES, 8)
    b = np.tile(np.arange(8, dtype=np.int8), len(I8_EDGES))
    z = elementwise(f"%r0 = arith.{name} %x0, %x1 : i8", [(a, "i8"), (b, "i8")], [("i8", np.int8)])
    np.testing.assert_array_equal(z, _wrap8(ref(a, b.astype(np.int64))))


def test_extended_integer_ops():
    """addui_extended (sum, carry), mulsi_extended / mului_extended (low, high)."""
    body = """%r0, %c = arith.addui_extended %x0, %x1 : i8, i1
    %r1 = arith.extui %c : i1 to i8
    %r2, %r3 = arith.mulsi_extended %x0, %x1 : i8
    %r4, %r5 = arith.mului_extended %x0, %x1 : i8"""
    outs = elementwise(body, [(A8, "i8"), (B8, "i8")], [("i8", np.int8)] * 6)
    s, ps, pu = _u(A8) + _u(B8), _s(A8) * _s(B8), _u(A8) * _u(B8)
    for got, want in zip(outs, [s, s >> 8, ps, ps >> 8, pu, pu >> 8]):
        np.testing.assert_array_equal(got, _wrap8(want))


def test_ipowi():
    a = np.array([3, -3, 2, 2, 0, 1, -1, -1, 2, -2, 5, 7], np.int8)
    b = np.array([4, 3, 7, 8, 0, -5, -2, -3, -1, -1, 0, 100], np.int8)
    z = elementwise("%r0 = math.ipowi %x0, %x1 : i8", [(a, "i8"), (b, "i8")], [("i8", np.int8)])
    pos = np.array([pow(int(p), int(q), 256) for p, q in zip(a, b) if q >= 0])
    np.testing.assert_array_equal(z[b >= 0], _wrap8(pos))
    np.testing.assert_array_equal(z[b < 0], [1, 1, -1, 0, 0])   # 1 / a^-b, truncated


@pytest.mark.parametrize("name,ref", [
    ("absi", lambda a: np.abs(_s(a))),
    ("ctlz", lambda a: [8 - int(v).bit_length() for v in _u(a)]),
    ("cttz", lambda a: [(int(v) & -int(v)).bit_length() - 1 if v else 8 for v in _u(a)]),
    ("ctpop", lambda a: np.bitwise_count(_u(a))),
])
def test_integer_math_ops(name, ref):
    z = elementwise(f"%r0 = math.{name} %x0 : i8", [(I8_EDGES, "i8")], [("i8", np.int8)])
    np.testing.assert_array_equal(z, _wrap8(ref(I8_EDGES)))
    assert name != "absi" or z[0] == -128               # |MIN| wraps


def test_integer_casts():
    x = I8_EDGES
    body = """%r0 = arith.extsi %x0 : i8 to i32
    %r1 = arith.extui %x0 : i8 to i32
    %w = arith.muli %r0, %r0 : i32
    %r2 = arith.trunci %w : i32 to i8
    %ix = arith.index_cast %x0 : i8 to index
    %r3 = arith.index_cast %ix : index to i32
    %r4 = arith.sitofp %x0 : i8 to f32
    %r5 = arith.uitofp %x0 : i8 to f32
    %t = arith.constant true
    %r6 = arith.extsi %t : i1 to i32"""
    outs = elementwise(body, [(x, "u8")], [("i32", np.int32), ("i32", np.int32), ("i8", np.int8),
                                          ("i32", np.int32), ("f32", np.float32),
                                          ("f32", np.float32), ("i32", np.int32)])
    x8 = x.astype(np.int64)
    np.testing.assert_array_equal(outs[0], x8)
    np.testing.assert_array_equal(outs[1], _u(x))
    np.testing.assert_array_equal(outs[2], _wrap8(x8 * x8))
    np.testing.assert_array_equal(outs[3], x8)
    assert_bits(outs[4], x8.astype(np.float32))
    assert_bits(outs[5], _u(x).astype(np.float32))
    assert (outs[6] == -1).all()


def test_int_to_float_rounds_to_nearest_even():
    n = np.array([2 ** 24 + 1, 2 ** 24 + 3, -(2 ** 31), 2 ** 31 - 1, 16777217, 33554435], np.int32)
    z, u = elementwise("%r0 = arith.sitofp %x0 : i32 to f32\n    %r1 = arith.uitofp %x0 : i32 to f32",
                       [(n, "i32")], [("f32", np.float32), ("f32", np.float32)])
    assert_bits(z, n.astype(np.float32))
    assert_bits(u, n.view(np.uint32).astype(np.float32))


def test_float_to_int_truncates():
    x = np.array([1.9, -1.9, -0.5, 127.9, -128.9, 0.0, 255.5, 3.0], np.float32)
    si = elementwise("%r0 = arith.fptosi %x0 : f32 to i8", [(x[:6], "f32")], [("i8", np.int8)])
    np.testing.assert_array_equal(si, [1, -1, 0, 127, -128, 0])
    ui = elementwise("%r0 = arith.fptoui %x0 : f32 to i8", [(x[5:], "f32")], [("u8", np.uint8)])
    np.testing.assert_array_equal(ui, [0, 255, 3])


def test_bitcast():
    x = _f32_inputs(15)
    body = """%r0 = arith.bitcast %x0 : f32 to i32
    %r1 = arith.bitcast %r0 : i32 to f32"""
    i, f = elementwise(body, [(x, "f32")], [("i32", np.int32), ("f32", np.float32)])
    np.testing.assert_array_equal(i, x.view(np.int32))
    assert_bits(f, x)
    h = np.array([1.5, -2.0, 0.0, -0.0, np.inf, 3.140625], ml_dtypes.bfloat16)
    body = """%r0 = arith.bitcast %x0 : bf16 to i16
    %r1 = arith.bitcast %r0 : i16 to f16"""
    i, f = elementwise(body, [(h, "bf16")], [("i16", np.int16), ("f16", np.float16)])
    np.testing.assert_array_equal(i, h.view(np.int16))
    assert_bits(f, h.view(np.float16))


def test_select_and_cmpf_predicates():
    nan = np.nan
    a = np.array([1.0, 2.0, nan, 3.0, -0.0], np.float32)
    b = np.array([2.0, 2.0, 1.0, nan, 0.0], np.float32)
    preds = ["olt", "oeq", "ult", "une", "ord", "uno", "oge", "ugt"]
    ref = [a < b, a == b, ~(a >= b), ~(a == b), ~(np.isnan(a) | np.isnan(b)),
           np.isnan(a) | np.isnan(b), a >= b, ~(a <= b)]
    lines = []
    for k, p in enumerate(preds):
        lines += [f"%c{k} = arith.cmpf {p}, %x0, %x1 : f32",
                  f"%r{k} = arith.select %c{k}, %x0, %x1 : f32"]
    outs = elementwise("\n    ".join(lines), [(a, "f32"), (b, "f32")],
                       [("f32", np.float32)] * len(preds))
    for got, want in zip(outs, ref):
        assert_bits(got, np.where(want, a, b))


@pytest.mark.parametrize("body,inputs,match", [
    ("%r0 = arith.divsi %x0, %x1 : i8", [[5, 1], [0, 1]], "integer division by zero"),
    ("%r0 = arith.remui %x0, %x1 : i8", [[5], [0]], "integer division by zero"),
    ("%r0 = arith.divsi %x0, %x1 : i8", [[-128], [-1]], r"signed division overflow \(-128 / -1"),
    ("%r0 = arith.shli %x0, %x1 : i8", [[1], [8]], "shift by 8 of an i8 value"),
    ("%r0 = math.ipowi %x0, %x1 : i8", [[0], [-2]], "ipowi of 0 to a negative power"),
])
def test_undefined_integer_results_are_errors(body, inputs, match):
    with pytest.raises(NumericError, match=match):
        elementwise(body, [(np.array(v, np.int8), "i8") for v in inputs], [("i8", np.int8)])


@pytest.mark.parametrize("x", [np.nan, np.inf, 128.0, -129.0])
def test_fptosi_out_of_range_is_an_error(x):
    with pytest.raises(NumericError, match=r"arith.fptosi of .* to i8 \(undefined"):
        elementwise("%r0 = arith.fptosi %x0 : f32 to i8", [(np.array([x], np.float32), "f32")],
                    [("i8", np.int8)])


LINALG = """func.func @kernel(%a: memref<4x8xf32>, %b: memref<8x3xf32>, %c: memref<4x3xf32>, %s: memref<4x8xf32>, %t: memref<8x4xf32>) {
  %half = arith.constant 0.5 : f32
  linalg.fill ins(%half : f32) outs(%c : memref<4x3xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x3xf32>) outs(%c : memref<4x3xf32>)
  linalg.copy ins(%a : memref<4x8xf32>) outs(%s : memref<4x8xf32>)
  linalg.mul ins(%s, %a : memref<4x8xf32>, memref<4x8xf32>) outs(%s : memref<4x8xf32>)
  linalg.sub ins(%s, %a : memref<4x8xf32>, memref<4x8xf32>) outs(%s : memref<4x8xf32>)
  linalg.max ins(%s, %a : memref<4x8xf32>, memref<4x8xf32>) outs(%s : memref<4x8xf32>)
  linalg.transpose ins(%a : memref<4x8xf32>) outs(%t : memref<8x4xf32>) permutation = [1, 0]
  func.return
}"""


def test_linalg_named_ops():
    """fill, matmul (sequential f32 accumulation over k into the output, each
    op rounded), copy, mul, sub, max (NaN-propagating), transpose."""
    rng = np.random.default_rng(16)
    a = rng.uniform(-1, 1, (4, 8)).astype(np.float32)
    a[1, 2] = np.nan
    b = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    c, s, t = run(LINALG, [Tensor(a, "f32"), Tensor(b, "f32")],
                  [Tensor(np.zeros((4, 3), np.float32), "f32"),
                   Tensor(np.zeros((4, 8), np.float32), "f32"),
                   Tensor(np.zeros((8, 4), np.float32), "f32")])
    want = np.full((4, 3), 0.5, np.float32)
    for k in range(8):
        want = want + a[:, k:k + 1] * b[k:k + 1, :]    # f32: rounded after * and +
    assert_bits(c, want)
    assert_bits(s, np.maximum(a * a - a, a))
    assert_bits(t, a.T)


def test_linalg_conv_accumulates_in_loop_order():
    text = """func.func @kernel(%x: memref<1x2x6x6xf32>, %w: memref<3x2x3x3xf32>, %y: memref<1x3x2x2xf32>) {
      linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%x, %w : memref<1x2x6x6xf32>, memref<3x2x3x3xf32>) outs(%y : memref<1x3x2x2xf32>)
      func.return
    }"""
    rng = np.random.default_rng(17)
    x = rng.uniform(-1, 1, (1, 2, 6, 6)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32)
    y0 = rng.uniform(-1, 1, (1, 3, 2, 2)).astype(np.float32)
    (y,) = run(text, [Tensor(x, "f32"), Tensor(w, "f32")], [Tensor(y0, "f32")])
    want = y0.copy()
    for c in range(2):                                 # loops (n, f, oh, ow, c, kh, kw)
        for kh in range(3):
            for kw in range(3):
                want = want + x[:, None, c, kh:kh + 4:2, kw:kw + 4:2] * w[None, :, c, kh, kw,
                                                                          None, None]
    assert_bits(y, want)


def test_linalg_pooling_custom_form_is_not_supported():
    """xDSL builds max(input, window) as the body of a pooling op's custom
    form; MLIR's is max(output, input), so it is refused, not run."""
    text = """func.func @kernel(%x: memref<1x1x4x4xf32>, %win: memref<2x2xf32>, %p: memref<1x1x2x2xf32>) {
      linalg.pooling_nchw_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%x, %win : memref<1x1x4x4xf32>, memref<2x2xf32>) outs(%p : memref<1x1x2x2xf32>)
      func.return
    }"""
    with pytest.raises(NotSupported, match="linalg.pooling_nchw_max at kernel:2:7 has a body "
                                           "that ignores the output"):
        run(text, [Tensor(np.zeros((1, 1, 4, 4), np.float32), "f32"),
                   Tensor(np.zeros((2, 2), np.float32), "f32")],
            [Tensor(np.zeros((1, 1, 2, 2), np.float32), "f32")])


def test_linalg_pooling_generic_form_runs():
    """The generic form (as MLIR prints it) carries MLIR's body: it runs."""
    text = """func.func @kernel(%x: memref<1x2x5x5xf32>, %win: memref<2x2xf32>, %p: memref<1x2x2x2xf32>) {
      "linalg.pooling_nchw_max"(%x, %win, %p) <{dilations = dense<1> : tensor<2xi64>, operandSegmentSizes = array<i32: 2, 1>, strides = dense<2> : tensor<2xi64>}> ({
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %m = "arith.maximumf"(%out, %in) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
        "linalg.yield"(%m) : (f32) -> ()
      }) : (memref<1x2x5x5xf32>, memref<2x2xf32>, memref<1x2x2x2xf32>) -> ()
      func.return
    }"""
    x = np.random.default_rng(18).uniform(-1, 1, (1, 2, 5, 5)).astype(np.float32)
    p0 = np.full((1, 2, 2, 2), -np.inf, np.float32)
    (p,) = run(text, [Tensor(x, "f32"), Tensor(np.zeros((2, 2), np.float32), "f32")],
               [Tensor(p0, "f32")])
    want = p0
    for kh in range(2):
        for kw in range(2):
            want = np.maximum(want, x[:, :, kh:kh + 4:2, kw:kw + 4:2])
    assert_bits(p, want)


def test_linalg_mixed_types_and_unimplemented_ops_are_not_supported():
    mixed = """func.func @kernel(%a: memref<2x2xbf16>, %c: memref<2x2xf32>) {
      linalg.matmul ins(%a, %a : memref<2x2xbf16>, memref<2x2xbf16>) outs(%c : memref<2x2xf32>)
      func.return
    }"""
    with pytest.raises(NotSupported, match="linalg.matmul at kernel:2:7 yields bf16 into a memref "
                                           "of f32"):
        run(mixed, [Tensor(np.zeros((2, 2), ml_dtypes.bfloat16), "bf16")],
            [Tensor(np.zeros((2, 2), np.float32), "f32")])
    index = """func.func @kernel(%a: memref<4xi32>, %c: memref<4xi32>) {
      linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%c : memref<4xi32>) {
      ^bb0(%out: i32):
        %i = linalg.index 0 : index
        %v = arith.index_cast %i : index to i32
        linalg.yield %v : i32
      }
      func.return
    }"""
    with pytest.raises(NotSupported, match="linalg.index at kernel:4:14 has no implementation"):
        run(index, [Tensor(np.zeros(4, np.int32), "i32")], [Tensor(np.zeros(4, np.int32), "i32")])


def test_affine_if_with_dims_symbols_and_else():
    """affine.if: `i - 2 >= 0` on a dim and `s0 - j - 1 >= 0` on a symbol,
    with an else region; an if without else that yields nothing."""
    text = """func.func @kernel(%x: memref<4x6xf32>, %z: memref<4x6xf32>, %n: index) {
      affine.for %i = 0 to 4 {
        affine.for %j = 0 to 6 {
          %a = affine.load %x[%i, %j] : memref<4x6xf32>
          %r = affine.if affine_set<(d0, d1)[s0] : (d0 - 2 >= 0, s0 - d1 - 1 >= 0)>(%i, %j)[%n] -> f32 {
            affine.yield %a : f32
          } else {
            %m = arith.negf %a : f32
            affine.yield %m : f32
          }
          affine.store %r, %z[%i, %j] : memref<4x6xf32>
          affine.if affine_set<(d0, d1) : (d0 == 0, d1 == 0)>(%i, %j) {
            %c = arith.constant 42.0 : f32
            affine.store %c, %z[%i, %j] : memref<4x6xf32>
          }
        }
      }
      func.return
    }"""
    x = np.arange(24, dtype=np.float32).reshape(4, 6) + 1
    (z,) = run(text, [Tensor(x, "f32")], [Tensor(np.zeros((4, 6), np.float32), "f32")],
               index_args=[3])
    i, j = np.indices((4, 6))
    want = np.where((i >= 2) & (j <= 2), x, -x)
    want[0, 0] = 42.0
    np.testing.assert_array_equal(z, want)


# ---------------------------------------------------------------------------
# linalg.reduce/broadcast, affine.parallel, scf.parallel (D-RT-MLIR-KERNEL-OPS).
# A reduction combines in sequential order (the reference runtime's
# exactness contract), so the float references below are computed in that
# order, in f32, and compared bit for bit.  xDSL 0.74 parses affine.parallel,
# scf.parallel and scf.reduce only in the generic form (as upstream
# `mlir-opt --mlir-print-op-generic` prints them).

REDUCE = """func.func @kernel(%x: memref<3x4x5xf32>, %n: memref<4x6xi8>, %s: memref<4xf32>, %d: memref<4xi8>) {
  linalg.reduce ins(%x : memref<3x4x5xf32>) outs(%s : memref<4xf32>) dimensions = [0, 2]
    (%in: f32, %init: f32) {
      %p = arith.mulf %in, %in : f32
      %r = arith.addf %p, %init : f32
      linalg.yield %r : f32
    }
  linalg.reduce ins(%n : memref<4x6xi8>) outs(%d : memref<4xi8>) dimensions = [1]
    (%in: i8, %init: i8) {
      %r = arith.subi %in, %init : i8
      linalg.yield %r : i8
    }
  func.return
}"""


def test_linalg_reduce_combines_in_sequential_order():
    """Starting from the init's element, the reduced dimensions in increasing
    order (0 outermost, then 2), the body's (%in, %init) bound in that
    order: `in - init` in i8 checks the order of the operands too."""
    rng = np.random.default_rng(19)
    x = rng.uniform(-2, 2, (3, 4, 5)).astype(np.float32)
    s0 = rng.uniform(-1, 1, 4).astype(np.float32)
    n = rng.integers(-128, 128, (4, 6)).astype(np.int8)
    d0 = np.array([5, -7, 100, -128], np.int8)
    s, d = run(REDUCE, [Tensor(x, "f32"), Tensor(n, "i8")], [Tensor(s0, "f32"), Tensor(d0, "i8")])
    want = s0.copy()
    for i in range(3):
        for k in range(5):
            want = x[i, :, k] * x[i, :, k] + want        # f32: rounded after * and +
    assert_bits(s, want)
    acc = d0.astype(np.int64)
    for k in range(6):
        acc = n[:, k] - acc
    np.testing.assert_array_equal(d, _wrap8(acc))


def test_linalg_broadcast_adds_dimensions():
    """`dimensions` are the init's added dimensions: a middle one, and the
    first and last around a vector."""
    text = """func.func @kernel(%a: memref<3x5xf32>, %v: memref<4xi16>, %b: memref<3x7x5xf32>, %w: memref<2x4x3xi16>) {
      linalg.broadcast ins(%a : memref<3x5xf32>) outs(%b : memref<3x7x5xf32>) dimensions = [1]
      linalg.broadcast ins(%v : memref<4xi16>) outs(%w : memref<2x4x3xi16>) dimensions = [0, 2]
      func.return
    }"""
    a = np.random.default_rng(20).uniform(-1, 1, (3, 5)).astype(np.float32)
    v = np.array([-32768, -1, 7, 32767], np.int16)
    b, w = run(text, [Tensor(a, "f32"), Tensor(v, "i16")],
               [Tensor(np.zeros((3, 7, 5), np.float32), "f32"),
                Tensor(np.zeros((2, 4, 3), np.int16), "i16")])
    assert_bits(b, np.broadcast_to(a[:, None, :], (3, 7, 5)))
    np.testing.assert_array_equal(w, np.broadcast_to(v[None, :, None], (2, 4, 3)))


# (i, j) = (0, max(0, n - 5)) to (6, min(8, n)) step (2, 3) reduce ("addf",
# "maximumf"), storing x * x at each point
AFFINE_PARALLEL = """func.func @kernel(%x: memref<6x8xf32>, %z: memref<6x8xf32>, %o: memref<2xf32>, %n: index) {
  %r:2 = "affine.parallel"(%n, %n) <{lowerBoundsGroups = dense<[1, 2]> : tensor<2xi32>, lowerBoundsMap = affine_map<()[s0] -> (0, 0, s0 - 5)>, reductions = [0, 4], steps = [2, 3], upperBoundsGroups = dense<[1, 2]> : tensor<2xi32>, upperBoundsMap = affine_map<()[s0] -> (6, 8, s0)>}> ({
  ^bb0(%i: index, %j: index):
    %a = affine.load %x[%i, %j] : memref<6x8xf32>
    %m = arith.mulf %a, %a : f32
    affine.store %m, %z[%i, %j] : memref<6x8xf32>
    "affine.yield"(%a, %a) : (f32, f32) -> ()
  }) : (index, index) -> (f32, f32)
  affine.store %r#0, %o[0] : memref<2xf32>
  affine.store %r#1, %o[1] : memref<2xf32>
  func.return
}"""


@pytest.mark.parametrize("n", [7, 3, 0])
def test_affine_parallel_reduce_addf_in_sequential_order(n):
    """Bounds are the max/min of each bound group, with steps; the sums start
    from the identity -lower-affine materializes (+0.0 for addf, -inf for
    maximumf: the result of an empty space, n = 0) and add the yielded values
    in sequential iteration order (i outer)."""
    x = np.random.default_rng(21).uniform(-1, 1, (6, 8)).astype(np.float32)
    z0 = np.full((6, 8), -1, np.float32)
    z, o = run(AFFINE_PARALLEL, [Tensor(x, "f32")],
               [Tensor(z0, "f32"), Tensor(np.zeros(2, np.float32), "f32")], index_args=[n])
    want_z, acc, mx = z0.copy(), np.float32(0.0), np.float32(-np.inf)
    for i in range(0, 6, 2):
        for j in range(max(0, n - 5), min(8, n), 3):
            want_z[i, j] = x[i, j] * x[i, j]
            acc, mx = acc + x[i, j], max(mx, x[i, j])
    assert_bits(z, want_z)
    assert_bits(o, np.array([acc, mx], np.float32))


@pytest.mark.parametrize("reductions", ["[1, 13, 2, 14]", '["addi", "muli", "andi", "ori"]'])
def test_affine_parallel_integer_reductions_wrap(reductions):
    """addi, muli, andi, ori in i8 (wrapping as the arith ops), the kinds
    written as upstream's AtomicRMWKind numbers or as xDSL's strings."""
    text = """func.func @kernel(%x: memref<5x3xi8>, %o: memref<4xi8>) {
      %r:4 = "affine.parallel"() <{lowerBoundsGroups = dense<1> : tensor<2xi32>, lowerBoundsMap = affine_map<() -> (0, 0)>, reductions = KINDS, steps = [1, 1], upperBoundsGroups = dense<1> : tensor<2xi32>, upperBoundsMap = affine_map<() -> (5, 3)>}> ({
      ^bb0(%i: index, %j: index):
        %a = affine.load %x[%i, %j] : memref<5x3xi8>
        "affine.yield"(%a, %a, %a, %a) : (i8, i8, i8, i8) -> ()
      }) : () -> (i8, i8, i8, i8)
      affine.store %r#0, %o[0] : memref<4xi8>
      affine.store %r#1, %o[1] : memref<4xi8>
      affine.store %r#2, %o[2] : memref<4xi8>
      affine.store %r#3, %o[3] : memref<4xi8>
      func.return
    }""".replace("KINDS", reductions)
    x = np.array([[100, 99, 3], [-7, 127, -128], [5, 6, -1], [9, 11, 13], [-3, 77, 15]], np.int8)
    (o,) = run(text, [Tensor(x, "i8")], [Tensor(np.zeros(4, np.int8), "i8")])
    v = [int(e) for e in x.ravel()]
    prod, all_and, any_or = 1, -1, 0
    for e in v:
        prod, all_and, any_or = prod * e, all_and & e, any_or | e
    np.testing.assert_array_equal(o, _wrap8([sum(v), prod, all_and, any_or]))


SCF_PARALLEL = """func.func @kernel(%x: memref<6x8xf32>, %k: memref<6x8xi32>, %z: memref<6x8xf32>, %o: memref<1xf32>, %h: memref<1xi32>, %lo: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %c8 = arith.constant 8 : index
  %init = arith.constant 0.25 : f32
  %seed = arith.constant 7 : i32
  %three = arith.constant 3 : i32
  %r:2 = "scf.parallel"(%lo, %c1, %c6, %c8, %c2, %c2, %init, %seed) <{operandSegmentSizes = array<i32: 2, 2, 2, 2>}> ({
  ^bb0(%i: index, %j: index):
    %a = memref.load %x[%i, %j] : memref<6x8xf32>
    %b = memref.load %k[%i, %j] : memref<6x8xi32>
    %m = arith.negf %a : f32
    memref.store %m, %z[%i, %j] : memref<6x8xf32>
    "scf.reduce"(%a, %b) ({
    ^bb0(%acc: f32, %v: f32):
      %s = arith.addf %acc, %v : f32
      "scf.reduce.return"(%s) : (f32) -> ()
    }, {
    ^bb0(%acc: i32, %v: i32):
      %t = arith.muli %acc, %three : i32
      %s = arith.addi %t, %v : i32
      "scf.reduce.return"(%s) : (i32) -> ()
    }) : (f32, i32) -> ()
  }) : (index, index, index, index, index, index, f32, i32) -> (f32, i32)
  memref.store %r#0, %o[%c0] : memref<1xf32>
  memref.store %r#1, %h[%c0] : memref<1xi32>
  func.return
}"""


def test_scf_parallel_reduce_in_sequential_order():
    """Each reduction starts from its init value and its scf.reduce region
    combines (accumulator, value) in sequential iteration order (i outer):
    a float sum, and `acc * 3 + v` in i32 (wrapping), which encodes both
    the order of the points and of the region's operands."""
    rng = np.random.default_rng(22)
    x = rng.uniform(-1, 1, (6, 8)).astype(np.float32)
    k = rng.integers(-1000, 1000, (6, 8)).astype(np.int32)
    z0 = np.zeros((6, 8), np.float32)
    z, o, h = run(SCF_PARALLEL, [Tensor(x, "f32"), Tensor(k, "i32")],
                  [Tensor(z0, "f32"), Tensor(np.zeros(1, np.float32), "f32"),
                   Tensor(np.zeros(1, np.int32), "i32")], index_args=[1])
    want_z, acc, hsh = z0.copy(), np.float32(0.25), 7
    for i in range(1, 6, 2):
        for j in range(1, 8, 2):
            want_z[i, j] = -x[i, j]
            acc, hsh = acc + x[i, j], hsh * 3 + int(k[i, j])
    assert_bits(z, want_z)
    assert_bits(o, [acc])
    np.testing.assert_array_equal(h, np.array([hsh]).astype(np.int32))


def test_scf_parallel_non_positive_step_is_an_error():
    with pytest.raises(NumericError, match="parallel loop step of 0"):
        run(SCF_PARALLEL.replace("%c2, %c2, %init", "%c2, %c0, %init"),
            [Tensor(np.zeros((6, 8), np.float32), "f32"), Tensor(np.zeros((6, 8), np.int32), "i32")],
            [Tensor(np.zeros((6, 8), np.float32), "f32"), Tensor(np.zeros(1, np.float32), "f32"),
             Tensor(np.zeros(1, np.int32), "i32")], index_args=[0])


@pytest.mark.parametrize("text,match", [
    # upstream's variadic form: two inputs and two inits
    ("""func.func @kernel(%a: memref<3x2xf32>, %b: memref<3x2xf32>, %c: memref<3xf32>, %d: memref<3xf32>) {
      "linalg.reduce"(%a, %b, %c, %d) <{dimensions = array<i64: 1>}> ({
      ^bb0(%x: f32, %y: f32, %s: f32, %t: f32):
        %0 = arith.addf %x, %s : f32
        %1 = arith.addf %y, %t : f32
        "linalg.yield"(%0, %1) : (f32, f32) -> ()
      }) : (memref<3x2xf32>, memref<3x2xf32>, memref<3xf32>, memref<3xf32>) -> ()
      func.return
    }""", r"linalg.reduce at kernel:2:8 is supported only with one input and one init \(it has 4"),
    # a reduction kind -lower-affine does not lower ("assign")
    ("""func.func @kernel(%a: memref<3x2xf32>, %b: memref<3x2xf32>, %c: memref<3xf32>, %d: memref<3xf32>) {
      %r = "affine.parallel"() <{lowerBoundsGroups = dense<1> : tensor<1xi32>, lowerBoundsMap = affine_map<() -> (0)>, reductions = [3], steps = [1], upperBoundsGroups = dense<1> : tensor<1xi32>, upperBoundsMap = affine_map<() -> (3)>}> ({
      ^bb0(%i: index):
        %v = affine.load %a[%i, 0] : memref<3x2xf32>
        "affine.yield"(%v) : (f32) -> ()
      }) : () -> f32
      affine.store %r, %c[0] : memref<3xf32>
      func.return
    }""", r'affine.parallel at kernel:2:13 reduces with "assign" into f32 \(supported'),
    # an init value without a reduction (upstream's verifier rejects it too)
    ("""func.func @kernel(%a: memref<3x2xf32>, %b: memref<3x2xf32>, %c: memref<3xf32>, %d: memref<3xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %z = arith.constant 0.0 : f32
      %r = "scf.parallel"(%c0, %c3, %c1, %z) <{operandSegmentSizes = array<i32: 1, 1, 1, 1>}> ({
      ^bb0(%i: index):
        "scf.reduce"() : () -> ()
      }) : (index, index, index, f32) -> f32
      func.return
    }""", r"scf.parallel at kernel:6:13 does not verify \(Expected 1 reductions but 0 provided\)"),
], ids=["reduce-variadic", "affine-parallel-assign", "scf-parallel-missing-reduce"])
def test_unsupported_parallel_and_reduce_forms(text, match):
    """A form the interpreter does not implement is refused before anything
    runs, naming the op, its place in the kernel and what is missing."""
    # RULE: EXEC-03
    with pytest.raises(NotSupported, match=r"compute op=mlir.kernel: " + match):
        run(text, [Tensor(np.zeros((3, 2), np.float32), "f32")] * 2,
            [Tensor(np.zeros(3, np.float32), "f32")] * 2)


# ---------------------------------------------------------------------------
# End to end: an MLIR function lowered with the real CLI; the linalg.reduce /
# linalg.broadcast fall back to `compute op="mlir.kernel"` (D-LOW-ESCAPE).

ROWSUM = """func.func @rowsum(%X: memref<16x32xf32>, %Y: memref<16xf32>) {
  %a = memref.alloc() : memref<16x32xf32, 2>
  %b = memref.alloc() : memref<16xf32, 2>
  memref.copy %X, %a : memref<16x32xf32> to memref<16x32xf32, 2>
  linalg.reduce ins(%a : memref<16x32xf32, 2>) outs(%b : memref<16xf32, 2>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  memref.copy %b, %Y : memref<16xf32, 2> to memref<16xf32>
  return
}
"""

BIAS_ADD = """func.func @bias(%X: memref<16x32xf32>, %B: memref<32xf32>, %Y: memref<16x32xf32>) {
  %a = memref.alloc() : memref<16x32xf32, 2>
  %b = memref.alloc() : memref<32xf32, 2>
  %bb = memref.alloc() : memref<16x32xf32, 2>
  %y = memref.alloc() : memref<16x32xf32, 2>
  memref.copy %X, %a : memref<16x32xf32> to memref<16x32xf32, 2>
  memref.copy %B, %b : memref<32xf32> to memref<32xf32, 2>
  linalg.broadcast ins(%b : memref<32xf32, 2>) outs(%bb : memref<16x32xf32, 2>) dimensions = [0]
  linalg.add ins(%a, %bb : memref<16x32xf32, 2>, memref<16x32xf32, 2>) outs(%y : memref<16x32xf32, 2>)
  memref.copy %y, %Y : memref<16x32xf32, 2> to memref<16x32xf32>
  return
}
"""


def lower_and_load(tmp_path, mlir: str, fallback: str) -> NemInterpreter:
    """Lower `mlir` with the nem-opt CLI (npm_pro_x1), check that `fallback`
    became an mlir.kernel task, and load the program."""
    src, out = tmp_path / "in.mlir", tmp_path / "out.nem"
    src.write_text(mlir)
    r = subprocess.run([sys.executable, "-m", "nem.cli.nem_opt", str(src), "-p",
                        "lower-to-nem{device=npm_pro_x1 remarks=true}", "-t", "nem",
                        "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"fell back to compute: {fallback}" in r.stderr
    assert 'op="mlir.kernel"' in out.read_text()
    it = NemInterpreter()
    it.load(out)
    return it


@pytest.mark.parametrize("init", [None, 0.5])
def test_lowered_linalg_reduce_rowsum(tmp_path, init):
    """Y = rowsum(X): the kernel reduces into the L1 buffer `b`, whose
    contents are the init (zero as the runtime allocates it, or whatever was
    written there), adding x[i, 0], x[i, 1], ... in order in f32."""
    it = lower_and_load(tmp_path, ROWSUM, "linalg.reduce at 5:3")
    x = np.random.default_rng(23).standard_normal((16, 32)).astype(np.float32)
    it.write_tensor("X", x)
    it.write_tensor("Y", np.full(16, np.nan, np.float32))
    want = np.zeros(16, np.float32)
    if init is not None:
        it.write_tensor("b", np.full(16, init, np.float32))
        want[:] = init
    res = it.run()
    assert res.status == "completed" and res.race_count == 0, res.error
    for k in range(32):
        want = x[:, k] + want
    assert_bits(it.read_tensor("Y", (16,), np.float32), want)


def test_lowered_linalg_broadcast_bias_add(tmp_path):
    """Y = X + B[None, :]: the broadcast runs as an mlir.kernel task, the add
    as the NEM add (f32 add correctly rounded: bit-exact)."""
    it = lower_and_load(tmp_path, BIAS_ADD, "linalg.broadcast at 8:3")
    rng = np.random.default_rng(24)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    it.write_tensor("X", x)
    it.write_tensor("B", b)
    it.write_tensor("Y", np.full((16, 32), np.nan, np.float32))
    res = it.run()
    assert res.status == "completed" and res.race_count == 0, res.error
    assert_bits(it.read_tensor("Y", (16, 32), np.float32), x + b[None, :])
