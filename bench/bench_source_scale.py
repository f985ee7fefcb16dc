"""`.nem` and MLIR sources at scale (issue 33): CPU seconds against size, 1x and 10x.

    python bench/bench_source_scale.py [--scale 1]

Runs `nem-opt` as the user does (a subprocess; its CPU seconds, user +
system, from `getrusage`, since the machine is shared) on:
* `--split-input-file` over 1,000 and 10,000 chunks (a const and a buffer
  each): the chunks are parsed where they are (D-OPT-SPLIT); before, each
  was padded to its place, and 10,000 one-const chunks took 42 s against
  1.1 s for 1,000 (this machine, 2026-11-28; now 4.0 s);
* `--split-input-file` over 300 and 3,000 MLIR chunks (a function each),
  also parsed where they are: padded, they took 0.8 and 7.2 s;
* one program of 2,000 and 20,000 `relu` tasks with their regions (0.3 MB,
  3.3 MB) parsed, verified and printed.
A ratio near 10 for 10x the input is linear work; the process's start-up
(about 0.4 s) is in both figures.  test/unit/test_source_scale.py counts
the lexer's work instead of timing it.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from pathlib import Path


def split_chunks(n: int) -> str:
    return "\n# -----\n".join(f"const C{i} = {i}\nbuffer B{i} : L2 (size=64)" for i in range(n))


def mlir_chunks(n: int) -> str:
    return "\n// -----\n".join(f"func.func @f{i}() {{\n  return\n}}" for i in range(n))


def relu_program(n: int) -> str:
    lines = [
        'device "npm_lite.nem"',
        f"buffer A : L2 (size={128 * n})",
        f"buffer B : L2 (size={128 * n})",
    ]
    for i in range(n):
        lines += [
            f"x{i} = region(A, {128 * i}, 128) elem=f16, shape=[64], layout=C",
            f"y{i} = region(B, {128 * i}, 128) elem=f16, shape=[64], layout=C",
            f"t{i} = relu.sync in x{i} out y{i}",
        ]
    return "\n".join(lines) + "\n"


def cpu_seconds(argv: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the sizes")
    args = ap.parse_args()
    nem_opt = str(Path(sys.executable).with_name("nem-opt"))
    cases = [
        ("--split-input-file chunks", split_chunks, 1000, "nem", ["--split-input-file"]),
        ("--split-input-file MLIR chunks", mlir_chunks, 300, "mlir", ["--split-input-file"]),
        ("program relu tasks", relu_program, 2000, "nem", []),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for title, make, base, ext, flags in cases:
            n = max(1, int(base * args.scale))
            times = []
            for size in (n, 10 * n):
                src = Path(tmp) / f"in_{size}.{ext}"
                src.write_text(make(size))
                times.append(cpu_seconds([nem_opt, str(src), "-o", "-", *flags]))
                print(
                    f"{title:30} {size:>7}: {times[-1]:6.2f} s CPU "
                    f"({src.stat().st_size / 1e6:.2f} MB)"
                )
            print(f"{title:30} 10x/1x: {times[1] / times[0]:.1f}")


if __name__ == "__main__":
    main()
