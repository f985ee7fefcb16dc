"""Checker cost per loop nesting level, and explorer throughput.

    python bench/bench_semantics.py

Prints the `nem-verify` pipeline time for 10, 20 and 30 nested 2-iteration
loops around one transfer (issue 11: it doubled per level, 20 levels 6 s, 30
more than 60 s) with the ratio 30/10 levels, and `--explore`'s schedules per
second on a program with 2^6 interleavings.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "unit"))

from semantics_programs import nested_loops as nest  # noqa: E402
from semantics_programs import static_verdict  # noqa: E402

from nem.runtime import NemInterpreter  # noqa: E402


def main() -> None:
    static_verdict(nest(1))  # warm up: the type-family catalog is loaded once
    times = {}
    for n in (10, 20, 30):
        t0 = time.perf_counter()
        assert not static_verdict(nest(n))
        times[n] = time.perf_counter() - t0
        print(f"nem-verify, {n} nested loops: {times[n]:.3f} s")
    print(f"ratio 30 / 10 levels: {times[30] / times[10]:.2f} (2^20 if it doubled per level)")
    src = (
        "program p:\nbuffer A : L2 (size=512)\nbuffer B : L2 (size=128)\n"
        + "".join(
            f"a{k} = transfer.async(dst=region(A, {k * 64}, 64), src=region(B, 0, 64))\n"
            f"b{k} = transfer.async(dst=region(A, {k * 64}, 64), src=region(B, 64, 64))\n"
            for k in range(6)
        )
        + "wait("
        + ", ".join(f"a{k}, b{k}" for k in range(6))
        + ")\n"
    )
    it = NemInterpreter()
    it.load_string(src, "bench.nem")
    it.randomize_inputs(1)
    t0 = time.perf_counter()
    ex = it.explore(1000)
    dt = time.perf_counter() - t0
    print(
        f"explore: {ex.schedules} schedules in {dt:.2f} s ({ex.schedules / dt:.0f}/s), "
        f"complete={ex.complete}, {ex.outcomes} distinct final memories"
    )


if __name__ == "__main__":
    main()
