"""Differential sweep of the MLIR -> NEM lowering over inputs the fixtures do
not cover (issue 5: "inputs written by someone else (other shapes, tile
sizes, memory-space maps, async pipelines) will be lowered and run the same
way"): a source program from `mlir_sources` is tiled by real upstream
`mlir-opt` with the given passes, lowered with the CLI

    nem-opt tiled.mlir -p 'lower-to-nem{device=npm_pro_x1 ...}' -t nem -o out.nem

checked with `nem-opt out.nem -p nem-verify`, run by the reference runtime
on random inputs and compared with numpy,
bit-exactly (the inputs keep every float sum exact, see `mlir_sources.inputs`).

The default cases run in CI (each one a different lowering path); set
NEM_SWEEP=full to run the whole grid (shapes x tile sizes x pipelining x
element types x ops, about 180 programs, several minutes), or
NEM_SWEEP=random:SEED:COUNT for COUNT random programs (shapes, tile sizes,
fast-mem-capacity, DMA or copy loops, pipelining)."""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys

import mlir_sources as src
import numpy as np
import pytest
from mlir_tools import SKIP_REASON, find_mlir_opt

from nem.runtime import NemInterpreter

MLIR_OPT = find_mlir_opt()
pytestmark = pytest.mark.skipif(MLIR_OPT is None, reason=SKIP_REASON)


def tiling(
    tile, space: int = 2, capacity: int | None = 64, dma: bool = True, pipeline: bool = False
) -> list[str]:
    """Upstream's tiling passes: -affine-loop-tile (one size, or "a,b,c"),
    -affine-data-copy-generate, optionally -affine-pipeline-data-transfer."""
    passes = []
    if tile is not None:
        key = "tile-sizes" if "," in str(tile) else "tile-size"
        passes.append(f"-affine-loop-tile={key}={tile}")
    opts = f"generate-dma={'true' if dma else 'false'} fast-mem-space={space}"
    if capacity is not None:
        opts += f" fast-mem-capacity={capacity}"
    passes.append(f"-affine-data-copy-generate={opts}")
    return passes + (["-affine-pipeline-data-transfer"] if pipeline else [])


def case(
    kind: str, dims, t: str, passes: list[str], spaces: str | None = None, op: str | None = None
):
    """(id, source text, upstream passes, kind, operand shapes, type, spaces)."""
    if kind == "matmul":
        m, n, k = dims
        text, shapes = src.matmul(m, n, k, t), [(m, k), (k, n), (m, n)]
    elif kind == "linalg.matmul":
        m, n, k = dims
        text, shapes = src.linalg_matmul(m, n, k, t), [(m, k), (k, n), (m, n)]
        passes = ["-convert-linalg-to-affine-loops", *passes]
        kind = "matmul"
    elif kind == "relu":
        text, shapes = src.relu(dims, t), [dims, dims]
    elif kind == "add_relu":
        text, shapes = src.add_relu(dims, t), [dims, dims, dims]
    else:
        text, shapes = src.eltwise(dims, t, op), [dims, dims, dims]
        kind = op
    ident = "-".join(
        [
            kind,
            "x".join(map(str, dims)),
            t,
            *(p.lstrip("-").split("=", 1)[-1].replace(" ", ",") for p in passes),
        ]
        + ([spaces.strip('"')] if spaces else [])
    )
    return pytest.param(text, passes, kind, shapes, t, spaces, id=ident)


