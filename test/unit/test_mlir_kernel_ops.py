"""The scalar arith/math ops and the linalg ops the kernel interpreter adds to
xDSL's (runtime/nem/runtime/mlir_kernel_scalar.py, mlir_kernel_loops.py,
D-RT-MLIR-KERNEL-OPS): one elementwise kernel per op, compared bit-exactly
with numpy (or an exact reference where numpy has none); undefined results
are errors.  Every test runs on both backends (`kernel_runs.backend`)."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from kernel_runs import assert_bits, backend, run, wrap8  # noqa: F401 - backend: an autouse fixture

from nem.runtime.kernels import NotSupported, NumericError, Tensor

_MLIR_ELEM = {
    "f32": "f32",
    "f16": "f16",
    "bf16": "bf16",
    "i8": "i8",
    "u8": "i8",
    "i16": "i16",
    "u16": "i16",
    "i32": "i32",
    "u32": "i32",
}


def elementwise(body, ins, outs):
    """Run `body` once per element of 1-D operands: it sees `%x0, %x1, ...`
    (the elements of `ins`, (array, elem) pairs) and defines `%r0, %r1, ...`,
    stored to `outs`, (elem, dtype) pairs.  Returns the outs' arrays."""
    n = len(ins[0][0])
    mt = [f"memref<{n}x{_MLIR_ELEM[e]}>" for e in [e for _, e in ins] + [e for e, _ in outs]]
    params = [f"%a{k}: {mt[k]}" for k in range(len(ins))] + [
        f"%z{k}: {mt[len(ins) + k]}" for k in range(len(outs))
    ]
    loads = [f"%x{k} = affine.load %a{k}[%i] : {mt[k]}" for k in range(len(ins))]
    stores = [f"affine.store %r{k}, %z{k}[%i] : {mt[len(ins) + k]}" for k in range(len(outs))]
    text = (
        f"func.func @kernel({', '.join(params)}) {{\n  affine.for %i = 0 to {n} {{\n    "
        + "\n    ".join(loads + [body.strip()] + stores)
        + "\n  }\n  func.return\n}"
    )
    res = run(
        text,
        [Tensor(np.asarray(a), e) for a, e in ins],
        [Tensor(np.zeros(n, dt), e) for e, dt in outs],
    )
    return res if len(outs) > 1 else res[0]


F32_EDGES = np.array(
    [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        1e-30,
        -1e-30,
        3.0e-39,
        88.0,
        100.0,
        1e30,
        -100.0,
        np.inf,
        -np.inf,
        np.nan,
        0.3,
        -0.7,
        7.25,
    ],
    np.float32,
)


def _f32_inputs(seed=11):
    rng = np.random.default_rng(seed)
    return np.concatenate(
        [
            F32_EDGES,
            rng.uniform(-10, 10, 24).astype(np.float32),
            rng.uniform(0, 2, 12).astype(np.float32),
        ]
    )


@pytest.mark.parametrize(
    "name,ref",
    [
        ("exp", np.exp),
        ("exp2", np.exp2),
        ("expm1", np.expm1),
        ("log", np.log),
        ("log2", np.log2),
        ("log10", np.log10),
        ("log1p", np.log1p),
        ("sqrt", np.sqrt),
        ("rsqrt", lambda x: 1 / np.sqrt(x)),
        ("cbrt", np.cbrt),
        ("floor", np.floor),
        ("ceil", np.ceil),
        ("trunc", np.trunc),
        ("roundeven", np.rint),
    ],
)
@pytest.mark.parametrize("elem,dt", [("f32", np.float32), ("f16", np.float16)])
@pytest.mark.slow  # 4 s (56 cases)
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
    x = np.array(
        [0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997, -0.2, -0.0, 8388609.0, np.inf, np.nan], np.float32
    )
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
    a = np.array([3 * 2.0**-24 * (1 + 2.0**-18)], np.float32)
    b = np.array([1 - 2.0**-18], np.float32)
    c = np.array([1.0], np.float32)
    rng = np.random.default_rng(12)
    a, b, c = (np.concatenate([v, rng.uniform(-4, 4, 31).astype(np.float32)]) for v in (a, b, c))
    z = elementwise(
        "%r0 = math.fma %x0, %x1, %x2 : f32",
        [(a, "f32"), (b, "f32"), (c, "f32")],
        [("f32", np.float32)],
    )
    want = [
        _nearest(Fraction(float(p)) * Fraction(float(q)) + Fraction(float(r)), np.float32)
        for p, q, r in zip(a, b, c)
    ]
    assert_bits(z, np.array(want, np.float32))
    assert z[0] == np.float32(1 + 2.0**-23)
    assert np.float32(np.float64(a[0]) * np.float64(b[0]) + 1.0) != z[0]  # the double rounding


