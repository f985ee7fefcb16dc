"""What graph compilers emit, raised to NEM opcodes and run (issue 12):
each input under test/lit/lowering/Inputs/raise/ (the exact upstream text;
`graph_raise.test` checks the emitted tasks) is lowered with the real CLI,
run by `nem-run` under 3 random schedules (no race, identical memory), and
compared with numpy on seeded random inputs.

Tolerances: f32 convolutions are computed in f64 and rounded once per
task (D-NUM-CONV, D-LOW-ACCUM), so they are compared with a few f32 ulps of
the magnitudes involved; max pooling, copies and relu are exact.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from raise_runs import INPUTS, lower_and_run
from raise_runs import mlir_opt as _mlir_opt
from raise_runs import rand as _rand

from nem.dialect.diagnostics import NemDiagnosticError
from nem.frontends.upstream_dialects import lowering_context
from nem.frontends.upstream_dialects.mlir_input import parse_mlir_checked


def _maxpool2(x: np.ndarray) -> np.ndarray:
    n, h, w, c = x.shape
    return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


@pytest.mark.parametrize("dtype", ["f16", "f32"])
@pytest.mark.slow  # 6 s (2 cases)
def test_pooling_nhwc_max(tmp_path, dtype):
    """linalg.pooling_nhwc_max (not defined in xDSL): maxpool (f16) or one
    max per window offset (f32: no pool<f32> variant on the device)."""
    rng = np.random.default_rng(1)
    np_t = np.float16 if dtype == "f16" else np.float32
    x = _rand(rng, (1, 8, 8, 4), np_t)
    y = np.full((1, 4, 4, 4), -np.inf, np_t)
    ins = {"x": x, "y": y}
    if dtype == "f16":
        ins["s"] = np.zeros((1, 4, 4, 4), np_t)
    remark = "maxpool + max" if dtype == "f16" else "4 max (max pooling over window offsets)"
    out = lower_and_run(INPUTS / f"pool_{dtype}.mlir", tmp_path, ins, list(ins)[1:], remark)
    assert (out["y"] == _maxpool2(x)).all()
    if dtype == "f16":  # the sum pooling: one f16 add per offset, rounded as MLIR does
        ref = np.zeros((1, 4, 4, 4), np.float16)
        for kh in range(2):
            for kw in range(2):
                ref = ref + x[:, kh::2, kw::2, :]
        assert (out["s"] == ref).all()


def test_sumpool_nest(tmp_path):
    """A window sum written as affine loops, kw the outer window loop: one
    add per offset in that order, bit-identical to the nest (D-LOW-SUMPOOL)."""
    rng = np.random.default_rng(5)
    x, s = _rand(rng, (1, 6, 6, 4)), _rand(rng, (1, 2, 2, 4))
    out = lower_and_run(
        INPUTS / "sumpool_nest.mlir",
        tmp_path,
        {"x": x, "s": s},
        ["s"],
        "9 add (window sum over window offsets)",
        entry="kw_outer",
    )
    ref = s.copy()
    for kw in range(3):
        for kh in range(3):
            ref = ref + x[:, kh::3, kw::3, :]
    assert (out["s"] == ref).all()


def test_conv_nchw_fchw(tmp_path):
    rng = np.random.default_rng(2)
    x, w, y = _rand(rng, (1, 3, 10, 9)), _rand(rng, (8, 3, 3, 3)), _rand(rng, (1, 8, 4, 7))
    out = lower_and_run(
        INPUTS / "conv_nchw.mlir",
        tmp_path,
        {"x": x, "w": w, "y": y},
        ["y"],
        "conv2d + add (accumulation)",
    )
    ref = y.astype(np.float64).copy()
    for oh in range(4):
        for ow in range(7):
            ref[0, :, oh, ow] += np.einsum(
                "chw,fchw->f", x[0, :, 2 * oh : 2 * oh + 3, ow : ow + 3], w
            )
    assert np.allclose(out["y"], ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("tiles", [None, 2])
@pytest.mark.slow  # 7 s (2 cases)
def test_conv_nest_bias_fill(tmp_path, tiles):
    """conv_nhwc.mlir through mlir-opt -convert-linalg-to-affine-loops (and
    -affine-loop-tile): the conv nest is conv2d, the bias broadcast
    transfers, the fill a clamp (D-LOW-FILL)."""
    opt = _mlir_opt()
    if opt is None:
        pytest.skip("mlir-opt (the mlir extra) is not installed")
    nest = tmp_path / "nest.mlir"
    passes = ["-convert-linalg-to-affine-loops"]
    if tiles:
        passes.append(f"-affine-loop-tile=tile-size={tiles}")
    r = subprocess.run(
        [opt, str(INPUTS / "conv_nhwc.mlir"), *passes, "-o", str(nest)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    rng = np.random.default_rng(3)
    x, w, b = _rand(rng, (1, 6, 6, 3)), _rand(rng, (3, 3, 3, 4)), _rand(rng, (4,))
    ins = {
        "arg0": x,
        "arg1": w,
        "arg2": b,
        "arg3": _rand(rng, (1, 4, 4, 4)),
        "arg4": _rand(rng, (1, 4, 4, 4)),
    }
    out = lower_and_run(nest, tmp_path, ins, ["arg3", "arg4"], "(broadcast copy)")
    ref = np.broadcast_to(b, (1, 4, 4, 4)).astype(np.float64).copy()
    for i in range(3):
        for j in range(3):
            ref += np.einsum("nhwc,cf->nhwf", x[:, i : i + 4, j : j + 4, :], w[i, j])
    assert np.allclose(out["arg3"], ref, rtol=0, atol=1e-5)
    assert (out["arg4"] == 0).all()


def test_relu_select(tmp_path):
    """torch-mlir's relu (cmpf ugt + select) is relu, NaN included."""
    rng = np.random.default_rng(4)
    x = _rand(rng, (4, 8))
    x[0, 0] = np.nan
    out = lower_and_run(
        INPUTS / "relu_select.mlir",
        tmp_path,
        {"x": x, "y": np.zeros((4, 8), np.float32)},
        ["y"],
        "-> relu",
    )
    ref = np.where(np.isnan(x) | (x > 0), x, np.float32(0))
    np.testing.assert_array_equal(out["y"], ref)


