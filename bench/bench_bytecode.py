#!/usr/bin/env python3
"""Benchmark: NEM bytecode (`.nemb`) against `.nem` text, in one run.

    python bench/bench_bytecode.py                 # the 50k-task program
    python bench/bench_bytecode.py --tasks 10000   # another size
    python bench/bench_bytecode.py --profile       # + cProfile of the load
    python bench/bench_bytecode.py --rounds 1      # one round (default 3)

The program is bench_roundtrip.py's generator (half the tasks straight-line,
half in `loop ... @max_in_flight(2)` bodies; typed regions, transfers,
gemm/relu/add, stores, waits, decorators).  One process; each phase after a
gc.collect(), timed by the wall clock (time.perf_counter) and by this
process's CPU time (time.process_time).  Parse, verify and load run in
`--rounds` interleaved rounds and each phase reports its best round: on a
machine shared with other jobs a single run's ratio moved by +-30% with the
load of the moment, and the CPU-time ratio is the steadier one.

  size      canonical `.nem` text vs `.nemb` (names and debug locations kept;
            also stripped variants).  Target: `.nemb` <= 35% of the text.
  parse     parse_nem(text) -> IR                 (the `.nem` front end)
  verify    verify_program(IR)                    (static rules)
  load      bytes -> verified IR (`load_nemb`) = decode + build + verify
            decode: header, CRC-32, sections, varint streams, string and
                    attribute tables
            build:  instructions -> xDSL ops (and debug locations)
            verify: the same static rules as after parsing
  section check: Requirements/Relocations vs the code (what nem-opt adds
            when it reads a file as a validator; not part of the load)
  write     IR -> bytes

Targets: load at least 3x faster than parse (aim 10x); the ratio against
parse + verify (text -> verified IR) is printed too.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_roundtrip import generate

from nem.dialect.ops import TaskOp
from nem.dialect.verifier import verify_program
from nem.frontends.bytecode.loader import check_consistency, load_nemb
from nem.frontends.bytecode.reader import LoadedBytecode
from nem.frontends.bytecode.writer import WriteOptions, write_nemb
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem


def timed(fn, *args):
    """`fn(*args)` and its (wall, CPU) seconds."""
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, (time.perf_counter() - t0, time.process_time() - c0)


def load(data: bytes) -> tuple[LoadedBytecode, dict[str, float]]:
    """bytes -> verified IR (`load_nemb`), with its breakdown (wall clock);
    "load" is the whole call, "load_cpu" its CPU time.  As for `parse`
    (`timed`), the young-generation collection that follows once the
    collector is re-enabled comes after the clock."""
    t: dict[str, float] = {}
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    loaded = load_nemb(data, "bench.nemb", timings=t)
    t["load"], t["load_cpu"] = time.perf_counter() - t0, time.process_time() - c0
    return loaded, t


def best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The least wall and the least CPU time of several rounds."""
    return min(w for w, _ in runs), min(c for _, c in runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50_000)
    ap.add_argument("--profile", action="store_true", help="cProfile the load")
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="interleaved rounds of parse, verify and load; each reports its best",
    )
    args = ap.parse_args(argv)

    text = generate(args.tasks)
    module, _ = timed(parse_nem, text, "bench.nem")
    canonical = print_nem(module)
    data, (t_write, _) = timed(write_nemb, module)
    stripped = write_nemb(module, WriteOptions(strip_debug=True))
    bare = write_nemb(module, WriteOptions(strip_debug=True, strip_names=True))
    del module
    parses, verifies, loads = [], [], []
    for _ in range(max(1, args.rounds)):
        module, t = timed(parse_nem, text, "bench.nem")
        parses.append(t)
        diags, t = timed(verify_program, module.ops.first)
        verifies.append(t)
        assert not [d for d in diags if d.severity == "error"]
        del module, diags  # load with one IR in memory, as parse ran
        gc.collect()
        loaded, parts = load(data)
        loads.append(parts)
        del loaded
    (t_parse, c_parse), (t_verify, c_verify) = best(parses), best(verifies)
    parts = {k: min(p[k] for p in loads) for k in loads[0]}
    t_load, c_load = parts["load"], parts["load_cpu"]
    loaded, _ = load(data)
    t0 = time.perf_counter()
    check_consistency(loaded, "bench.nemb")
    parts["consistency"] = time.perf_counter() - t0
    assert print_nem(loaded.module) == canonical, "the bytecode changed the program"
    tasks = sum(1 for op in loaded.program.walk() if isinstance(op, TaskOp))
    ops = sum(1 for _ in loaded.program.walk())

    print("command: python bench/bench_bytecode.py" + (" " + " ".join(argv or sys.argv[1:])))
    print(
        f"python {sys.version.split()[0]}, best of {max(1, args.rounds)} rounds, "
        "wall clock (time.perf_counter) and CPU time (time.process_time)\n"
    )
    print(f"program: {tasks} tasks, {ops} ops, {canonical.count(chr(10))} lines")
    n = len(canonical.encode())
    print(f"{'size':<42}{'bytes':>12}{'% of .nem':>11}")
    for label, size in [
        ("canonical .nem text", n),
        (".nemb (names + debug locations kept)", len(data)),
        (".nemb --strip-debug", len(stripped)),
        (".nemb --strip-debug --strip-names", len(bare)),
    ]:
        print(f"  {label:<40}{size:>12}{size / n * 100:>10.1f}%")
    for name, required, size in loaded.section_sizes:
        print(f"    section {name:<30}{size:>12}")
    ok = "OK" if len(data) <= 0.35 * n else "ABOVE TARGET"
    print(f"  target: .nemb <= 35% of the text: {len(data) / n * 100:.1f}% ({ok})\n")

    print(f"{'phase':<42}{'s':>9}{'µs/task':>10}{'CPU s':>9}")
    rows = [
        ("parse .nem -> IR", t_parse, c_parse),
        ("verify (static rules)", t_verify, c_verify),
        ("text -> verified IR (parse + verify)", t_parse + t_verify, c_parse + c_verify),
        ("load .nemb -> verified IR", t_load, c_load),
        ("  decode", parts["decode"], None),
        ("  build IR", parts["build"], None),
        ("  verify (static rules)", parts["verify"], None),
        ("  (decode + build: IR without the rules)", parts["decode"] + parts["build"], None),
        ("nem-opt's section check (not in load)", parts["consistency"], None),
        ("write IR -> .nemb", t_write, None),
    ]
    for label, t, c in rows:
        cpu = f"{c:>9.3f}" if c is not None else ""
        print(f"  {label:<40}{t:>9.3f}{t / tasks * 1e6:>10.1f}{cpu}")
    r1, r1c = t_parse / t_load, c_parse / c_load
    r2 = (t_parse + t_verify) / t_load
    print(
        f"\nload vs parse: {r1:.2f}x faster by the wall clock, {r1c:.2f}x by CPU time "
        f"(target >= 3x, aim 10x: {'OK' if min(r1, r1c) >= 3 else 'BELOW TARGET'})"
    )
    print(f"load vs parse + verify: {r2:.2f}x faster")
    r3 = t_parse / (parts["decode"] + parts["build"])
    print(f"IR without the static rules (decode + build) vs parse: {r3:.2f}x faster")
    share = parts["verify"] / t_load * 100
    print(f"verification is {share:.0f}% of the load")

    if args.profile:
        gc.collect()
        pr = cProfile.Profile()
        pr.enable()
        load(data)
        pr.disable()
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats("cumulative").print_stats(30)
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
