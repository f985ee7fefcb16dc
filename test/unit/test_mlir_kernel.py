"""The `compute op="mlir.kernel"` executor (runtime/nem/runtime/mlir_kernel.py,
decision D-RT-MLIR-KERNEL): argument binding, per-op rounding, integer
wrapping, bounds, index_args, caching and clear NotSupported errors; the
affine/scf parallel loops and linalg reductions added to xDSL's interpreter
(D-RT-MLIR-KERNEL-OPS), with reductions in sequential order (the scalar and
linalg ops: test_mlir_kernel_ops.py).

Every test runs on both backends (D-RT-MLIR-JIT): xDSL's interpreter and the
native code compiled with upstream MLIR ("native" refuses rather than falls
back, so a test that passes there ran natively); the semantics, including
the errors for undefined results, are the same."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from kernel_runs import HATCH, assert_bits, backend, run, wrap8  # noqa: F401 - backend: an autouse fixture

from nem.runtime.api import NemInterpreter
from nem.runtime.kernels import NotSupported, NumericError, Tensor

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
    np.testing.assert_array_equal(z, x * x + x)  # numpy f32: rounds after each op


@pytest.mark.parametrize("elem,dt", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_narrow_floats_each_op_rounded(elem, dt):
    text = FMA.replace("f32", elem)
    rng = np.random.default_rng(1)
    x = rng.uniform(-4, 4, (4, 8)).astype(dt)
    (z,) = run(text, [Tensor(x, elem)], [Tensor(np.zeros((4, 8), dt), elem)])
    assert z.dtype == np.dtype(dt)
    want = (
        (x.astype(np.float32) * x.astype(np.float32)).astype(dt).astype(np.float32)
        + x.astype(np.float32)
    ).astype(dt)
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
    assert (z0 == 7).all()  # the runtime writes the result back, not the kernel


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


def test_i4_stores_wrap_to_four_bits(backend):  # noqa: F811 - the fixture's value
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
    x = np.array([7, -8, 3, -3], np.int8)  # i4 unpacked (D-RT-I4)
    args = [Tensor(x, "i4")], [Tensor(np.zeros(4, np.int8), "i4")]
    if backend == "native":
        with pytest.raises(
            NotSupported, match="native backend does not take this kernel: a memref of i4"
        ):
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
        want = want + x[:, k]  # sequential f32 sum
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
    ck = HATCH[0].compiled(FMA)
    run(FMA, [Tensor(x, "f32")], [Tensor(np.zeros((4, 8), np.float32), "f32")])
    assert HATCH[0].compiled(FMA) is ck


def test_unsupported_op_is_named():
    # math.erfc: not in xDSL 0.74's math dialect (generic form parses it unregistered)
    text = FMA.replace("%s = arith.addf %p, %a : f32", '%s = "math.erfc"(%p) : (f32) -> f32')
    with pytest.raises(
        NotSupported,
        match=r"compute op=mlir.kernel: math.erfc at kernel:6:13 "
        r"has no implementation",
    ):
        run(
            text,
            [Tensor(np.ones((4, 8), np.float32), "f32")],
            [Tensor(np.zeros((4, 8), np.float32), "f32")],
        )


def test_unregistered_op_is_named():
    text = FMA.replace("%s = arith.addf %p, %a : f32", '%s = "my.op"(%p) : (f32) -> f32')
    with pytest.raises(NotSupported, match="my.op at kernel"):
        run(
            text,
            [Tensor(np.ones((4, 8), np.float32), "f32")],
            [Tensor(np.zeros((4, 8), np.float32), "f32")],
        )


def test_signature_mismatch_is_not_supported():
    with pytest.raises(NotSupported, match="argument 0 of @kernel is memref<4x8xf32>"):
        run(
            FMA,
            [Tensor(np.ones((4, 4), np.float32), "f32")],
            [Tensor(np.zeros((4, 8), np.float32), "f32")],
        )
    with pytest.raises(NotSupported, match="index_args"):
        run(
            FMA,
            [Tensor(np.ones((4, 8), np.float32), "f32")],
            [Tensor(np.zeros((4, 8), np.float32), "f32")],
            index_args=[3],
        )
    with pytest.raises(NotSupported, match="does not parse"):
        run("func.func @kernel(", [], [])


def test_out_of_bounds_is_an_error():
    text = FMA.replace("affine.for %j = 0 to 8", "affine.for %j = 0 to 9")
    with pytest.raises(NumericError, match=r"outside the memref of shape \[4, 8\]"):
        run(
            text,
            [Tensor(np.ones((4, 8), np.float32), "f32")],
            [Tensor(np.zeros((4, 8), np.float32), "f32")],
        )


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
    it.load_string(
        _program(
            FMA.replace("%s = arith.addf %p, %a : f32", '%s = "math.erfc"(%p) : (f32) -> f32')
        ),
        file="k.nem",
    )
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
    z, q = run(
        SCALAR_OPS,
        [Tensor(x, "f32"), Tensor(n, "i32")],
        [Tensor(np.zeros(16, np.float32), "f32"), Tensor(np.zeros(16, np.int32), "i32")],
    )
    f = np.float32
    d = (f(1.0) / x).astype(f)
    t = np.array([f(np.tanh(np.float64(v))) for v in d], f)
    ref = (np.abs(-t) + n.astype(f)).astype(f)
    assert np.array_equal(z, ref)
    trunc = np.trunc(n / 3).astype(np.int32)  # toward zero, unlike Python's //
    assert np.array_equal(q, np.maximum(trunc, 3))


def test_numpy_backed_math_ops():
    """math.cos/floor/... run in f64 and round once to the result type."""
    text = FMA.replace(
        "%s = arith.addf %p, %a : f32", "%c = math.cos %a : f32\n      %s = math.floor %c : f32"
    )
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
    (z,) = run(text, [Tensor(x, "f32")], [Tensor(np.zeros((4, 8), np.float32), "f32")])
    ref = np.floor(np.cos(x.astype(np.float64)).astype(np.float32))
    assert np.array_equal(z, ref)


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
            want = x[i, :, k] * x[i, :, k] + want  # f32: rounded after * and +
    assert_bits(s, want)
    acc = d0.astype(np.int64)
    for k in range(6):
        acc = n[:, k] - acc
    np.testing.assert_array_equal(d, wrap8(acc))


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
    b, w = run(
        text,
        [Tensor(a, "f32"), Tensor(v, "i16")],
        [
            Tensor(np.zeros((3, 7, 5), np.float32), "f32"),
            Tensor(np.zeros((2, 4, 3), np.int16), "i16"),
        ],
    )
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
    z, o = run(
        AFFINE_PARALLEL,
        [Tensor(x, "f32")],
        [Tensor(z0, "f32"), Tensor(np.zeros(2, np.float32), "f32")],
        index_args=[n],
    )
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
    np.testing.assert_array_equal(o, wrap8([sum(v), prod, all_and, any_or]))


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
    z, o, h = run(
        SCF_PARALLEL,
        [Tensor(x, "f32"), Tensor(k, "i32")],
        [
            Tensor(z0, "f32"),
            Tensor(np.zeros(1, np.float32), "f32"),
            Tensor(np.zeros(1, np.int32), "i32"),
        ],
        index_args=[1],
    )
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
        run(
            SCF_PARALLEL.replace("%c2, %c2, %init", "%c2, %c0, %init"),
            [
                Tensor(np.zeros((6, 8), np.float32), "f32"),
                Tensor(np.zeros((6, 8), np.int32), "i32"),
            ],
            [
                Tensor(np.zeros((6, 8), np.float32), "f32"),
                Tensor(np.zeros(1, np.float32), "f32"),
                Tensor(np.zeros(1, np.int32), "i32"),
            ],
            index_args=[0],
        )


@pytest.mark.parametrize(
    "text,match",
    [
        # upstream's variadic form: two inputs and two inits
        (
            """func.func @kernel(%a: memref<3x2xf32>, %b: memref<3x2xf32>, %c: memref<3xf32>, %d: memref<3xf32>) {
      "linalg.reduce"(%a, %b, %c, %d) <{dimensions = array<i64: 1>}> ({
      ^bb0(%x: f32, %y: f32, %s: f32, %t: f32):
        %0 = arith.addf %x, %s : f32
        %1 = arith.addf %y, %t : f32
        "linalg.yield"(%0, %1) : (f32, f32) -> ()
      }) : (memref<3x2xf32>, memref<3x2xf32>, memref<3xf32>, memref<3xf32>) -> ()
      func.return
    }""",
            r"linalg.reduce at kernel:2:8 is supported only with one input and one init \(it has 4",
        ),
        # a reduction kind -lower-affine does not lower ("assign")
        (
            """func.func @kernel(%a: memref<3x2xf32>, %b: memref<3x2xf32>, %c: memref<3xf32>, %d: memref<3xf32>) {
      %r = "affine.parallel"() <{lowerBoundsGroups = dense<1> : tensor<1xi32>, lowerBoundsMap = affine_map<() -> (0)>, reductions = [3], steps = [1], upperBoundsGroups = dense<1> : tensor<1xi32>, upperBoundsMap = affine_map<() -> (3)>}> ({
      ^bb0(%i: index):
        %v = affine.load %a[%i, 0] : memref<3x2xf32>
        "affine.yield"(%v) : (f32) -> ()
      }) : () -> f32
      affine.store %r, %c[0] : memref<3xf32>
      func.return
    }""",
            r'affine.parallel at kernel:2:13 reduces with "assign" into f32 \(supported',
        ),
        # an init value without a reduction (upstream's verifier rejects it too)
        (
            """func.func @kernel(%a: memref<3x2xf32>, %b: memref<3x2xf32>, %c: memref<3xf32>, %d: memref<3xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %z = arith.constant 0.0 : f32
      %r = "scf.parallel"(%c0, %c3, %c1, %z) <{operandSegmentSizes = array<i32: 1, 1, 1, 1>}> ({
      ^bb0(%i: index):
        "scf.reduce"() : () -> ()
      }) : (index, index, index, f32) -> f32
      func.return
    }""",
            r"scf.parallel at kernel:6:13 does not verify \(Expected 1 reductions but 0 provided\)",
        ),
    ],
    ids=["reduce-variadic", "affine-parallel-assign", "scf-parallel-missing-reduce"],
)
def test_unsupported_parallel_and_reduce_forms(text, match):
    """A form the interpreter does not implement is refused before anything
    runs, naming the op, its place in the kernel and what is missing."""
    # RULE: EXEC-03
    with pytest.raises(NotSupported, match=r"compute op=mlir.kernel: " + match):
        run(
            text,
            [Tensor(np.zeros((3, 2), np.float32), "f32")] * 2,
            [Tensor(np.zeros(3, np.float32), "f32")] * 2,
        )


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
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nem.cli.nem_opt",
            str(src),
            "-p",
            "lower-to-nem{device=npm_pro_x1 remarks=true}",
            "-t",
            "nem",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert f"fell back to compute: {fallback}" in r.stderr
    assert 'op="mlir.kernel"' in out.read_text()
    it = NemInterpreter()
    it.load(out)
    return it


@pytest.mark.parametrize("init", [None, 0.5])
@pytest.mark.slow  # 17 s (4 cases)
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


@pytest.mark.slow  # 10 s (2 cases)
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