def test_linalg_map(tmp_path):
    rng = np.random.default_rng(5)
    x, z = _rand(rng, (4, 8)), _rand(rng, (4, 8))
    out = lower_and_run(
        INPUTS / "map.mlir",
        tmp_path,
        {"x": x, "z": z, "y": np.zeros((4, 8), np.float32)},
        ["y"],
        "-> add",
    )
    np.testing.assert_array_equal(out["y"], x + z)


@pytest.fixture
def without_mlir(monkeypatch):
    """The upstream MLIR bindings made unimportable, as without the mlir extra."""
    import builtins

    real = builtins.__import__

    def no_mlir(name, *a, **k):
        if name == "mlir" or name.startswith("mlir."):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_mlir)


def test_without_mlir_extra(without_mlir):
    """Without the bindings an op xDSL lacks is a located `not supported`."""
    text = (INPUTS / "map.mlir").read_text()
    with pytest.raises(NemDiagnosticError) as e:
        parse_mlir_checked(lowering_context(), text, "map.mlir")
    d = e.value.diagnostics[0]
    assert d.loc is not None and (d.loc.line, d.loc.col) == (3, 3)
    assert "not supported: 'linalg.map' needs the mlir extra" in d.message


def test_generic_only_op_without_mlir_extra(without_mlir):
    """Without the bindings an op xDSL reads only in generic form, written in
    its custom form, is a located `not supported` naming the way around it
    (D-LOW-UPSTREAM); in generic form it parses."""
    text = (
        "func.func @f(%C: memref<16xf32>) {\n"
        "  %c = memref.cast %C : memref<16xf32> to memref<?xf32>\n  return\n}\n"
    )
    with pytest.raises(NemDiagnosticError) as e:
        parse_mlir_checked(lowering_context(), text, "cast.mlir")
    d = e.value.diagnostics[0]
    assert d.loc is not None and (d.loc.line, d.loc.col) == (2, 8)
    assert "not supported: 'memref.cast' in its custom form needs the mlir extra" in d.message
    assert d.fix is not None and "mlir-opt --mlir-print-op-generic" in d.fix
    generic = text.replace(
        "memref.cast %C : memref<16xf32> to memref<?xf32>",
        '"memref.cast"(%C) : (memref<16xf32>) -> memref<?xf32>',
    )
    parse_mlir_checked(lowering_context(), generic, "cast.mlir")


