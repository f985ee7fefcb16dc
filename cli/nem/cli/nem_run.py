"""`nem-run`: run a NEM program on the reference runtime.

    nem-run PROGRAM.nem [--device D] [--mode functional|timed]
            [--schedule source|random --seed S] [--schedules K]
            [--explore [--max-schedules N]] [-j N]
            [--input BUF=FILE]... [--output BUF=FILE]... [--random-inputs SEED]
            [--trace FILE.json|.csv] [--timeline FILE.png] [--profile FILE.json]

Prints a summary (tasks run, per-unit busy time and utilization and total
cycles in timed mode, races, deadlocks, unconsumed tokens).  Exit status: 0
when the run completed without races (and, with --schedules, with identical
final memory), 1 when a race, deadlock, differing schedules or a diagnostic
was reported, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nem-run", description="Run a NEM program (.nem or NEM "
                                "IR .mlir) on the reference runtime.",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("program", help="the program; '-' reads .nem text from standard input "
                   "(e.g. piped from nem-opt -t nem)")
    p.add_argument("--device", help="target device (name or .nem file); overrides the "
                   "program's directive")
    p.add_argument("-I", dest="include_dirs", action="append", default=[],
                   help="include / device search directory")
    p.add_argument("--mode", choices=("functional", "timed"), default="functional")
    p.add_argument("--schedule", choices=("source", "random"), default="source")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--schedules", type=int, metavar="K",
                   help="run K random schedules (seeds SEED..SEED+K-1) and compare final memory")
    p.add_argument("--explore", action="store_true",
                   help="run one schedule of every distinct interleaving (small programs): "
                   "report every race and deadlock with a witness schedule and whether the "
                   "space was covered completely")
    p.add_argument("--max-schedules", type=int, default=1000, metavar="N",
                   help="--explore runs at most N schedules (default 1000)")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="processes for --schedules/--explore (default: every core; results "
                   "do not depend on N)")
    p.add_argument("--input", action="append", default=[], metavar="BUF=FILE",
                   help="write FILE (.npy: its array in C order; else raw bytes) at the start "
                   "of buffer BUF; a bare FILE.npz writes each of its arrays into the buffer "
                   "of the same name (nem-compile's weights sidecar)")
    p.add_argument("--output", action="append", default=[], metavar="BUF=FILE",
                   help="write buffer BUF's bytes to FILE (.npy: 1-D uint8; else raw)")
    p.add_argument("--random-inputs", type=int, metavar="SEED",
                   help="fill DDR and L2 buffers with seeded random values before running")
    p.add_argument("--trace", metavar="FILE", help="trace as Chrome/Perfetto JSON or .csv")
    p.add_argument("--timeline", metavar="FILE.png", help="Gantt chart of the schedule")
    p.add_argument("--profile", metavar="FILE.json",
                   help='cost-model overrides, e.g. {"DMA": {"bandwidth": 64, "latency": 8}}')
    p.add_argument("--ddr-size", type=int, default=None, help="DDR bytes (default 256 MB)")
    p.add_argument("--no-races", action="store_true", help="disable race detection")
    p.add_argument("--no-progress", action="store_true")
    from nem.cli.common import version_text

    p.add_argument("--version", action="version", version=version_text("nem-run"),
                   help="print the version of nem-run and of what it runs on, and exit")
    return p


class Progress:
    """A progress bar on stderr that appears once a run takes longer than a second."""

    def __init__(self, total: int | None, enabled: bool):
        self.total = total
        self.t0 = time.perf_counter()
        self.enabled = enabled
        self.shown = False

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        el = time.perf_counter() - self.t0
        if el < 1.0:
            return
        self.shown = True
        if self.total:
            frac = min(done / self.total, 1.0)
            bar = "#" * int(frac * 30)
            msg = f"\r[{bar:<30}] {frac * 100:5.1f}% {done}/{self.total} tasks {el:6.1f}s"
        else:
            msg = f"\r{done} tasks {el:6.1f}s"
        sys.stderr.write(msg + "\x1b[K" if sys.stderr.isatty() else msg)
        sys.stderr.flush()

    def kernel(self, done: int, total: int, elapsed: float) -> None:
        """Progress inside one long interpreted escape-hatch task (D-RT-MLIR-JIT)."""
        share = f"{min(done / total, 1.0) * 100:3.0f}% of ~{total:,}" if total else f"{done:,}"
        sys.stderr.write(f"\rinterpreting a compute op=mlir.kernel task: {share} scalar ops, "
                         f"{elapsed:.0f} s\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _pairs(items, what):
    out = []
    for it in items:
        if "=" not in it:
            raise SystemExit(_usage(f"{what} expects BUF=FILE, got {it!r}"))
        buf, f = it.split("=", 1)
        out.append((buf, f))
    return out


def _usage(msg: str) -> int:
    print(f"nem-run: error: {msg}", file=sys.stderr)
    return 2


def run(argv=None) -> int:
    from nem.dialect.diagnostics import NemDiagnosticError
    from nem.runtime.api import NemInterpreter

    args = _parser().parse_args(argv)
    archives = [f for f in args.input if "=" not in f and f.endswith(".npz")]
    inputs = _pairs([f for f in args.input if f not in archives], "--input")
    outputs = _pairs(args.output, "--output")
    if args.schedules is not None and args.schedules < 1:
        return _usage("--schedules needs K >= 1")
    if args.max_schedules < 1:
        return _usage("--max-schedules needs N >= 1")
    if args.jobs is not None and args.jobs < 1:
        return _usage("-j needs N >= 1")
    if args.explore and (args.schedules or args.mode == "timed"):
        return _usage("--explore runs functional schedules; it excludes --schedules and --mode timed")
    try:
        interp = NemInterpreter(device=args.device, ddr_size=args.ddr_size,
                                include_dirs=args.include_dirs, races=not args.no_races,
                                trace=bool(args.trace or args.timeline))
        interp.set_mode(args.mode)
        interp.set_scheduling(args.schedule, args.seed)
        if args.profile:
            interp.set_timing_profile(json.loads(Path(args.profile).read_text()))
        if args.program == "-":
            prog = interp.load_string(sys.stdin.read(), file="<stdin>")
        else:
            prog = interp.load(args.program)
    except NemDiagnosticError as e:
        for d in e.diagnostics:
            print(d.render(), file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        return _usage(str(e))
    for d in prog.diagnostics:  # warnings
        print(d.render(), file=sys.stderr)
    _kernel_notices(prog)

    if args.random_inputs is not None:
        interp.randomize_inputs(args.random_inputs)
    for f in archives:
        try:
            with np.load(f, allow_pickle=False) as npz:
                for buf in npz.files:
                    interp.write_tensor(buf, npz[buf])
        except (OSError, ValueError, KeyError) as e:
            return _usage(f"--input {f}: {e}")
    for buf, f in inputs:
        try:
            if f.endswith(".npy"):
                interp.write_tensor(buf, np.load(f, allow_pickle=False))
            else:
                interp.write_bytes(buf, Path(f).read_bytes())
        except (OSError, ValueError, KeyError) as e:
            return _usage(f"--input {buf}={f}: {e}")

    name = prog.name
    dev = prog.device.name if prog.device is not None else "device-agnostic"
    sched = "timed" if args.mode == "timed" else \
        (args.schedule + (f" (seed {args.seed})" if args.schedule == "random" else ""))
    print(f"nem-run: {name} on {dev}, mode {args.mode}, schedule {sched}")
    failed = False

    if args.explore:
        failed = _explore(interp, args.max_schedules, args.jobs)
        _write_outputs(interp, outputs)
        return 1 if failed else 0

    if args.schedules:
        results, diff = interp.run_schedules(args.schedules, args.seed, jobs=args.jobs)
        print(f"schedules: {args.schedules} random (seeds {args.seed}..."
              f"{args.seed + args.schedules - 1})")
        seen = set()
        nraces = 0
        for j, r in enumerate(results):
            for race in r.races:
                key = (race.first.label, race.first.line, race.second.label, race.second.line,
                       race.buffer)
                if key in seen:
                    continue
                seen.add(key)
                nraces += 1
                print(f"  seed {args.seed + j}: {race}")
            if r.deadlock:
                print(f"  seed {args.seed + j}: {r.deadlock}")
                failed = True
            if r.error:
                print(r.error.render(), file=sys.stderr)
                failed = True
        print(f"tasks run: {results[0].tasks_run} per schedule")
        print(f"races: {nraces} distinct (over {args.schedules} schedules)")
        if diff is None:
            print("final memory: identical across all schedules")
        else:
            a, b, buf, off = diff
            print(f"final memory: differs between seed {a} and seed {b}: first at buffer "
                  f"{buf} byte {off}")
            failed = True
        failed |= nraces > 0
        _write_outputs(interp, outputs)
        return 1 if failed else 0

    s = interp.start()
    total = prog.compiled.static_task_count()
    bar = Progress(total, not args.no_progress and sys.stderr.isatty())
    if bar.enabled:
        from nem.runtime import escape_hatch

        escape_hatch.PROGRESS = bar.kernel
    try:
        result = s.run_to_end(progress=bar)
    finally:
        bar.close()
    _summary(result, s)
    if result.error is not None:
        print(result.error.render(), file=sys.stderr)
        failed = True
    failed |= result.status != "completed" or result.race_count > 0
    try:
        if args.trace:
            s.export_trace(args.trace)
            print(f"trace: {args.trace}")
        if args.timeline:
            from nem.runtime.trace import timeline_png

            timeline_png(s.trace, args.timeline, f"{name} ({args.mode})")
            print(f"timeline: {args.timeline}")
    except RuntimeError as e:
        print(f"nem-run: error: {e}", file=sys.stderr)
        return 1
    _write_outputs(interp, outputs)
    return 1 if failed else 0


def _kernel_notices(prog) -> None:
    """Escape-hatch kernels (D-RT-MLIR-JIT): say once when they will be
    interpreted and how slow that is; print the runtime's notices."""
    from nem.runtime import escape_hatch

    msg = escape_hatch.load_notice(prog.op)
    if msg:
        print(f"nem-run: warning: {msg}", file=sys.stderr)
    escape_hatch.NOTICE = lambda m: print(f"nem-run: warning: {m}", file=sys.stderr)


