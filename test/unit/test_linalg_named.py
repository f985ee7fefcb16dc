"""Named linalg contractions as upstream writes them (D-LOW-LINALG-NAMED):
inputs narrower than the output (an i8 x i8 matmul into i32, an f16
convolution into f32) and convolutions without `strides`/`dilations`
(upstream omits them when they are 1).  xDSL 0.74 refused all three (a
body that does not verify, an AssertionError, a missing property); they
lower, run and match numpy.  The mixed-type ops have no NEM variant on the
device, so they are escape-hatch tasks with that reason; the f32
convolution is raised."""

from __future__ import annotations

import numpy as np
import pytest
from raise_runs import INPUTS, lower_and_run, rand

MIXED = INPUTS / "mixed_types.mlir"


def _conv_nhwc(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    kh, kw = w.shape[:2]
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    y = np.zeros((x.shape[0], oh, ow, w.shape[3]))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum(
                "nhwc,cf->nhwf",
                x[:, i : i + oh, j : j + ow, :].astype(np.float64),
                w[i, j].astype(np.float64),
            )
    return y


@pytest.mark.slow  # 5 s
def test_i8_matmul_into_i32(tmp_path) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (16, 32)).astype(np.int8)
    b = rng.integers(-128, 128, (32, 24)).astype(np.int8)
    c = np.zeros((16, 24), np.int32)
    out = lower_and_run(
        MIXED,
        tmp_path,
        {"a": a, "b": b, "c": c},
        ["c"],
        "no matmul variant for i32/i8 on device npm_pro_x1",
        entry="mm_i8",
    )
    np.testing.assert_array_equal(out["c"], a.astype(np.int32) @ b.astype(np.int32))


@pytest.mark.slow  # 6 s
def test_f16_conv_into_f32(tmp_path) -> None:
    rng = np.random.default_rng(1)
    x, w = rand(rng, (1, 6, 6, 4), np.float16), rand(rng, (3, 3, 4, 8), np.float16)
    y = np.zeros((1, 4, 4, 8), np.float32)
    out = lower_and_run(
        MIXED,
        tmp_path,
        {"x": x, "w": w, "y": y},
        ["y"],
        "no conv2d variant for f16/f32",
        entry="conv_f16_f32",
    )
    # products of f16 are exact in f32; only the f32 sums round
    np.testing.assert_allclose(out["y"], _conv_nhwc(x, w), rtol=0, atol=1e-5)


@pytest.mark.slow  # 4 s
def test_conv_without_strides_is_raised(tmp_path) -> None:
    rng = np.random.default_rng(2)
    x, w = rand(rng, (1, 4, 6, 6)), rand(rng, (8, 4, 3, 3))
    y = np.zeros((1, 8, 4, 4), np.float32)
    out = lower_and_run(
        MIXED, tmp_path, {"x": x, "w": w, "y": y}, ["y"], "-> conv2d", entry="conv_default_strides"
    )
    ref = _conv_nhwc(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(out["y"], ref, rtol=0, atol=1e-4)


@pytest.mark.parametrize("route", ["affine", "transform"])
@pytest.mark.slow  # 5 s (2 cases)
def test_i8_matmul_compiles_on_both_routes(tmp_path, route) -> None:
    """`nem-compile` on the i8 matmul: the transform route kept
    `linalg.matmul`, whose kernel xDSL printed with an ill-typed body, and
    `nem-run` refused it (EXEC-03); the affine route reported 'the store
    does not cover the iteration space once' for the widened operands."""
    import subprocess

    from raise_runs import tool

    src = tmp_path / "mm.mlir"
    src.write_text(MIXED.read_text().split("func.func @conv_f16_f32")[0])
    nem = tmp_path / "mm.nem"
    r = subprocess.run(
        [tool("nem-compile"), str(src), "--route", route, "-o", str(nem), "-v", "--no-progress"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "no matmul variant for i32/i8" in r.stderr, r.stderr
    assert "by FLOPs: n/a" in r.stderr, r.stderr
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (16, 32)).astype(np.int8)
    b = rng.integers(-128, 128, (32, 24)).astype(np.int8)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    r = subprocess.run(
        [
            tool("nem-run"),
            str(nem),
            "--input",
            f"a={tmp_path / 'a.npy'}",
            "--input",
            f"b={tmp_path / 'b.npy'}",
            "--output",
            f"c={tmp_path / 'c.npy'}",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    c = np.load(tmp_path / "c.npy").reshape(16, 24)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


@pytest.mark.parametrize(
    "entry,reason",
    [("mm_i8", "no matmul variant for i32/i8"), ("conv_f16_f32", "no conv2d variant for f16/f32")],
)
@pytest.mark.slow  # 3 s (2 cases)
def test_widened_nests_give_the_variant_reason(tmp_path, entry, reason) -> None:
    """The same ops as loop nests (`-convert-linalg-to-affine-loops`): a
    product of widened loads is matched as the matmul or convolution of the
    narrow operands, so the remark gives the device's reason (it said 'the
    store does not cover the iteration space once' / 'a product of something
    other than two loads')."""
    import subprocess

    from raise_runs import mlir_opt, tool

    opt = mlir_opt()
    if opt is None:
        pytest.skip("needs mlir-opt (the mlir extra)")
    nest = tmp_path / "nest.mlir"
    r = subprocess.run(
        [opt, str(MIXED), "-convert-linalg-to-affine-loops", "-o", str(nest)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [
            tool("nem-opt"),
            str(nest),
            "-p",
            f"lower-to-nem{{device=npm_pro_x1 remarks=true entry={entry}}}",
            "-t",
            "nem",
            "-o",
            str(tmp_path / "n.nem"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert f'runs as an escape-hatch task (compute op="mlir.kernel"): {reason}' in r.stderr, (
        r.stderr
    )