DEFAULT = [
    # nested double-buffered loops, partial tiles in every dimension
    case("matmul", (100, 100, 100), "f32", tiling(32, pipeline=True)),
    case("matmul", (96, 80, 48), "f32", tiling(16)),
    case("matmul", (64, 96, 128), "f32", tiling("16,32,64", pipeline=True)),
    # the command as written: no capacity, the tiled nest over whole operands
    case("matmul", (72, 40, 56), "f32", tiling(16, capacity=None)),
    case("linalg.matmul", (64, 64, 64), "f32", tiling(32, capacity=None)),
    # f16: `matmul in A, B, C out C` is legal (no scratch accumulator)
    case("matmul", (24, 16, 16), "f16", tiling(8, pipeline=True)),
    # i32 matmul has no NMU variant: per-tile escape-hatch kernels, here on
    # partial innermost tiles whose strided DMAs are narrowed (D-LOW-PEEL)
    case("matmul", (24, 16, 16), "i32", tiling(8)),
    case("matmul", (20, 20, 20), "i32", tiling(8, capacity=1)),
    case("eltwise", (10, 12, 14), "i32", tiling(16, pipeline=True), op="max"),
    case("eltwise", (100,), "f32", tiling(32), op="mul"),
    case("eltwise", (100, 60), "f16", tiling(32, dma=False), op="sub"),
    case("relu", (64, 100), "f32", tiling(32, pipeline=True)),
    # a fused bias add + relu: two raised ops per tile through a scratch buffer
    case("add_relu", (100, 60), "f32", tiling(32, pipeline=True)),
    case("add_relu", (48, 40), "i32", tiling(16)),
    # tiled only (compute on the DDR buffers), then normalized: unit-step tile loops
    case(
        "matmul", (64, 48, 32), "f32", ["-affine-loop-tile=tile-size=16", "-affine-loop-normalize"]
    ),
    case(
        "eltwise",
        (100, 60),
        "f32",
        ["-affine-loop-tile=tile-size=32", "-affine-loop-normalize"],
        op="add",
    ),
    # tiny fast memory (fast-mem-capacity=1 KiB): one-row DMAs of a partial
    # innermost tile narrowed, one-element copies, an epilogue after a loop
    # whose bound moves with an outer loop
    case("matmul", (9, 7, 20), "f32", tiling(8, capacity=1)),
    case("matmul", (9, 7, 20), "f32", tiling(8, capacity=1, dma=False)),
    case("eltwise", (14, 40), "f32", tiling(16, capacity=1, pipeline=True), op="add"),
    case("eltwise", (26, 34, 6), "f32", tiling(24, capacity=None), op="max"),
    case("add_relu", (19, 37, 7), "f32", tiling(8, capacity=1, pipeline=True)),
    # 3-D tiles of one slice per DMA (4-16 KiB fast memory): on partial
    # tiles of the middle dimension the strided rows run into the next
    # slice and are clipped, on the last one past the memref's end; partial
    # tiles of several dimensions at once (D-LOW-PEEL)
    case("add_relu", (20, 36, 18), "f32", tiling(16, capacity=4)),
    case("relu", (32, 17, 18), "f32", tiling(16, capacity=4, pipeline=True)),
    case("add_relu", (8, 10, 21), "f32", tiling(8, capacity=16, pipeline=True)),
    # clean-ups after pipelining: loop-invariant index arithmetic hoisted
    # out of the epilogue, canonicalized bounds
    case(
        "relu",
        (32, 17, 18),
        "f32",
        tiling(16, capacity=4, pipeline=True) + ["-affine-loop-invariant-code-motion"],
    ),
    case(
        "matmul",
        (40, 36, 20),
        "f32",
        tiling(16, capacity=16, pipeline=True) + ["-canonicalize", "-cse"],
    ),
    # -canonicalize folds the last K tile's bounds in the epilogue to
    # constants (80 to 82): the epilogue is no longer the body at the last
    # iteration and is lowered on its own (D-LOW-PIPE)
    case(
        "matmul",
        (17, 10, 82),
        "f32",
        tiling(16, space=1, capacity=1, pipeline=True) + ["-canonicalize", "-cse"],
        '"0:DDR,1:L1"',
    ),
    # the same for a nest with a write-back after the epilogue, whose tasks
    # must be ordered after the epilogue's (a hazard nem-verify found once)
    case(
        "matmul",
        (31, 65, 78),
        "f32",
        tiling(24, space=1, capacity=16, pipeline=True) + ["-affine-simplify-structures"],
        '"0:DDR,1:L1"',
    ),
    # a contiguous DMA of whole rows of a 3-D tile whose innermost tile loop
    # has one iteration (its variable is 0): narrowed on the partial tile
    # of the middle dimension
    case(
        "relu",
        (21, 37, 16),
        "f32",
        tiling(16, space=1, capacity=16, pipeline=True) + ["-affine-simplify-structures"],
        '"0:DDR,1:L1"',
    ),
    # upstream unrolls the double-buffered loop over dimension 1 (29 = 16 +
    # 13): outside any peeled loop, the second tile's rows of 16 x 14 run 3
    # rows into the next slice and are narrowed; the write-back once stored
    # them over the next slice (628 wrong elements)
    case(
        "add_relu",
        (37, 29, 14),
        "i32",
        tiling(16, space=1, capacity=64, pipeline=True) + ["-affine-loop-invariant-code-motion"],
        '"0:DDR,1:L1"',
    ),
    # -affine-loop-invariant-code-motion leaves index arithmetic between a
    # nested pipelined loop and its prologue
    case(
        "matmul",
        (18, 25, 78),
        "f32",
        tiling(32, space=1, capacity=4, pipeline=True) + ["-affine-loop-invariant-code-motion"],
    ),
    # a double-buffered K loop of two iterations, which upstream unrolls
    case("matmul", (51, 65, 31), "f32", tiling(16, capacity=4, pipeline=True)),
    # escape-hatch kernels in an inner loop of a double-buffered loop read
    # both slots: the loop runs one iteration at a time (D-LOW-PIPE)
    case("matmul", (12, 20, 9), "f32", tiling(16, capacity=1, pipeline=True)),
    # fast memory in space 1, mapped to L1 by the option
    case("eltwise", (64, 64), "f32", tiling(32, space=1), spaces='"0:DDR,1:L1"', op="add"),
]