def test_fma_f64_and_special_values():
    # f64: 1 - 2^-60 is not a double, so (a * b) + c would give 0
    body = """%a = arith.constant 1.0000000009313226 : f64
    %b = arith.constant 0.9999999990686774 : f64
    %m = arith.constant -1.0 : f64
    %f = math.fma %a, %b, %m : f64
    %r0 = arith.truncf %f : f64 to f32"""
    z = elementwise(body, [(np.zeros(1, np.float32), "f32")], [("f32", np.float32)])
    assert z[0] == np.float32(-(2.0**-60))
    inf, nan = np.inf, np.nan
    a = np.array([inf, 0.0, 2.0, -0.0, 1.0, nan], np.float32)
    b = np.array([0.0, 5.0, 3.0, 1.0, 1.0, 1.0], np.float32)
    c = np.array([1.0, -0.0, -inf, -0.0, -1.0, 1.0], np.float32)
    z = elementwise(
        "%r0 = math.fma %x0, %x1, %x2 : f32",
        [(a, "f32"), (b, "f32"), (c, "f32")],
        [("f32", np.float32)],
    )
    assert_bits(z, [nan, 0.0, -inf, -0.0, 0.0, nan])


def test_bf16_results_round_once():
    """A bf16 result is the exact value rounded once (ml_dtypes' float64 ->
    bf16 conversion rounds through f32, which can hit a false tie)."""
    x = np.array([1 + 2.0**-8], np.float32)  # f64 1 + 2^-8 + 2^-30 -> bf16 1 + 2^-7
    body = """%e = arith.extf %x0 : f32 to f64
    %t = arith.constant 9.3132257461547852e-10 : f64
    %s = arith.addf %e, %t : f64
    %r0 = arith.truncf %s : f64 to bf16"""
    z = elementwise(body, [(x, "f32")], [("bf16", ml_dtypes.bfloat16)])
    assert float(z[0]) == 1 + 2.0**-7
    n = np.array([2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 3], np.int32)
    z = elementwise(
        "%r0 = arith.sitofp %x0 : i32 to bf16", [(n, "i32")], [("bf16", ml_dtypes.bfloat16)]
    )
    assert [float(v) for v in z] == [2**24 + 2**17, -(2**24 + 2**17), 3]


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
    assert fmx[2] == 0 and fmn[3] == 0  # +-0: either zero (unspecified)


@pytest.mark.parametrize(
    "name,ref",
    [
        ("math.copysign", np.copysign),
        ("math.atan2", np.arctan2),
        ("math.powf", np.power),
        ("arith.divf", np.divide),
        ("arith.subf", np.subtract),
    ],
)
def test_float_binary_ops(name, ref):
    x = _f32_inputs(13)
    y = np.roll(_f32_inputs(14), 5)
    z = elementwise(f"%r0 = {name} %x0, %x1 : f32", [(x, "f32"), (y, "f32")], [("f32", np.float32)])
    with np.errstate(all="ignore"):
        assert_bits(z, ref(x.astype(np.float64), y.astype(np.float64)).astype(np.float32))


def test_fpowi():
    x = np.array([2.0, -2.0, 0.5, 0.0, -0.0, 3.0, np.nan, 10.0], np.float32)
    n = np.array([3, 3, -2, -1, -3, 0, 0, 40], np.int32)
    z = elementwise(
        "%r0 = math.fpowi %x0, %x1 : f32, i32", [(x, "f32"), (n, "i32")], [("f32", np.float32)]
    )
    with np.errstate(all="ignore"):
        assert_bits(z, np.power(x.astype(np.float64), n.astype(np.float64)).astype(np.float32))


I8_EDGES = np.array([-128, -127, -100, -7, -1, 0, 1, 2, 3, 7, 100, 127], np.int8)
A8, B8 = (v.ravel() for v in np.meshgrid(I8_EDGES, I8_EDGES))


