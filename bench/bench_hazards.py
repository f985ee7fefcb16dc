#!/usr/bin/env python3
"""Benchmark: cost of `nem-check-hazards` / `nem-check-tokens` versus parsing.

    python bench/bench_hazards.py                  # 10k and 50k tasks, in-process
    python bench/bench_hazards.py --tasks 50000 --cli   # + `time nem-opt` both ways

Programs come from `bench_roundtrip.generate` (half straight-line, half in
`loop ... @max_in_flight(2)` bodies with ping-pong slots; race-free, so the
hazard check does its full work and reports nothing).  In-process phases,
timed with `time.perf_counter` in one run:

  parse     parse_nem(text)
  hazards   find_hazards(program)          (nem-check-hazards)
  tokens    check_tokens(program)          (nem-check-tokens)
  live      max_live_tokens(program)       (DEV-17 input)

and, with --cli, wall time of `nem-opt big.nem -o /dev/null` and of
`nem-opt big.nem -p nem-check-hazards -o /dev/null`.  Target (issue 3): the
checks cost at most 2x the parse and scale linearly (growth factor ~1.0 =
time ratio / size ratio between consecutive sizes).  The machine may be
shared: compare ratios within one run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_roundtrip import generate  # noqa: E402

from nem.analysis.hazard_finder import find_hazards  # noqa: E402
from nem.analysis.token_liveness import check_tokens, max_live_tokens  # noqa: E402
from nem.dialect.ops import ProgramOp  # noqa: E402
from nem.frontends.nem_text.parser import parse_nem  # noqa: E402


def in_process(n: int) -> dict[str, float]:
    text = generate(n)
    t0 = time.perf_counter()
    module = parse_nem(text, f"bench_{n}.nem")
    t1 = time.perf_counter()
    prog = next(op for op in module.walk() if isinstance(op, ProgramOp))
    hz = find_hazards(prog)
    t2 = time.perf_counter()
    tk = check_tokens(prog)
    t3 = time.perf_counter()
    live = max_live_tokens(prog)
    t4 = time.perf_counter()
    assert not [d for d in hz if d.severity == "error"], "benchmark program must be race-free"
    return {
        "parse": t1 - t0,
        "hazards": t2 - t1,
        "tokens": t3 - t2,
        "live": t4 - t3,
        "findings": len(hz),
        "token_warnings": len(tk),
        "max_live": live,
    }


def cli(n: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.nem")
        with open(path, "w") as f:
            f.write(generate(n))
        times = []
        for extra in ([], ["-p", "nem-check-hazards"]):
            t = time.perf_counter()
            subprocess.run(["nem-opt", path, *extra, "-o", os.devnull], check=True)
            times.append(time.perf_counter() - t)
    return times[0], times[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, nargs="+", default=[10000, 50000])
    ap.add_argument(
        "--cli", action="store_true", help="also time nem-opt with and without the pass"
    )
    args = ap.parse_args()
    prev = None
    for n in args.tasks:
        r = in_process(n)
        checks = r["hazards"] + r["tokens"] + r["live"]
        growth = ""
        if prev is not None:
            growth = f"  growth(hazards) {(r['hazards'] / prev[1]) / (n / prev[0]):.2f}"
        print(
            f"{n:>7} tasks: parse {r['parse']:.2f}s  hazards {r['hazards']:.2f}s  "
            f"tokens {r['tokens']:.2f}s  live {r['live']:.2f}s  "
            f"checks/parse {checks / r['parse']:.2f}x  "
            f"(max live tokens {r['max_live']}, {r['token_warnings']} token warnings){growth}"
        )
        prev = (n, r["hazards"])
        if args.cli:
            base, with_pass = cli(n)
            print(
                f"{'':>7}  nem-opt: {base:.2f}s   nem-opt -p nem-check-hazards: {with_pass:.2f}s "
                f"(+{with_pass - base:.2f}s, {with_pass / base:.2f}x)"
            )


if __name__ == "__main__":
    main()
