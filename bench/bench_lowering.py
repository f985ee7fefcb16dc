"""Benchmark: lowering a tiled matmul with 1,000+ tiles vs. xDSL parsing it.

The input is the shape `affine-loop-tile` + `affine-data-copy-generate
{generate-dma}` gives, with the tile loops fully unrolled, so the IR (and the
lowering's work) grows with the number of tiles: per tile (i, j, k) two
`affine.dma_start`/`dma_wait` pairs into L1 and the 3-deep affine matmul nest;
per (i, j) the C tile's load and store DMAs.  For each size we report the
xDSL parse time (with locations, as nem-opt parses) and the lowering time
(`convert-affine-to-nem`, `nem-synthesize-deps` and xDSL's dead-code
elimination: `lower-to-nem` but its checks, which are reported separately),
best of `--repeat` runs.

    python bench/bench_lowering.py [--tiles 1000 2197 4096] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from nem.frontends.upstream_dialects import lowering_context, parse_mlir
from nem.passes.lowering.context import Options
from nem.passes.lowering.driver import Lowerer
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.passes import DEFAULT_SPACES, CheckLoweredPass, parse_spaces
from nem.passes.synthesize_deps import SynthesizeDepsPass


def make_input(n_side: int, tile: int = 16) -> str:
    """A matmul of (n_side*tile)^2 with n_side^3 tiles, tile loops unrolled."""
    N = n_side * tile
    t = f"memref<{N}x{N}xf32>"
    f = f"memref<{tile}x{tile}xf32, 2>"
    out = [
        f"func.func @mm(%A: {t}, %B: {t}, %C: {t}) {{",
        "  %c0 = arith.constant 0 : index",
        f"  %n = arith.constant {tile * tile} : index",
        f"  %s = arith.constant {N} : index",
        f"  %p = arith.constant {tile} : index",
        f"  %a = memref.alloc() : {f}",
        f"  %b = memref.alloc() : {f}",
        f"  %c = memref.alloc() : {f}",
        "  %tag = memref.alloc() : memref<3xi32>",
    ]
    for i in range(n_side):
        out.append(f"  %i{i} = arith.constant {i * tile} : index")
    for i in range(n_side):
        for j in range(n_side):
            out.append(
                f"  affine.dma_start %C[%i{i}, %i{j}], %c[%c0, %c0], %tag[2], %n, %s, %p "
                f": {t}, {f}, memref<3xi32>"
            )
            out.append("  affine.dma_wait %tag[2], %n : memref<3xi32>")
            for k in range(n_side):
                out.append(
                    f"  affine.dma_start %A[%i{i}, %i{k}], %a[%c0, %c0], %tag[0], %n, %s, "
                    f"%p : {t}, {f}, memref<3xi32>"
                )
                out.append("  affine.dma_wait %tag[0], %n : memref<3xi32>")
                out.append(
                    f"  affine.dma_start %B[%i{k}, %i{j}], %b[%c0, %c0], %tag[1], %n, %s, "
                    f"%p : {t}, {f}, memref<3xi32>"
                )
                out.append("  affine.dma_wait %tag[1], %n : memref<3xi32>")
                out.append(f"""  affine.for %x = 0 to {tile} {{
    affine.for %y = 0 to {tile} {{
      affine.for %z = 0 to {tile} {{
        %0 = affine.load %a[%x, %z] : {f}
        %1 = affine.load %b[%z, %y] : {f}
        %2 = affine.load %c[%x, %y] : {f}
        %3 = arith.mulf %0, %1 : f32
        %4 = arith.addf %2, %3 : f32
        affine.store %4, %c[%x, %y] : {f}
      }}
    }}
  }}""")
            out.append(
                f"  affine.dma_start %c[%c0, %c0], %C[%i{i}, %i{j}], %tag[2], %n, %s, %p "
                f": {f}, {t}, memref<3xi32>"
            )
            out.append("  affine.dma_wait %tag[2], %n : memref<3xi32>")
    out += ["  return", "}"]
    return "\n".join(out) + "\n"


def run(n_side: int, repeat: int) -> tuple[int, int, float, float, float]:
    text = make_input(n_side)
    best_p = best_l = best_c = float("inf")
    for _ in range(repeat):
        c = lowering_context()
        t0 = time.perf_counter()
        module = parse_mlir(c, text, "bench.mlir")
        t1 = time.perf_counter()
        Lowerer(Options(parse_spaces(DEFAULT_SPACES), "npm_pro_x1"), HANDLERS).run(module)
        SynthesizeDepsPass(device="npm_pro_x1", narrow_windows=True).apply(c, module)
        DeadCodeElimination().apply(c, module)
        t2 = time.perf_counter()
        CheckLoweredPass("npm_pro_x1").apply(c, module)
        t3 = time.perf_counter()
        best_p, best_l, best_c = min(best_p, t1 - t0), min(best_l, t2 - t1), min(best_c, t3 - t2)
    return n_side**3, len(text.splitlines()), best_p, best_l, best_c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sides", type=int, nargs="*", default=[8, 10, 13, 16])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(
        f"{'tiles':>6} {'lines':>7} {'parse s':>9} {'lower s':>9} {'lower/parse':>12} "
        f"{'lower us/tile':>14} {'checks s':>9}"
    )
    for s in args.sides:
        tiles, lines, p, lo, ch = run(s, args.repeat)
        print(
            f"{tiles:>6} {lines:>7} {p:>9.3f} {lo:>9.3f} {lo / p:>12.2f} "
            f"{lo / tiles * 1e6:>14.1f} {ch:>9.3f}"
        )


if __name__ == "__main__":
    main()