def _u(v):
    return np.asarray(v).astype(np.int8).view(np.uint8).astype(np.int64)


def _s(v):
    return np.asarray(v).astype(np.int64)


@pytest.mark.parametrize(
    "name,ref,nonzero_b",
    [
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
    ],
)
@pytest.mark.parametrize("elem", ["i8", "u8"])
def test_integer_binary_ops(name, ref, nonzero_b, elem):
    """Operands are read signed or unsigned at their width, whatever the
    memref's region holds (a u8 region is a signless i8 memref)."""
    keep = (B8 != 0) & ~((A8 == -128) & (B8 == -1)) if nonzero_b else np.ones(A8.shape, bool)
    a, b = A8[keep], B8[keep]
    dt = np.uint8 if elem == "u8" else np.int8
    z = elementwise(
        f"%r0 = arith.{name} %x0, %x1 : i8", [(a.view(dt), elem), (b.view(dt), elem)], [(elem, dt)]
    )
    np.testing.assert_array_equal(z.view(np.int8), wrap8(ref(a, b)))


@pytest.mark.parametrize(
    "name,ref",
    [
        ("shli", lambda a, b: _s(a) << b),
        ("shrsi", lambda a, b: _s(a) >> b),
        ("shrui", lambda a, b: _u(a) >> b),
    ],
)
def test_shifts(name, ref):
    a = np.repeat(I8_EDGES, 8)
    b = np.tile(np.arange(8, dtype=np.int8), len(I8_EDGES))
    z = elementwise(f"%r0 = arith.{name} %x0, %x1 : i8", [(a, "i8"), (b, "i8")], [("i8", np.int8)])
    np.testing.assert_array_equal(z, wrap8(ref(a, b.astype(np.int64))))


def test_extended_integer_ops():
    """addui_extended (sum, carry), mulsi_extended / mului_extended (low, high)."""
    body = """%r0, %c = arith.addui_extended %x0, %x1 : i8, i1
    %r1 = arith.extui %c : i1 to i8
    %r2, %r3 = arith.mulsi_extended %x0, %x1 : i8
    %r4, %r5 = arith.mului_extended %x0, %x1 : i8"""
    outs = elementwise(body, [(A8, "i8"), (B8, "i8")], [("i8", np.int8)] * 6)
    s, ps, pu = _u(A8) + _u(B8), _s(A8) * _s(B8), _u(A8) * _u(B8)
    for got, want in zip(outs, [s, s >> 8, ps, ps >> 8, pu, pu >> 8]):
        np.testing.assert_array_equal(got, wrap8(want))


def test_ipowi():
    a = np.array([3, -3, 2, 2, 0, 1, -1, -1, 2, -2, 5, 7], np.int8)
    b = np.array([4, 3, 7, 8, 0, -5, -2, -3, -1, -1, 0, 100], np.int8)
    z = elementwise("%r0 = math.ipowi %x0, %x1 : i8", [(a, "i8"), (b, "i8")], [("i8", np.int8)])
    pos = np.array([pow(int(p), int(q), 256) for p, q in zip(a, b) if q >= 0])
    np.testing.assert_array_equal(z[b >= 0], wrap8(pos))
    np.testing.assert_array_equal(z[b < 0], [1, 1, -1, 0, 0])  # 1 / a^-b, truncated


@pytest.mark.parametrize(
    "name,ref",
    [
        ("absi", lambda a: np.abs(_s(a))),
        ("ctlz", lambda a: [8 - int(v).bit_length() for v in _u(a)]),
        ("cttz", lambda a: [(int(v) & -int(v)).bit_length() - 1 if v else 8 for v in _u(a)]),
        ("ctpop", lambda a: np.bitwise_count(_u(a))),
    ],
)
def test_integer_math_ops(name, ref):
    z = elementwise(f"%r0 = math.{name} %x0 : i8", [(I8_EDGES, "i8")], [("i8", np.int8)])
    np.testing.assert_array_equal(z, wrap8(ref(I8_EDGES)))
    assert name != "absi" or z[0] == -128  # |MIN| wraps


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
    outs = elementwise(
        body,
        [(x, "u8")],
        [
            ("i32", np.int32),
            ("i32", np.int32),
            ("i8", np.int8),
            ("i32", np.int32),
            ("f32", np.float32),
            ("f32", np.float32),
            ("i32", np.int32),
        ],
    )
    x8 = x.astype(np.int64)
    np.testing.assert_array_equal(outs[0], x8)
    np.testing.assert_array_equal(outs[1], _u(x))
    np.testing.assert_array_equal(outs[2], wrap8(x8 * x8))
    np.testing.assert_array_equal(outs[3], x8)
    assert_bits(outs[4], x8.astype(np.float32))
    assert_bits(outs[5], _u(x).astype(np.float32))
    assert (outs[6] == -1).all()


