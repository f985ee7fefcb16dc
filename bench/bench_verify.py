#!/usr/bin/env python3
"""Benchmark: `nem-verify` (every checking stage) against parsing the same program.

    python bench/bench_verify.py                     # 10k and 50k tasks
    python bench/bench_verify.py --tasks 2000 20000  # other sizes
    python bench/bench_verify.py --profile           # + cProfile of nem-verify

The program is `bench_roundtrip.generate(n)` (half straight-line tasks, half
in `@max_in_flight(2)` loops; transfers, gemm, relu/add, stores, waits),
targeted at `bench/bench_device.nem` (`bench_big`: room for every buffer and
token, so no stage stops the pipeline early).  It times, in one process,
with `time.perf_counter` after a `gc.collect()`:

  parse       parse_nem(text)
  nem-verify  the whole pipeline (static, device, placement, then
              nem-check-tokens / nem-check-hazards when registered)
  per stage   each registered stage alone on a fresh parse

and prints the ratio nem-verify / parse (target: <= 2x) and the growth
between sizes (time ratio / task-count ratio; 1.00 = linear).  Single run
per size; the machine is noisy, compare within one run.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_roundtrip import generate  # noqa: E402

from nem.dialect.diagnostics import NemDiagnosticError  # noqa: E402
from nem.dialect.ops import TaskOp  # noqa: E402
from nem.frontends.nem_text.parser import parse_nem  # noqa: E402
from nem.passes import PASSES  # noqa: E402
from nem.passes.pass_context import pass_context  # noqa: E402
from nem.passes.pipeline import STAGES, VerifyPipelinePass  # noqa: E402

DEVICE = "bench_big"


def timed(fn, *args):
    gc.collect()
    t0 = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - t0


def run_pass(p, module) -> tuple[str, int]:
    """Apply pass `p`; returns (outcome, number of diagnostics)."""
    ctx = pass_context(include_dirs=[str(HERE)])
    try:
        p.apply(ctx, module)
    except NemDiagnosticError as e:
        errs = [d for d in e.diagnostics if d.severity == "error"]
        return f"FAILED ({len(errs)} errors, first: {errs[0].headline()})", len(e.diagnostics)
    return "ok", len(ctx.diagnostics)


def stage_pass(name: str):
    cls = PASSES[name]
    fields = getattr(cls, "__dataclass_fields__", {})
    return cls(device=DEVICE) if "device" in fields else cls()


def run_size(n: int) -> dict:
    text = generate(n)
    module, t_parse = timed(parse_nem, text, f"<bench {n}>")
    tasks = sum(1 for op in module.walk() if isinstance(op, TaskOp))
    ops = sum(1 for _ in module.walk())
    (outcome, ndiags), t_verify = timed(run_pass, VerifyPipelinePass(device=DEVICE), module)
    stages = []
    for name in STAGES:
        if name not in PASSES:
            continue
        fresh = parse_nem(text, f"<bench {n}>")
        (s_outcome, _), t = timed(run_pass, stage_pass(name), fresh)
        stages.append((name, t, s_outcome))
        del fresh
    return dict(
        n=n,
        tasks=tasks,
        ops=ops,
        parse=t_parse,
        verify=t_verify,
        outcome=outcome,
        ndiags=ndiags,
        stages=stages,
    )


def report(results: list[dict], argv: list[str]) -> None:
    print("command: python bench/bench_verify.py" + ("" if not argv else " " + " ".join(argv)))
    print(
        f"python {sys.version.split()[0]}, device {DEVICE} (bench/bench_device.nem), "
        f"stages registered: {', '.join(s for s in STAGES if s in PASSES)}\n"
    )
    for r in results:
        print(
            f"{r['tasks']} tasks, {r['ops']} ops: nem-verify {r['outcome']}, "
            f"{r['ndiags']} diagnostics"
        )
        print(f"  parse        {r['parse']:8.3f} s  {r['parse'] / r['tasks'] * 1e6:7.1f} µs/task")
        print(f"  nem-verify   {r['verify']:8.3f} s  {r['verify'] / r['tasks'] * 1e6:7.1f} µs/task")
        for name, t, outcome in r["stages"]:
            extra = "" if outcome == "ok" else f"  [{outcome}]"
            print(f"    {name:<20} {t:8.3f} s  {t / r['tasks'] * 1e6:7.1f} µs/task{extra}")
        ratio = r["verify"] / r["parse"]
        print(
            f"  ratio nem-verify / parse = {ratio:.2f}x  (target <= 2x: "
            f"{'OK' if ratio <= 2 else 'ABOVE TARGET'})\n"
        )
    if len(results) > 1:
        print("growth between sizes (time ratio / task ratio; 1.00 = linear):")
        for a, b in zip(results, results[1:]):
            scale = b["tasks"] / a["tasks"]
            parts = [
                f"parse {b['parse'] / a['parse'] / scale:.2f}",
                f"nem-verify {b['verify'] / a['verify'] / scale:.2f}",
            ]
            for (name, ta, _), (_, tb, _) in zip(a["stages"], b["stages"]):
                parts.append(f"{name} {tb / ta / scale:.2f}")
            print(f"  {a['tasks']} -> {b['tasks']} tasks (x{scale:.2f}): " + ", ".join(parts))


def profile(n: int, top: int) -> str:
    module = parse_nem(generate(n), "<profile>")
    gc.collect()
    pr = cProfile.Profile()
    pr.enable()
    run_pass(VerifyPipelinePass(device=DEVICE), module)
    pr.disable()
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(top)
    return f"=== cProfile of nem-verify, {n} tasks ===\n" + out.getvalue()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, nargs="+", default=[10_000, 50_000])
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    results = [run_size(n) for n in args.tasks]
    report(results, argv)
    if args.profile:
        print(profile(min(args.tasks), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
