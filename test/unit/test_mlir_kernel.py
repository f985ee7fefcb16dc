"""The `compute op="mlir.kernel"` executor (runtime/mlir_kernel.py,
decision D-RT-MLIR-KERNEL): argument binding, per-op rounding, integer
wrapping, bounds, index_args, caching and clear NotSupported errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from nem.runtime import mlir_kernel
from nem.runtime.api import NemInterpreter
from nem.runtime.kernels import KERNELS, NotSupported, NumericError, Tensor


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


def test_i4_stores_wrap_to_four_bits():
    text = """func.func @kernel(%x: memref<4xi4>, %z: memref<4xi4>) {
      affine.for %i = 0 to 4 {
        %a = affine.load %x[%i] : memref<4xi4>
        %s = arith.addi %a, %a : i4
        affine.store %s, %z[%i] : memref<4xi4>
      }
      func.return
    }"""
    x = np.array([7, -8, 3, -3], np.int8)       # i4 unpacked (D-RT-I4)
    (z,) = run(text, [Tensor(x, "i4")], [Tensor(np.zeros(4, np.int8), "i4")])
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
    text = FMA.replace("%s = arith.addf %p, %a : f32", "%s = math.rsqrt %p : f32")
    with pytest.raises(NotSupported, match=r"compute op=mlir.kernel: math.rsqrt at kernel:6:12 "
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
                                        "%s = math.rsqrt %p : f32")), file="k.nem")
    res = it.run()
    assert res.status == "error"
    msg = str(res.error)
    assert "not supported: compute op=mlir.kernel: math.rsqrt at kernel:1:" in msg
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