def test_int_to_float_rounds_to_nearest_even():
    n = np.array([2**24 + 1, 2**24 + 3, -(2**31), 2**31 - 1, 16777217, 33554435], np.int32)
    z, u = elementwise(
        "%r0 = arith.sitofp %x0 : i32 to f32\n    %r1 = arith.uitofp %x0 : i32 to f32",
        [(n, "i32")],
        [("f32", np.float32), ("f32", np.float32)],
    )
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
    ref = [
        a < b,
        a == b,
        ~(a >= b),
        ~(a == b),
        ~(np.isnan(a) | np.isnan(b)),
        np.isnan(a) | np.isnan(b),
        a >= b,
        ~(a <= b),
    ]
    lines = []
    for k, p in enumerate(preds):
        lines += [
            f"%c{k} = arith.cmpf {p}, %x0, %x1 : f32",
            f"%r{k} = arith.select %c{k}, %x0, %x1 : f32",
        ]
    outs = elementwise(
        "\n    ".join(lines), [(a, "f32"), (b, "f32")], [("f32", np.float32)] * len(preds)
    )
    for got, want in zip(outs, ref):
        assert_bits(got, np.where(want, a, b))


@pytest.mark.parametrize(
    "body,inputs,match",
    [
        ("%r0 = arith.divsi %x0, %x1 : i8", [[5, 1], [0, 1]], "integer division by zero"),
        ("%r0 = arith.remui %x0, %x1 : i8", [[5], [0]], "integer division by zero"),
        (
            "%r0 = arith.divsi %x0, %x1 : i8",
            [[-128], [-1]],
            r"signed division overflow \(-128 / -1",
        ),
        ("%r0 = arith.shli %x0, %x1 : i8", [[1], [8]], "shift by 8 of an i8 value"),
        ("%r0 = math.ipowi %x0, %x1 : i8", [[0], [-2]], "ipowi of 0 to a negative power"),
    ],
)
def test_undefined_integer_results_are_errors(body, inputs, match):
    with pytest.raises(NumericError, match=match):
        elementwise(body, [(np.array(v, np.int8), "i8") for v in inputs], [("i8", np.int8)])


@pytest.mark.parametrize("x", [np.nan, np.inf, 128.0, -129.0])
def test_fptosi_out_of_range_is_an_error(x):
    with pytest.raises(NumericError, match=r"arith.fptosi of .* to i8 \(undefined"):
        elementwise(
            "%r0 = arith.fptosi %x0 : f32 to i8",
            [(np.array([x], np.float32), "f32")],
            [("i8", np.int8)],
        )


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
    c, s, t = run(
        LINALG,
        [Tensor(a, "f32"), Tensor(b, "f32")],
        [
            Tensor(np.zeros((4, 3), np.float32), "f32"),
            Tensor(np.zeros((4, 8), np.float32), "f32"),
            Tensor(np.zeros((8, 4), np.float32), "f32"),
        ],
    )
    want = np.full((4, 3), 0.5, np.float32)
    for k in range(8):
        want = want + a[:, k : k + 1] * b[k : k + 1, :]  # f32: rounded after * and +
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
    for c in range(2):  # loops (n, f, oh, ow, c, kh, kw)
        for kh in range(3):
            for kw in range(3):
                want = (
                    want
                    + x[:, None, c, kh : kh + 4 : 2, kw : kw + 4 : 2]
                    * w[None, :, c, kh, kw, None, None]
                )
    assert_bits(y, want)