@pytest.mark.parametrize("entry", ["bias_relu", "shift_exp"])
@pytest.mark.slow  # 7 s (2 cases)
def test_broadcast_operand(tmp_path, entry):
    """Elementwise nests with a broadcast operand (D-LOW-BCAST-OPERAND):
    one concat of its bytes (f32, D-LOW-BCAST-CONCAT) copies the operand to
    the output's shape, the ops run on it;
    per-op rounding as the nest's, so the result is bit-identical."""
    rng = np.random.default_rng(6)
    x, y = _rand(rng, (4, 8)), np.zeros((4, 8), np.float32)
    if entry == "bias_relu":
        b = _rand(rng, (8,))
        ins = {"x": x, "b": b, "y": y}
        ref = np.maximum(x + b, np.float32(0))
    else:
        m = _rand(rng, (4, 1))
        ins = {"x": x, "m": m, "y": y}
        ref = np.exp(x - m)
    out = lower_and_run(
        INPUTS / "bcast_operand.mlir",
        tmp_path,
        ins,
        ["y"],
        "concat (broadcast operand)",
        entry=entry,
    )
    if entry == "bias_relu":
        assert (out["y"] == ref).all()
    else:  # exp: D-NUM-FLOAT (f64, rounded once) vs numpy's f32 exp
        assert np.allclose(out["y"], ref, rtol=1e-6, atol=0)


@pytest.mark.parametrize("entry", ["bias_relu", "shift_exp", "unit_row", "two_outputs"])
@pytest.mark.slow  # 26 s (4 cases)
def test_broadcast_generic(tmp_path, entry):
    """`linalg.generic` with a broadcast input map (a channel bias over
    NCHW, a row statistic, a `(d0, d1) -> (0, d1)` operand) is raised as the
    equivalent nest is (D-LOW-BCAST-OPERAND): the operand copied to the
    output's shape, then one task per op, bit-identical to the body's f32
    evaluation (exp: D-NUM-FLOAT); a generic with two outputs is one tree
    per output (the second output was dropped before)."""
    rng = np.random.default_rng(16)
    if entry == "bias_relu":
        x, b = _rand(rng, (1, 8, 4, 4)), _rand(rng, (8,))
        ins, ref = {"x": x, "b": b}, np.maximum(x + b[None, :, None, None], np.float32(0))
    elif entry == "shift_exp":
        x, m = _rand(rng, (4, 8)), _rand(rng, (4,))
        ins, ref = {"x": x, "m": m}, np.exp(x - m[:, None])
    elif entry == "unit_row":
        x, g = _rand(rng, (4, 8)), _rand(rng, (1, 8))
        ins, ref = {"x": x, "g": g}, x * g
    else:  # one tree per output (an output was dropped before)
        x = _rand(rng, (4, 8))
        ins, ref = {"x": x, "z": np.zeros_like(x)}, np.exp(x)
    ins["y"] = np.zeros_like(x)
    outputs = ["y", "z"] if entry == "two_outputs" else ["y"]
    out = lower_and_run(
        INPUTS / "bcast_generic.mlir",
        tmp_path,
        ins,
        outputs,
        "(2 outputs)" if entry == "two_outputs" else "(broadcast operand)",
        entry=entry,
    )
    if entry in ("shift_exp", "two_outputs"):
        assert np.allclose(out["y"], ref, rtol=1e-6, atol=0)
    else:
        assert (out["y"] == ref).all()
    if entry == "two_outputs":
        assert (out["z"] == -x).all()


@pytest.mark.parametrize("entry", ["transpose", "bias", "copy", "fill"])
@pytest.mark.slow  # 12 s (4 cases)
def test_generic_copies(tmp_path, entry):
    """A `linalg.generic` that yields an input or a constant (the transform
    route's layout changes, bias broadcasts and padding fills) is raised as
    transfers or clamps (D-LOW-BCAST, D-LOW-COPYNEST, D-LOW-FILL): exact."""
    rng = np.random.default_rng(17)
    if entry == "transpose":
        x = _rand(rng, (1, 3, 4, 4))
        ins, ref = {"x": x, "y": np.zeros((1, 4, 4, 3), np.float32)}, x.transpose(0, 2, 3, 1)
    elif entry == "bias":
        b = _rand(rng, (8,))
        ins, ref = (
            {"b": b, "y": np.zeros((1, 2, 2, 8), np.float32)},
            np.broadcast_to(b, (1, 2, 2, 8)),
        )
    elif entry == "copy":
        x = _rand(rng, (4, 8))
        ins, ref = {"x": x, "y": np.zeros((4, 8), np.float32)}, x
    else:
        ins, ref = {"y": _rand(rng, (4, 8))}, np.full((4, 8), 1.5, np.float32)
    out = lower_and_run(
        INPUTS / "generic_copies.mlir",
        tmp_path,
        ins,
        ["y"],
        "fell back to compute: none",
        entry=entry,
    )
    assert (out["y"] == ref).all()


