"""End-to-end differential tests of the MLIR -> NEM lowering (issue 5, "How it
will be checked"): each fixture under test/lit/lowering/Inputs (and
fallback_and_linalg.mlir) is lowered with the real CLI

    nem-opt IN.mlir -p 'lower-to-nem{device=npm_pro_x1}' -t nem -o OUT.nem

then run by the reference runtime (`NemInterpreter`, and `nem-run` for one
fixture) on seeded random inputs, and its outputs are compared with an
independent numpy reference of the *original* MLIR computation computed from
the same inputs.

Numerics (docs/spec-decisions.md, D-NUM-FLOAT, D-NUM-LINEAR-FLOAT,
D-RT-MLIR-KERNEL):
* integer paths and f32 elementwise paths are compared bit-exactly (an f32 add
  is correctly rounded, and an escape-hatch kernel rounds after every op);
* f32 matmuls are compared bit-exactly against the *recorded* rounding of the
  lowered program: per K-tile `T = f32(sum of the tile's products in f64)`,
  then `C = f32(C + T)` tile by tile in ascending K order (D-LOW-ACCUM).  The
  float inputs are drawn on the grid k * 2^-24 in [-1, 1), so every product is
  a multiple of 2^-48 below 1 in magnitude and every partial sum of these
  sizes is exact in f64: the reference does not depend on the BLAS summation
  order.  Against the whole-tensor f64 reference rounded once (the "ideal"
  result) the lowered program differs by the nt + 1 roundings to f32 it
  performs (nt K-tiles, one rounding of each tile sum and of each
  accumulation): |C - f32(C0 + A@B)| <= (nt + 2) * 2^-24 * (|C0| + |A|@|B|)
  elementwise (first-order bound with one spare rounding for the final f32
  rounding of the ideal value and the second-order terms), which is asserted
  too.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from lowering_runs import (
    INPUTS,
    LOWERING,
    U32,
    check_add,
    f32,
    grid_f32,
    lower,
    race_free,
    run_ok,
    start,
    tool,
)

# elementwise (f32 add: correctly rounded, bit-exact)

ELTWISE = [
    ("eltwise_add.mlir", ("X", "Y", "Z")),
    ("eltwise_tiled.mlir", ("arg0", "arg1", "arg2")),
    ("eltwise_tiled_pipelined.mlir", ("arg0", "arg1", "arg2")),
]


@pytest.mark.parametrize("fixture,names", ELTWISE, ids=[f for f, _ in ELTWISE])
@pytest.mark.slow  # 10 s (3 cases)
def test_eltwise_add_bit_exact(tmp_path, fixture, names):
    """Z = X + Y in f32: correctly rounded, bit-exact."""
    # RULE: HAZ-03
    nem = lower(INPUTS / fixture, tmp_path / "out.nem")
    it = start(nem, seed=11)
    x_name, y_name, z_name = names
    # the inputs the run sees, read back from the interpreter's DDR buffers
    x = it.read_tensor(x_name, (1024, 512), np.float32)
    y = it.read_tensor(y_name, (1024, 512), np.float32)
    run_ok(it)
    z = it.read_tensor(z_name, (1024, 512), np.float32)
    np.testing.assert_array_equal(z, f32(x.astype(np.float64) + y))
    np.testing.assert_array_equal(it.read_tensor(x_name, (1024, 512), np.float32), x)


@pytest.mark.slow  # 4 s
def test_eltwise_1d_pipelined_overlaps_iterations(tmp_path):
    # RULE: HAZ-03
    # contiguous tiles: ping-pong slots under @max_in_flight(2), race-free
    nem = lower(INPUTS / "eltwise_1d_pipelined.mlir", tmp_path / "out.nem")
    assert "@max_in_flight(2)" in nem.read_text()
    it = start(nem, seed=6)
    x = it.read_tensor("arg0", (65536,), np.float32)
    y = it.read_tensor("arg1", (65536,), np.float32)
    res = run_ok(it)
    assert max(res.max_active_iterations.values()) == 2
    np.testing.assert_array_equal(
        it.read_tensor("arg2", (65536,), np.float32), f32(x.astype(np.float64) + y)
    )
    race_free(lambda: start(nem, seed=6), k=20)


def test_async_pipeline(tmp_path):
    check_add(lower(INPUTS / "async_pipeline.mlir", tmp_path / "out.nem"), (64, 64), seed=5)


# ---------------------------------------------------------------------------
# f32 matmul: bit-exact against the recorded tile rounding, bounded against f64


def matmul_reference(a, b, c0, tile: int | None):
    """The lowered program's rounding (module doc) and the ideal f64 result."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    k = a.shape[1]
    tile = tile or k
    c = c0.copy()
    for k0 in range(0, k, tile):
        t = f32(a64[:, k0 : k0 + tile] @ b64[k0 : k0 + tile, :])  # exact f64 sums (grid inputs)
        c = f32(c.astype(np.float64) + t)
    ideal = f32(c0.astype(np.float64) + a64 @ b64)
    bound = (k // tile + 2) * U32 * (np.abs(c0.astype(np.float64)) + np.abs(a64) @ np.abs(b64))
    return c, ideal, bound


MATMUL = [
    ("matmul.mlir", ("A", "B", "C"), None),
    ("matmul_tiled.mlir", ("arg0", "arg1", "arg2"), 32),
    ("matmul_tiled_pipelined.mlir", ("arg0", "arg1", "arg2"), 32),
    # D-LOW-TILES: the tiled nest over whole operands in fast memory
    ("matmul_tiled_hoisted.mlir", ("arg0", "arg1", "arg2"), 32),
]


@pytest.mark.parametrize("fixture,names,tile", MATMUL, ids=[f for f, _, _ in MATMUL])
@pytest.mark.slow  # 9 s (4 cases)
def test_matmul_f32(tmp_path, fixture, names, tile):
    nem = lower(INPUTS / fixture, tmp_path / "out.nem")
    it = start(nem, seed=3)
    rng = np.random.default_rng(3)
    a, b, c0 = (grid_f32(rng, (256, 256)) for _ in range(3))
    for name, arr in zip(names, (a, b, c0)):
        it.write_tensor(name, arr)
    run_ok(it)
    c = it.read_tensor(names[2], (256, 256), np.float32)
    want, ideal, bound = matmul_reference(a, b, c0, tile)
    np.testing.assert_array_equal(c, want)
    err = np.abs(c.astype(np.float64) - ideal)
    assert np.all(err <= bound)


@pytest.mark.slow  # 5 s
def test_tiled_matmul_schedules(tmp_path):
    # RULE: HAZ-03
    nem = lower(INPUTS / "matmul_tiled_pipelined.mlir", tmp_path / "out.nem")
    race_free(lambda: start(nem, seed=1), k=20)


def test_eltwise_pipelined_schedules(tmp_path):
    # RULE: HAZ-03
    nem = lower(INPUTS / "eltwise_tiled_pipelined.mlir", tmp_path / "out.nem")
    race_free(lambda: start(nem, seed=1), k=20)


# ---------------------------------------------------------------------------
# the escape hatch (compute op="mlir.kernel"), through the runtime


def test_fallback_and_linalg(tmp_path):
    nem = lower(LOWERING / "fallback_and_linalg.mlir", tmp_path / "out.nem")
    assert 'op="mlir.kernel"' in nem.read_text()
    it = start(nem, seed=9)
    rng = np.random.default_rng(9)
    x, w = grid_f32(rng, (128, 64)), grid_f32(rng, (32, 32))
    it.write_tensor("X", x)
    it.write_tensor("W", w)
    res = run_ok(it)
    assert res.counts.get("compute") == 4
    # the nest: z = maxnum(x * x, 0.5) in f32, each op rounded (MLIR arith semantics)
    x64 = x.astype(np.float64)
    z_want = np.maximum(f32(x64 * x64), np.float32(0.5))
    np.testing.assert_array_equal(it.read_tensor("Z", (128, 64), np.float32), z_want)
    # linalg.add V = W + W, then linalg.matmul V += W @ W (D-LOW-ACCUM)
    w64 = w.astype(np.float64)
    v0 = f32(w64 + w64)
    v_want, ideal, bound = matmul_reference(w, w, v0, None)
    v = it.read_tensor("V", (32, 32), np.float32)
    np.testing.assert_array_equal(v, v_want)
    assert np.all(np.abs(v.astype(np.float64) - ideal) <= bound)
    race_free(lambda: start(nem, seed=9), k=4)  # kernels interpret per element: keep K small


def test_fallback_index_args_int_wraps(tmp_path):
    """An i32 nest that uses the outer index: index_args evaluated per
    iteration; `arith.muli`/`subi` wrap at 32 bits, bit-exact."""
    nem = lower(INPUTS / "fallback_index.mlir", tmp_path / "out.nem")
    assert "index_args=[t * 32]" in nem.read_text()
    it = start(nem, seed=4)
    rng = np.random.default_rng(4)
    x = rng.integers(-(2**31), 2**31, size=(128, 64), dtype=np.int64).astype(np.int32)
    x[:64] = rng.integers(-1000, 1000, size=(64, 64))  # half without overflow
    it.write_tensor("X", x)
    run_ok(it)
    rows = np.arange(128, dtype=np.int64)[:, None]
    want = ((x.astype(np.int64) ** 2 - rows) % 2**32).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(it.read_tensor("Z", (128, 64), np.int32), want)


@pytest.mark.slow  # 6 s
def test_nem_run_cli_npy_roundtrip(tmp_path):
    """`nem-run OUT.nem --input arg0=a.npy --output argN=FILE.npy` on a lowered fixture."""
    nem = lower(INPUTS / "fallback_index.mlir", tmp_path / "out.nem")
    rng = np.random.default_rng(8)
    x = rng.integers(-1000, 1000, size=(128, 64)).astype(np.int32)
    np.save(tmp_path / "x.npy", x)
    r = subprocess.run(
        [
            tool("nem-run"),
            str(nem),
            "--random-inputs",
            "8",
            "--input",
            f"X={tmp_path / 'x.npy'}",
            "--output",
            f"Z={tmp_path / 'z.npy'}",
            "--schedules",
            "3",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "final memory: identical across all schedules" in r.stdout
    z = np.load(tmp_path / "z.npy").view(np.int32).reshape(128, 64)
    rows = np.arange(128, dtype=np.int64)[:, None]
    np.testing.assert_array_equal(z, (x.astype(np.int64) ** 2 - rows).astype(np.int32))


@pytest.mark.parametrize(
    "fixture,shape", [("async_tiles_group.mlir", (128, 64)), ("async_token_chain.mlir", (128,))]
)
def test_async_executes_in_loops(tmp_path, fixture, shape):
    """async.execute inside loops, joined by a group or chained through a
    loop-carried token (D-LOW-ASYNC): bit-exact, race-free under random
    schedules."""
    check_add(
        lower(INPUTS / fixture, tmp_path / "out.nem"),
        shape,
        seed=4,
        y="Y" if len(shape) == 2 else None,
    )


def test_affine_if_kernel(tmp_path):
    """Inputs/affine_if_nest.mlir: an escape-hatch kernel with affine.if
    (custom syntax, else region with a result), bit-exact against numpy."""
    nem = lower(INPUTS / "affine_if_nest.mlir", tmp_path / "out.nem")
    it = start(nem, seed=2)
    x = it.read_tensor("X", (16, 24), np.float32)
    run_ok(it)
    i, j = np.indices((16, 24))
    want = np.where((i >= 4) & (j <= 19), x, -x)
    want[0, :] = 1.0
    np.testing.assert_array_equal(it.read_tensor("Z", (16, 24), np.float32), want)


SCALE = """
func.func @scale(%X: memref<64x32xf32>, %S: memref<2xf32>, %Z: memref<64x32xf32>) {
  %c1 = arith.constant 1 : index
  %s = memref.load %S[%c1] : memref<2xf32>
  affine.for %i = 0 to 64 step 16 {
    affine.for %ii = affine_map<(d0) -> (d0)>(%i) to affine_map<(d0) -> (d0 + 16)>(%i) {
      affine.for %j = 0 to 32 {
        %x = affine.load %X[%ii, %j] : memref<64x32xf32>
        %m = arith.mulf %x, %s : f32
        affine.store %m, %Z[%ii, %j] : memref<64x32xf32>
      }
    }
  }
  return
}
"""


def test_scalar_loaded_before_the_nest(tmp_path):
    """A scale factor loaded once before a tiled nest: the load has no task
    of its own; each escape-hatch kernel that uses it loads it
    (D-LOW-ESCAPE), so S is an input of the kernels.  Bit-exact (one f32
    multiply per element)."""
    src = tmp_path / "scale.mlir"
    src.write_text(SCALE)
    nem = lower(src, tmp_path / "out.nem")
    assert "region(S, 0, 8)" in nem.read_text()
    it = start(nem, seed=3)
    x = it.read_tensor("X", (64, 32), np.float32)
    s = it.read_tensor("S", (2,), np.float32)
    run_ok(it)
    np.testing.assert_array_equal(it.read_tensor("Z", (64, 32), np.float32), x * s[1])