def test_linalg_pooling_custom_form_is_not_supported():
    """xDSL builds max(input, window) as the body of a pooling op's custom
    form; MLIR's is max(output, input), so it is refused, not run."""
    text = """func.func @kernel(%x: memref<1x1x4x4xf32>, %win: memref<2x2xf32>, %p: memref<1x1x2x2xf32>) {
      linalg.pooling_nchw_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%x, %win : memref<1x1x4x4xf32>, memref<2x2xf32>) outs(%p : memref<1x1x2x2xf32>)
      func.return
    }"""
    with pytest.raises(
        NotSupported,
        match="linalg.pooling_nchw_max at kernel:2:7 has a body that ignores the output",
    ):
        run(
            text,
            [
                Tensor(np.zeros((1, 1, 4, 4), np.float32), "f32"),
                Tensor(np.zeros((2, 2), np.float32), "f32"),
            ],
            [Tensor(np.zeros((1, 1, 2, 2), np.float32), "f32")],
        )


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
    (p,) = run(
        text, [Tensor(x, "f32"), Tensor(np.zeros((2, 2), np.float32), "f32")], [Tensor(p0, "f32")]
    )
    want = p0
    for kh in range(2):
        for kw in range(2):
            want = np.maximum(want, x[:, :, kh : kh + 4 : 2, kw : kw + 4 : 2])
    assert_bits(p, want)


def test_linalg_mixed_types_and_linalg_index_run():
    """A matmul of bf16 into f32 widens its inputs first, as upstream's body
    does (D-LOW-LINALG-NAMED; xDSL's body yielded bf16 into the f32 output,
    and the kernel was refused); `linalg.index` gives the body its point
    (it had no implementation, and an outside user's gather compiled to a
    kernel that could not run, session 66)."""
    mixed = """func.func @kernel(%a: memref<2x2xbf16>, %c: memref<2x2xf32>) {
      linalg.matmul ins(%a, %a : memref<2x2xbf16>, memref<2x2xbf16>) outs(%c : memref<2x2xf32>)
      func.return
    }"""
    a = np.array([[1.5, -2.25], [0.125, 3.0]], ml_dtypes.bfloat16)
    c0 = np.array([[1.0, 0.5], [-1.0, 2.0]], np.float32)
    (c,) = run(mixed, [Tensor(a, "bf16")], [Tensor(c0, "f32")])
    wide = a.astype(np.float32)
    assert_bits(c, c0 + wide @ wide)  # products and sums of these are exact in f32
    index = """func.func @kernel(%a: memref<4xi32>, %c: memref<4xi32>) {
      linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%c : memref<4xi32>) {
      ^bb0(%out: i32):
        %i = linalg.index 0 : index
        %v = arith.index_cast %i : index to i32
        linalg.yield %v : i32
      }
      func.return
    }"""
    (got,) = run(
        index, [Tensor(np.zeros(4, np.int32), "i32")], [Tensor(np.zeros(4, np.int32), "i32")]
    )
    np.testing.assert_array_equal(got, np.arange(4, dtype=np.int32))


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
    (z,) = run(
        text, [Tensor(x, "f32")], [Tensor(np.zeros((4, 6), np.float32), "f32")], index_args=[3]
    )
    i, j = np.indices((4, 6))
    want = np.where((i >= 2) & (j <= 2), x, -x)
    want[0, 0] = 42.0
    np.testing.assert_array_equal(z, want)


@pytest.mark.parametrize(
    "drop, field",
    [
        (
            "function_type = (memref<4xf32>) -> (), ",
            "func.func at kernel:1:2 lacks its required property 'function_type'",
        ),
        ("value = 1.0 : f32", "arith.constant at kernel:1:"),
    ],
)
def test_generic_form_without_a_required_property_is_not_supported(drop, field):
    """Generic-form kernel text parses without an op's required properties;
    reading them raised KeyError (issue 11: fuzz finding)."""
    text = (
        '"func.func"() <{function_type = (memref<4xf32>) -> (), sym_name = "kernel"}> ({'
        ' ^bb0(%0: memref<4xf32>): %c = "arith.constant"() <{value = 1.0 : f32}> : () -> f32'
        ' "func.return"() : () -> () }) : () -> ()'
    ).replace(drop, "")
    with pytest.raises(NotSupported, match=field):
        run(text, [], [Tensor(np.zeros(4, np.float32), "f32")])