@pytest.mark.parametrize(
    "entry,remark",
    [
        ("inner", "1 concat + 1 transfer (broadcast copy)"),
        ("two_inner", "-> 1 concat + 3 transfer (broadcast copy); fell back to compute: none"),
        ("long_inner", "-> 2 concat + 1 transfer (broadcast copy); fell back to compute: none"),
    ],
)
def test_broadcast_inside_a_copied_dimension(tmp_path, entry, remark):
    """Regression (ONNX Expand [3,1] -> [2,3,2], the onnx backend's
    test_expand_shape_model4 and test_operator_repeat): a broadcast dimension
    stored inside a copied one was doubled in place by transfers whose byte
    extents interleave, a program nem-verify rejected (HAZ-02).  The
    innermost such dimension is one concat (D-LOW-BCAST); with two of them,
    or more copies than a concat takes, the doublings happen in a scratch
    that stores the broadcast dimensions outermost.  Each program verifies
    and is exact."""
    from raise_runs import tool

    rng = np.random.default_rng(5)
    # (x's shape, x as broadcast to y, y's shape)
    xs, view, ys = {
        "inner": ((3, 1), (1, 3, 1), (2, 3, 2)),
        "two_inner": ((3, 4), (1, 3, 1, 4, 1), (2, 3, 2, 4, 2)),
        "long_inner": ((3,), (3, 1), (3, 1100)),
    }[entry]
    x = _rand(rng, xs)
    out = lower_and_run(
        INPUTS / "generic_copies.mlir",
        tmp_path,
        {"x": x, "y": np.zeros(ys, np.float32)},
        ["y"],
        remark,
        entry=entry,
    )
    assert (out["y"] == np.broadcast_to(x.reshape(view), ys)).all()
    r = subprocess.run(
        [tool("nem-opt"), str(tmp_path / "prog.nem"), "-p", "nem-verify", "-o", "/dev/null"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and not r.stderr, r.stderr


def test_broadcast_levels(tmp_path):
    """A broadcast of more than 16 copies along a dimension is two levels of
    concats (D-LOW-BCAST-CONCAT): [4] -> [112, 17, 4] is a concat of 5
    copies, one of 2 blocks of 5 and a transfer of the last 2 rows along 17,
    then concats of 7 and of 13 blocks of 8 along 112 (where the seed and
    doublings were 1 + 5 + 7 transfers).  Exact, and nem-verify is clean."""
    from raise_runs import tool

    x = _rand(np.random.default_rng(8), (4,))
    out = lower_and_run(
        INPUTS / "generic_copies.mlir",
        tmp_path,
        {"x": x, "y": np.zeros((112, 17, 4), np.float32)},
        ["y"],
        "-> 4 concat + 1 transfer (broadcast copy)",
        entry="levels",
    )
    assert (out["y"] == np.broadcast_to(x, (112, 17, 4))).all()
    r = subprocess.run(
        [tool("nem-opt"), str(tmp_path / "prog.nem"), "-p", "nem-verify", "-o", "/dev/null"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and not r.stderr, r.stderr


@pytest.mark.parametrize("entry", ["scale", "normalize", "clip"])
@pytest.mark.slow  # 10 s (3 cases)
def test_splat(tmp_path, entry):
    """Scalar constants as splats and rsqrt as div(1, sqrt) (D-LOW-SPLAT):
    every op rounds to f32 as the nest does (sqrt and div correctly
    rounded), so the result equals numpy's f32 evaluation."""
    rng = np.random.default_rng(7)
    x, y = _rand(rng, (4, 8)), np.zeros((4, 8), np.float32)
    f = np.float32
    if entry == "scale":
        ins = {"x": x, "y": y}
        ref = f(-1.5) - x * f(0.25)
    elif entry == "clip":
        x[0, :3] = [np.nan, np.inf, -np.inf]  # a NaN stays NaN, as the nest gives
        ins = {"x": x, "y": y}
        ref = np.minimum(np.maximum(x, f(-1)), f(6))
    else:
        s, v = _rand(rng, (4, 1)), np.abs(_rand(rng, (4, 1)))
        ins = {"x": x, "sum": s, "var": v, "y": y}
        ref = (x - s * f(0.125)) * (f(1) / np.sqrt(v * f(0.125) + f(1e-5)))
    out = lower_and_run(INPUTS / "splat.mlir", tmp_path, ins, ["y"], "clamp", entry=entry)
    assert np.array_equal(out["y"], ref, equal_nan=True)


@pytest.mark.parametrize("entry", ["gelu_f32", "gelu_f16", "row_sub_f16"])
@pytest.mark.slow  # 10 s (3 cases)
def test_gelu_erf_and_concat(tmp_path, entry):
    """ONNX's erf GELU raised to `gelu approximate="none"` (D-LOW-GELU-ERF):
    NEM computes `0.5 x (1 + erf(x / sqrt 2))` wide and rounds once, so it
    equals that formula in f64 rounded to the element type; a row statistic
    broadcast by one `concat` (D-LOW-BCAST-CONCAT) is exact."""
    import math

    rng = np.random.default_rng(11)
    dt = np.float16 if entry.endswith("f16") else np.float32
    x, y = (rng.standard_normal((4, 8)) * 2).astype(dt), np.zeros((4, 8), dt)
    if entry == "row_sub_f16":
        m = _rand(rng, (4, 1), dt)
        ins = {"x": x, "m": m, "y": y}
        ref = x - m
        remark = "concat"
    else:
        ins = {"x": x, "y": y}
        x64 = x.astype(np.float64)
        ref = (0.5 * x64 * (1 + np.vectorize(math.erf)(x64 / math.sqrt(2)))).astype(dt)
        remark = "-> gelu"
    out = lower_and_run(INPUTS / "gelu_concat.mlir", tmp_path, ins, ["y"], remark, entry=entry)
    assert np.array_equal(out["y"], ref)


def _run_unary(tmp_path, mlir: str, x: np.ndarray, remark: str, entry: str) -> np.ndarray:
    """y of `entry` in `mlir` (`y = f(x)`, x's shape and type), lowered with
    `remark` and run (`lower_and_run`)."""
    zeros = np.zeros(x.shape, x.dtype)
    out = lower_and_run(INPUTS / mlir, tmp_path, {"x": x, "y": zeros}, ["y"], remark, entry=entry)
    assert out["y"].dtype == x.dtype
    return out["y"]


@pytest.mark.parametrize("entry", ["nest", "generic"])
@pytest.mark.slow  # 7 s (2 cases)
def test_leaky_relu(tmp_path, entry):
    """LeakyRelu by select raised to `leaky_relu alpha` (D-LOW-LEAKY): the
    same bits as the select computes it in the element type, NaN, -0 and
    infinities included."""
    dt = np.float32 if entry == "nest" else np.float16
    alpha = dt(0.125) if entry == "nest" else dt(0.2)
    x = (np.random.default_rng(5).standard_normal((4, 8)) * 3).astype(dt)
    x[0, :5] = [np.nan, -0.0, np.inf, -np.inf, dt(np.finfo(dt).min)]
    y = _run_unary(tmp_path, "leaky.mlir", x, "-> leaky_relu", entry)
    ref = np.where(x < 0, x * alpha, x) if entry == "nest" else np.where(x > 0, x, alpha * x)
    assert np.array_equal(
        y.view(np.uint16 if dt == np.float16 else np.uint32),
        ref.astype(dt).view(np.uint16 if dt == np.float16 else np.uint32),
    )


@pytest.mark.parametrize("entry", ["relu6", "clip"])
@pytest.mark.slow  # 7 s (2 cases)
def test_clamp(tmp_path, entry):
    """Clip / ReLU6 as `min(max(x, lo), hi)` raised to one `clamp`
    (D-LOW-CLAMP): the same bits as MLIR's `maximumf` and `minimumf` give,
    NaN, signed zeros (a -0 at the bound 0 gives +0, the larger zero) and
    infinities included."""
    dt = np.float16 if entry == "clip" else np.float32
    lo, hi = {"relu6": (0.0, 6.0), "clip": (-1.5, 0.3)}[entry]
    x = (np.random.default_rng(6).standard_normal((4, 8)) * 4).astype(dt)
    x[0, :6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, dt(hi)]
    y = _run_unary(tmp_path, "clamp.mlir", x, "-> clamp; fell back", entry)

    def ordered(a: np.ndarray, b: np.ndarray, pick_larger: bool) -> np.ndarray:
        """maximumf / minimumf: NaN propagates, -0 < +0."""
        larger = (a > b) | ((a == b) & ~np.signbit(a) & np.signbit(b))
        r = np.where(larger == pick_larger, a, b)
        return np.where(np.isnan(a) | np.isnan(b), np.nan, r).astype(a.dtype)

    ref = ordered(ordered(x, np.full_like(x, lo), True), np.full_like(x, hi), False)
    bits = np.uint16 if dt == np.float16 else np.uint32
    assert np.array_equal(np.isnan(y), np.isnan(ref))
    keep = ~np.isnan(ref)
    assert np.array_equal(y.view(bits)[keep], ref.view(bits)[keep])
    assert entry != "relu6" or y[0, 1].view(bits) == 0  # (-0 -> +0)
