"""Partial tiles (D-LOW-PEEL): Inputs/eltwise_partial_tiled.mlir, an f32
elementwise add over 100x64 tiled by upstream mlir-opt with tile-size=32 (32
does not divide 100, so the last row tile has 4 rows, expressed with
affine.min bounds, and upstream's DMAs copy the full 32-row bounding box), is
lowered with the real CLI

    python -m nem.cli.nem_opt IN -p 'lower-to-nem{device=npm_pro_x1}' -t nem -o OUT

run by the reference runtime and compared bit-exactly with numpy (an f32 add
is correctly rounded per element, so X + Y in f32 is the exact reference)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mlir_sources
import numpy as np
import pytest
from lowering_diff import WITH_ADD_SUB, before, lower
from mlir_tools import SKIP_REASON, find_mlir_opt

from nem.passes.lowering.fold_index_arith import FoldIndexArithPass
from nem.runtime import NemInterpreter

INPUTS = Path(__file__).resolve().parents[1] / "lit/lowering/Inputs"
FIXTURE = INPUTS / "eltwise_partial_tiled.mlir"

_no_fold = before(FoldIndexArithPass, WITH_ADD_SUB)
"""`lower-to-nem` without `nem-fold-index-arith`: the conversion evaluates the `arith`."""


def _lower(src: Path, out: Path, options: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "nem.cli.nem_opt",
            str(src),
            "-p",
            f"lower-to-nem{{device=npm_pro_x1 remarks=true{options}}}",
            "-t",
            "nem",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )


def _check_add(program: Path, shape: tuple[int, int], seed: int) -> None:
    """Run a lowered `arg2 = arg0 + arg1` and compare bit-exactly with numpy
    (f32 + f32 is correctly rounded, as the NEM add); the output starts as NaN
    so an element no tile writes shows up."""
    it = NemInterpreter()
    it.load(program)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(shape).astype(np.float32)
    for name, arr in (("arg0", x), ("arg1", y), ("arg2", np.full(shape, np.nan, np.float32))):
        it.write_tensor(name, arr)
    res = it.run()
    assert res.status == "completed" and res.race_count == 0, res.error
    z = it.read_tensor("arg2", shape, np.float32)
    assert np.array_equal(z.view(np.uint32), (x + y).view(np.uint32))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.slow  # 10 s (3 cases)
def test_partial_tile_eltwise_matches_numpy(tmp_path, seed):
    out = tmp_path / "partial.nem"
    r = _lower(FIXTURE, out)
    assert r.returncode == 0, r.stderr
    assert "partial last tile peeled" in r.stderr
    text = out.read_text()
    # the peeled last tile has its own, smaller static shape
    assert "shape=[4, 32]" in text and "shape=[32, 32]" in text
    _check_add(out, (100, 64), seed)


COLS_FIXTURE = INPUTS / "eltwise_partial_cols_tiled.mlir"


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.slow  # 8 s (3 cases)
def test_partial_innermost_tile_eltwise_matches_numpy(tmp_path, seed):
    """Inputs/eltwise_partial_cols_tiled.mlir: 100x100 tiled by 32 along both
    dimensions.  On the last column tile upstream's strided DMA rows copy 32
    elements of which 4 are in the row; they are narrowed to [rows, 4]
    (D-LOW-PEEL), so no tile writes anything outside its own elements and
    every element of the result is x + y, bit-exactly.  The narrowing is
    read with `split-transfers=false` (the column tiles' copies, run few
    times and spanning 12 KiB, are split over the DMAs by default,
    D-NEM-SPLIT-TRANSFERS session 32); the default output is the one run."""
    whole = tmp_path / "whole.nem"
    r = _lower(COLS_FIXTURE, whole, " split-transfers=false")
    assert r.returncode == 0, r.stderr
    assert "narrowed to rows of 4 of 32 elements" in r.stderr
    text = whole.read_text()
    assert "shape=[32, 4], strides=[100, 1]" in text  # last column tile
    assert "shape=[4, 4], strides=[100, 1]" in text  # corner tile
    out = tmp_path / "cols.nem"
    r = _lower(COLS_FIXTURE, out)
    assert r.returncode == 0, r.stderr
    _check_add(out, (100, 100), seed)


STRIDED_ROWS = """
func.func @f(%A: memref<64x100xf32>, %B: memref<64x100xf32>) {
  %c0 = arith.constant 0 : index
  %n = arith.constant 1024 : index
  %st = arith.constant 100 : index
  %per = arith.constant 32 : index
  %a = memref.alloc() : memref<32x32xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  affine.for %j = 0 to 100 step 32 {
    affine.dma_start %A[%c0, %j], %a[%c0, %c0], %tag[%c0], %n, %st, %per : memref<64x100xf32>, memref<32x32xf32, 2>, memref<1xi32>
    affine.dma_wait %tag[%c0], %n : memref<1xi32>
    affine.for %k = 0 to 32 {
      affine.for %l = affine_map<(d0) -> (d0)>(%j) to min affine_map<(d0) -> (d0 + 32, 100)>(%j) {
        %v = affine.load %a[%k, %l - %j] : memref<32x32xf32, 2>
        affine.store %v, %B[%k, %l] : memref<64x100xf32>
      }
    }
  }
  AFTER
  return
}
"""


@pytest.mark.slow  # 3 s
def test_partial_tile_along_strided_rows_of_a_loop_private_buffer(tmp_path):
    """A partial tile along the innermost dimension whose fast buffer is
    allocated outside the peeled loop but used only by it: narrowing the
    strided DMA rows leaves columns that only earlier iterations wrote and
    the last one never reads (D-LOW-PEEL), so it is exact: B[k, :] = A[k, :]
    for the 32 rows the loop copies."""
    src = tmp_path / "cols.mlir"
    src.write_text(STRIDED_ROWS.replace("AFTER", ""))
    out = tmp_path / "cols.nem"
    r = _lower(src, out)
    assert r.returncode == 0, r.stderr
    assert "narrowed to rows of 4 of 32 elements" in r.stderr
    a, b = _run_copy(out, (64, 100))
    assert np.array_equal(b[:32], a[:32]) and np.isnan(b[32:]).all()


def _run_copy(program, shape) -> tuple[np.ndarray, np.ndarray]:
    """Run a lowered copy from A to B (B starts as NaN, so an element no
    task writes shows up): returns (A, B)."""
    it = NemInterpreter()
    it.load(program)
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    it.write_tensor("A", a)
    it.write_tensor("B", np.full(shape, np.nan, np.float32))
    res = it.run()
    assert res.status == "completed" and res.race_count == 0, res.error
    return a, it.read_tensor("B", shape, np.float32)


@pytest.mark.slow  # 3 s
def test_partial_tile_along_strided_rows_is_rejected(tmp_path):
    """The same with the fast buffer read again after the loop: the columns
    a narrowed DMA leaves out would be visible there, so it is rejected with
    the partial-tile diagnostic."""
    src = tmp_path / "cols.mlir"
    src.write_text(
        STRIDED_ROWS.replace(
            "AFTER",
            """%w = affine.load %a[0, 31] : memref<32x32xf32, 2>
  affine.store %w, %B[40, 0] : memref<64x100xf32>""",
        )
    )
    r = _lower(src, tmp_path / "cols.nem")
    assert r.returncode != 0
    assert "max/min loop bounds (partial tiles) are not supported" in r.stderr
    assert "run past the end of a dimension of A" in r.stderr
    assert "is used outside the peeled loop" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.slow  # 8 s (2 cases)
def test_partial_middle_tile_of_a_3d_tile_matches_numpy(tmp_path, seed):
    """Inputs/eltwise_partial_3d_tiled.mlir: 20x36x18 tiled by 16 with a
    4 KiB fast memory, so each strided DMA copies 16 rows of one slice.  On
    the last tile of dimension 1 rows 4..15 of the DMA run into the next
    slice; they are clipped (D-LOW-PEEL), so the write-back does not store
    the fast buffer's unused rows over the next slice, and the result is
    x + y bit-exactly (the output starts as NaN, so a row no tile writes
    shows up too)."""
    out = tmp_path / "3d.nem"
    r = _lower(INPUTS / "eltwise_partial_3d_tiled.mlir", out)
    assert r.returncode == 0, r.stderr
    assert "clipped to 4 of 16 rows (a partial tile along dimension 1 of arg2)" in r.stderr
    _check_add(out, (20, 36, 18), seed)


SPILLED_ROWS = """
func.func @f(%A: memref<4x20x24xf32>, %B: memref<4x20x24xf32>) {
  %c0 = arith.constant 0 : index
  %n = arith.constant 256 : index
  %st = arith.constant 24 : index
  %per = arith.constant 16 : index
  %a = memref.alloc() : memref<16x16xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 20 step 16 {
      affine.dma_start %A[%i, %j, %c0], %a[%c0, %c0], %tag[%c0], %n, %st, %per : memref<4x20x24xf32>, memref<16x16xf32, 2>, memref<1xi32>
      affine.dma_wait %tag[%c0], %n : memref<1xi32>
      affine.for %r = affine_map<(d0) -> (d0)>(%j) to min affine_map<(d0) -> (d0 + 16, 20)>(%j) {
        affine.for %c = 0 to 16 {
          %v = affine.load %a[%r - %j, %c] : memref<16x16xf32, 2>
          affine.store %v, %B[%i, %r, %c] : memref<4x20x24xf32>
        }
      }
      INSIDE
    }
  }
  AFTER
  return
}
"""


@pytest.mark.slow  # 3 s
def test_rows_spilling_into_the_next_slice_are_clipped(tmp_path):
    """A hand-written strided DMA of 16 rows of 16 from A[i, j, 0] (rows 24
    apart): on the last j tile (rows 16..19 of 20) rows 4..15 run into slice
    i + 1, and on i = 3 past the end of A.  The DMA is clipped to the 4 rows
    the loop copies (D-LOW-PEEL): B[:, :, :16] = A[:, :, :16]."""
    src = tmp_path / "rows.mlir"
    src.write_text(SPILLED_ROWS.replace("INSIDE", "").replace("AFTER", ""))
    out = tmp_path / "rows.nem"
    r = _lower(src, out)
    assert r.returncode == 0, r.stderr
    assert "clipped to 4 of 16 rows (a partial tile along dimension 1 of A)" in r.stderr
    assert "shape=[4, 16], strides=[24, 1]" in out.read_text()
    a, b = _run_copy(out, (4, 20, 24))
    assert np.array_equal(b[:, :, :16], a[:, :, :16]) and np.isnan(b[:, :, 16:]).all()


@pytest.mark.parametrize(
    "inside,after,why",
    [
        # the iteration reads a row of the fast buffer that the clipped DMA leaves out
        (
            """%w = affine.load %a[15, 0] : memref<16x16xf32, 2>
      affine.store %w, %B[%i, 0, 20] : memref<4x20x24xf32>""",
            "",
            "cannot be narrowed to 4 rows of 16 of 16 elements: another access to a may use "
            "the elements left out",
        ),
        # the fast buffer is read after the loop, where the rows left out would show
        (
            "",
            """%w = affine.load %a[15, 0] : memref<16x16xf32, 2>
  affine.store %w, %B[0, 0, 20] : memref<4x20x24xf32>""",
            "a is used outside the peeled loop",
        ),
    ],
)
@pytest.mark.slow  # 6 s (2 cases)
def test_rows_spilling_into_the_next_slice_rejected_when_used(tmp_path, inside, after, why):
    """The same DMA when the rows it would leave out are used: rejected with
    the partial-tile diagnostic and the reason, never clipped."""
    src = tmp_path / "rows.mlir"
    src.write_text(SPILLED_ROWS.replace("INSIDE", inside).replace("AFTER", after))
    r = _lower(src, tmp_path / "rows.nem")
    assert r.returncode != 0
    assert "max/min loop bounds (partial tiles) are not supported" in r.stderr
    assert why in r.stderr
    assert "Traceback" not in r.stderr


def _upstream_matmul(tmp_path, m: int, n: int, k: int, passes: list[str]):
    """An f32 matmul tiled by real upstream mlir-opt with `passes` and
    lowered with the CLI; runs it on inputs on a 1/8 grid (every f32 partial
    sum exact, so the tiled accumulation order cannot change the result) and
    compares with numpy.  Returns the lowering's stderr (the remark)."""
    src, tiled, out = tmp_path / "mm.mlir", tmp_path / "tiled.mlir", tmp_path / "mm.nem"
    src.write_text(mlir_sources.matmul(m, n, k, "f32"))
    subprocess.run([find_mlir_opt(), str(src), *passes, "-o", str(tiled)], check=True)
    r = _lower(tiled, out)
    assert r.returncode == 0, r.stderr
    args = mlir_sources.inputs("matmul", [(m, k), (k, n), (m, n)], "f32", seed=1)
    it = NemInterpreter()
    it.load(out)
    for i, a in enumerate(args):
        it.write_tensor(f"arg{i}", a)
    res = it.run()
    assert res.status == "completed" and res.race_count == 0, res.error
    _, want = mlir_sources.reference("matmul", args)
    assert np.array_equal(it.read_tensor("arg2", (m, n), np.float32), want)
    return r.stderr