def _explore(interp, max_schedules: int, jobs) -> bool:
    """`--explore`: print what the explorer found; True when it found a problem."""
    ex = interp.explore(max_schedules, jobs=jobs)
    if ex.too_large:
        print(f"explore: not supported: {ex.task_instances} task instances exceed the "
              f"explorer's limit; use --schedules K (random schedules)")
        return True
    cover = "the space is covered completely" if ex.complete else \
        f"the space is NOT covered completely (more than --max-schedules {max_schedules})"
    print(f"explore: {ex.schedules} schedule(s), one per distinct interleaving of the "
          f"{ex.task_instances} task instances; {cover}")
    print(f"races: {len(ex.races)}")
    for w in ex.races:
        print(f"  {w.race}")
        print("    witness: after " + (", ".join(w.schedule) if w.schedule else "nothing")
              + f", both {_short(w.race.first)} and {_short(w.race.second)} are ready: "
              "either may run first")
    print(f"deadlocks: {len(ex.deadlocks)}")
    for d, sched in ex.deadlocks[:5]:
        print("  " + str(d).replace("\n", "\n  "))
        print("    witness schedule: " + (", ".join(sched) or "(no task ran)"))
    for e in ex.errors[:5]:
        print(e.render(), file=sys.stderr)
    for m in ex.diverged[:5]:
        print(f"explore: internal: a replay diverged ({m}): happens-before depended on the "
              "schedule", file=sys.stderr)
    print(f"final memory: {ex.outcomes} distinct outcome(s) over {ex.schedules} schedule(s)")
    return bool(ex.races or ex.deadlocks or ex.errors or ex.diverged or not ex.complete
                or ex.outcomes > 1)