def full_grid():
    for (m, n, k), tile, pl, t in itertools.product(
        [(64, 64, 64), (96, 80, 48), (100, 100, 100), (128, 32, 64)],
        [16, 32],
        [False, True],
        ["f32", "i32"],
    ):
        yield case("matmul", (m, n, k), t, tiling(tile, pipeline=pl))
    for shape, tile, pl, t, op in itertools.product(
        [(256,), (100,), (64, 64), (100, 60), (8, 16, 32), (10, 12, 14)],
        [16, 32],
        [False, True],
        ["f32", "i32"],
        ["add", "mul", "max"],
    ):
        yield case("eltwise", shape, t, tiling(tile, pipeline=pl), op=op)


# fast memory space and memory-space map: upstream's default space 2 with the
# default map, or space 1 mapped to L2 (the default) or to L1
MEMORY_SPACES = [(2, None), (1, None), (1, '"0:DDR,1:L1"'), (2, '"0:DDR,2:L1[0]"')]


# upstream clean-ups a pipeline may run after tiling
CLEANUPS = [
    [],
    [],
    ["-canonicalize"],
    ["-canonicalize", "-cse"],
    ["-affine-loop-invariant-code-motion"],
    ["-affine-scalrep"],
    ["-affine-simplify-structures"],
]


def random_cases(seed: int, count: int):
    """`count` programs drawn with `seed`: kind, shape (non-dividing sizes
    included), tile size, fast-mem-capacity, DMA or copy loops, pipelining,
    then fast memory space and memory-space map, and clean-up passes (drawn
    from further generators, so the other draws of a seed do not depend on
    them)."""
    rng, srng, crng = (
        random.Random(seed),
        random.Random(f"{seed}:spaces"),
        random.Random(f"{seed}:cleanup"),
    )
    for _ in range(count):
        kind = rng.choice(["matmul", "eltwise", "add_relu", "relu"])
        space, spaces = srng.choice(MEMORY_SPACES)
        passes = tiling(
            rng.choice([8, 16, 24, 32, 40, 64]),
            space=space,
            capacity=rng.choice([None, 1, 4, 16, 64]),
            pipeline=rng.random() < 0.5,
            dma=rng.random() < 0.8,
        )
        passes += crng.choice(CLEANUPS)
        if kind == "matmul":
            yield case(kind, tuple(rng.randint(9, 90) for _ in range(3)), "f32", passes, spaces)
            continue
        rank = rng.choice([1, 2, 3])
        dims = tuple(rng.randint(5, 130 if rank < 3 else 40) for _ in range(rank))
        t = "f32" if kind == "relu" else rng.choice(["f32", "i32"])
        yield case(kind, dims, t, passes, spaces, op=rng.choice(["add", "mul", "sub", "max"]))


def selected_cases() -> list:
    """NEM_SWEEP=full: the whole grid; NEM_SWEEP=random:SEED:COUNT: random
    programs; else the default set."""
    mode = os.environ.get("NEM_SWEEP", "")
    if mode == "full":
        return list(full_grid())
    if mode.startswith("random"):
        _, seed, count = (mode.split(":") + ["0", "30"])[:3]
        return list(random_cases(int(seed), int(count)))
    return DEFAULT


CASES = selected_cases()


@pytest.mark.parametrize("text,passes,kind,shapes,t,spaces", CASES)
@pytest.mark.slow  # 200 s (34 cases)
def test_lowered_program_matches_numpy(tmp_path, text, passes, kind, shapes, t, spaces):
    source, tiled, out = tmp_path / "in.mlir", tmp_path / "tiled.mlir", tmp_path / "out.nem"
    source.write_text(text)
    subprocess.run([MLIR_OPT, str(source), *passes, "-o", str(tiled)], check=True)
    options = "device=npm_pro_x1" + (f" memory-spaces={spaces}" if spaces else "")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nem.cli.nem_opt",
            str(tiled),
            "-p",
            f"lower-to-nem{{{options}}}",
            "-t",
            "nem",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    # the program passes every NEM check (static, device, placement, tokens, hazards)
    v = subprocess.run(
        [sys.executable, "-m", "nem.cli.nem_opt", str(out), "-p", "nem-verify", "-o", os.devnull],
        capture_output=True,
        text=True,
    )
    assert v.returncode == 0 and "error" not in v.stderr, v.stderr
    it = NemInterpreter()
    it.load(out)
    args = src.inputs(kind, shapes, t, seed=1)
    for i, a in enumerate(args):  # upstream prints the arguments as %argN
        it.write_tensor(f"arg{i}", a)
    res = it.run()
    assert res.status == "completed" and res.race_count == 0, res.error
    k, want = src.reference(kind, args)
    got = it.read_tensor(f"arg{k}", shapes[k], src.NP_TYPES[t])
    assert np.array_equal(got, want), f"{np.sum(got != want)} elements differ"