@pytest.mark.skipif(find_mlir_opt() is None, reason=SKIP_REASON)
@pytest.mark.slow  # 5 s
def test_non_dividing_matmul_from_upstream_matches_numpy(tmp_path):
    """A 100x100x100 matmul tiled by 32 with real upstream mlir-opt (partial
    tiles in every dimension, K included) lowers and runs exactly."""
    _upstream_matmul(
        tmp_path,
        100,
        100,
        100,
        [
            "-affine-loop-tile=tile-size=32",
            "-affine-data-copy-generate=generate-dma=true fast-mem-space=2 fast-mem-capacity=16",
            "--mlir-print-op-generic",
        ],
    )


@pytest.mark.parametrize("fixture", ["eltwise_tiled_nodma.mlir", "eltwise_partial_pipelined.mlir"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.slow  # 14 s (4 cases)
def test_partial_tiles_of_copy_nests_and_pipelined_loops(tmp_path, fixture, seed):
    """100x60 f32 add tiled by 32 (partial last row and column tiles) by
    upstream mlir-opt: with generate-dma=false (copy nests -> transfers,
    D-LOW-COPYNEST) and with -affine-pipeline-data-transfer (the re-rolled
    double-buffered loop peels its partial last tile, D-LOW-PEEL).  Every
    element of the result is x + y, bit-exactly."""
    out = tmp_path / "out.nem"
    r = _lower(INPUTS / fixture, out)
    assert r.returncode == 0, r.stderr
    assert "partial last tile peeled" in r.stderr
    _check_add(out, (100, 60), seed)


@pytest.mark.skipif(find_mlir_opt() is None, reason=SKIP_REASON)
@pytest.mark.slow  # 4 s
def test_strided_row_past_the_memref_end_outside_a_peeled_tile(tmp_path):
    """A 31x45x56 matmul tiled by 24 and double-buffered with a 16 KiB fast
    memory: upstream unrolls the two-iteration N loop, and the second N tile's
    strided DMA of B copies rows of 24 from column 24 of 45, so its last row
    runs past the end of B in the middle.  Dropping that whole row once gave
    581 wrong elements; the rows are narrowed to 21 columns with the function
    as the scope of the exactness checks (D-LOW-PEEL), and the result is
    exact."""
    remark = _upstream_matmul(
        tmp_path,
        31,
        45,
        56,
        [
            "-affine-loop-tile=tile-size=24",
            "-affine-data-copy-generate=generate-dma=true fast-mem-space=2 fast-mem-capacity=16",
            "-affine-pipeline-data-transfer",
        ],
    )
    assert "narrowed to rows of 21 of 24 elements" in remark


MIN_OF_OFFSET = """
func.func @main(%A: memref<48xf32>, %B: memref<48xf32>) {
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  affine.for %T = 0 to 48 step 16 {
OFFSET
    %m = affine.min affine_map<(d0) -> (16, -d0 + 44)>(%o)
    %s = memref.subview %A[%T] [%m] [1] : memref<48xf32> to memref<?xf32, strided<[1], offset: ?>>
    %d = memref.subview %B[%T] [%m] [1] : memref<48xf32> to memref<?xf32, strided<[1], offset: ?>>
    memref.copy %s, %d : memref<?xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
  }
  return
}
"""
"""A copy of `A[T : T + min(16, 40 - T)]` per tile of 16: the last tile is
partial (8 elements), the min's operand `%o = T + 4` computed by `OFFSET`."""

ARITH_OFFSET = """\
    %d2 = arith.muli %T, %c2 : index
    %e = arith.subi %d2, %T : index
    %o = arith.addi %e, %c4 : index"""
APPLY_OFFSET = "    %o = affine.apply affine_map<(d0) -> (d0 * 2 - d0 + 4)>(%T)"


@pytest.mark.slow  # 3 s
def test_a_min_of_arith_peels_as_a_min_of_an_apply(tmp_path):
    """The peeling decision reads `arith.muli`/`subi`/`addi` as it reads
    an `affine.apply` (D-LOW-AFFINE, session 34; before, the `arith` form
    was rejected at the min, the apply form peeled): both forms lower to
    the same `.nem`, with the pipeline and with the conversion alone (no
    `nem-fold-index-arith`: the conversion evaluates the `arith`), and the
    peeled program copies exactly the 40 elements the tiles cover."""
    outs = []
    for name, offset in (("arith", ARITH_OFFSET), ("apply", APPLY_OFFSET)):
        src, out = tmp_path / f"{name}.mlir", tmp_path / f"{name}.nem"
        src.write_text(MIN_OF_OFFSET.replace("OFFSET", offset))
        r = _lower(src, out)
        assert r.returncode == 0, r.stderr
        assert "partial last tile peeled" in r.stderr
        outs.append(out.read_text())
    assert outs[0] == outs[1] and "shape=[8]" in outs[0]
    unfolded = lower(MIN_OF_OFFSET.replace("OFFSET", ARITH_OFFSET), "main", _no_fold)
    assert unfolded[0] == outs[0]
    a, b = _run_copy(tmp_path / "arith.nem", (48,))
    assert np.array_equal(b[:40].view(np.uint32), a[:40].view(np.uint32))
    assert np.isnan(b[40:]).all()