def _short(ref) -> str:
    return ref.label + (f" ({ref.iteration})" if ref.iteration else "")


def _write_outputs(interp, outputs) -> None:
    for buf, f in outputs:
        data = interp.read_buffer(buf)
        if f.endswith(".npy"):
            np.save(f, data.astype(np.uint8).reshape(-1))
        else:
            Path(f).write_bytes(data.tobytes())


def _summary(r, session) -> None:
    counts = ", ".join(f"{k} {v}" for k, v in r.counts.items())
    print(f"status: {r.status}")
    print(f"tasks run: {r.tasks_run}" + (f" ({counts})" if counts else ""))
    for line, n in sorted(r.max_active_iterations.items()):
        print(f"loop at line {line}: at most {n} iterations in flight")
    if r.cycle_count is not None:
        print(f"total cycles: {r.cycle_count}")
        print(f"{'unit':<14}{'busy':>10}  utilization")
        for u, b in r.unit_busy.items():
            util = b / r.cycle_count if r.cycle_count else 0.0
            print(f"{u:<14}{b:>10}  {util * 100:5.1f}%")
    print(f"races: {r.race_count}")
    for race in r.races:
        print(f"  {race}")
    if r.race_count > len(r.races):
        print(f"  ... {r.race_count - len(r.races)} more")
    print(f"deadlocks: {1 if r.deadlock else 0}")
    if r.deadlock:
        print("  " + str(r.deadlock).replace("\n", "\n  "))
    for u in r.unconsumed:
        print(str(u))


def main(argv=None) -> None:
    from nem.cli.entry import guarded_main

    guarded_main("nem-run", run, argv)


if __name__ == "__main__":
    main()
