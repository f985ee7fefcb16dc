"""`nem-run`: run a NEM program on the reference runtime.

    nem-run PROGRAM.nem [--device D] [--mode functional|timed]
            [--schedule source|random --seed S] [--schedules K]
            [--explore [--max-schedules N]] [-j N]
            [--input NAME=FILE]... [--input-raw NAME=FILE]...
            [--output NAME[:T[SHAPE]]=FILE]... [--random-inputs SEED]
            [--trace FILE.json|.csv] [--timeline FILE.png] [--profile FILE.json]
            [--repeat N] [--roofline [--json] [--roofline-plot FILE.png] [--onnx M.onnx]]

Prints a summary (tasks run, per-unit busy time and utilization and total
cycles in timed mode, races, deadlocks, unconsumed tokens).  Exit status: 0
when the run completed without races (and, with --schedules, with identical
final memory), 1 when a race, deadlock, differing schedules or a diagnostic
was reported, 2 for usage errors (bad flags, inputs whose type does not
match, output files that cannot be written: all checked before the run).
`--output` files are written only when the run completed (a run that
stopped on an error or a deadlock leaves its buffers part-computed).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nem.cli import roofline_cli, run_options
from nem.cli.common import written_input
from nem.cli.entry import keep_until_exit
from nem.cli.error_limit import error_limit, print_diagnostics
from nem.cli.inputs import (
    InputError,
    check_distinct_outputs,
    check_output_path,
    partial_fill,
    read_archive,
    read_input,
    read_json,
)
from nem.dialect.limits import DEFAULT_MAX_TASKS
from nem.dialect.source_files import read_here

if TYPE_CHECKING:  # rich is imported lazily: the bar only exists on a terminal
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

    from nem.runtime.api import NemInterpreter
    from nem.runtime.session import Program, RunResult


class Progress:
    """A progress bar on stderr (rich) that appears once a run takes longer
    than a second, and only when stderr is a terminal: logs and pipes never
    get carriage returns."""

    def __init__(self, total: int | None, enabled: bool):
        self.total = total
        self.t0 = time.perf_counter()
        self.enabled = enabled and sys.stderr.isatty()
        self.bar: RichProgress | None = None
        self.task: TaskID | None = None
        self.kernel_task: TaskID | None = None

    def _started(self) -> RichProgress | None:
        """The bar, started on first use when enabled; None while not showing."""
        if self.bar is None and self.enabled:
            try:
                from rich.console import Console
                from rich.progress import Progress as RichProgress
            except ImportError:  # rich is a dependency; a broken install just shows nothing
                self.enabled = False
                return None
            self.bar = RichProgress(console=Console(stderr=True), transient=True)
            self.task = self.bar.add_task("tasks", total=self.total)
            self.bar.start()
        return self.bar

    def __call__(self, done: int) -> None:
        if time.perf_counter() - self.t0 < 1.0:
            return
        bar = self._started()
        if bar is not None and self.task is not None:
            bar.update(self.task, completed=done)

    def kernel(self, done: int, total: int, elapsed: float) -> None:
        """Progress inside one long interpreted escape-hatch task (D-RT-MLIR-JIT)."""
        bar = self._started()
        if bar is None:
            return
        if self.kernel_task is None:
            self.kernel_task = bar.add_task(
                "interpreting a compute op=mlir.kernel task (scalar ops)", total=total or None
            )
        bar.update(self.kernel_task, completed=done, total=total or None)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _pairs(items: list[str], what: str) -> list[tuple[str, str]]:
    out = []
    for it in items:
        if "=" not in it:
            raise SystemExit(_usage(f"{what} expects NAME=FILE, got {it!r}"))
        buf, f = it.split("=", 1)
        out.append((buf, f))
    return out


def _usage(msg: str) -> int:
    print(f"nem-run: error: {msg}", file=sys.stderr)
    return 2


@dataclass(frozen=True)
class Output:
    """`--output NAME[:T[SHAPE]]=FILE`."""

    name: str
    elem: str | None
    shape: tuple[int, ...] | None
    file: str

    @staticmethod
    def parse(item: str) -> Output:
        from nem.runtime.tensor_io import TensorIOError, parse_spec

        if "=" not in item:
            raise SystemExit(
                _usage(f"--output expects NAME=FILE or NAME:T[SHAPE]=FILE, got {item!r}")
            )
        target, file = item.split("=", 1)
        name, _, spec = target.partition(":")
        elem = shape = None
        if spec:
            try:
                elem, shape = parse_spec(spec)
            except TensorIOError as e:
                raise SystemExit(_usage(f"--output {item}: {e}")) from None
        return Output(name, elem, shape, file)


def _written(args: argparse.Namespace, outputs: list[Output]) -> list[tuple[str, str]]:
    """(path, flag) of every file the run will write."""
    paths = [(o.file, f"--output {o.name}") for o in outputs] + roofline_cli.paths(args)
    if args.trace:
        paths.append((args.trace, "--trace"))
    if args.timeline:
        paths.append((args.timeline, "--timeline"))
    return paths


CHART_FORMATS = (".png", ".svg", ".pdf")
"""The chart files `--timeline` and `--roofline-plot` write: matplotlib
takes the format from the name's suffix, and given none it appends `.png`
to the name, so the file written was not the one the run named (and could
be another output's, D-CLI-ROOFLINE session 40)."""


def _stream_problem(args: argparse.Namespace, outputs: list[Output]) -> str | None:
    """Outputs that cannot share their place: a chart must name its format,
    `--trace` writes a file (`-` would be one named `-`), and with `--json`
    standard output is the report's alone."""
    for path, flag in ((args.timeline, "--timeline"), (args.roofline_plot, "--roofline-plot")):
        # (an empty name drew nothing and said nothing: a review, session 55)
        if path is not None and Path(path).suffix.lower() not in CHART_FORMATS:
            return (
                f"{flag} {path!r}: a chart's format is its file's suffix; "
                f"give a file name ending in {', '.join(CHART_FORMATS)}"
            )
    if args.trace == "-":
        return "--trace writes a file; standard output ('-') carries the run's summary"
    if args.trace == "":
        return "--trace needs a file name (FILE.json or FILE.csv)"
    if args.json and (o := next((o for o in outputs if o.file == "-"), None)):
        return (
            f"--output {o.name}=- with --json: standard output carries the JSON report "
            "alone; write the tensor to a file"
        )
    return None


def _check_paths(args: argparse.Namespace, outputs: list[Output]) -> int | None:
    """Every file the run will write, checked before it starts (a usage
    error, exit 2): --output files, --trace, --timeline (and matplotlib)."""
    if (bad := _stream_problem(args, outputs)) is not None:
        return _usage(bad)
    paths = _written(args, outputs)
    chart = "--timeline" if args.timeline else "--roofline-plot" if args.roofline_plot else None
    if chart:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            return _usage(
                f"not supported: {chart} needs matplotlib; install it with "
                "pip install 'nem-toolchain[viz]'"
            )
    inputs = [
        args.program,
        args.profile or "",
        *(item.split("=", 1)[-1] for item in [*args.input, *args.input_raw]),
    ]
    try:
        for path, what in paths:
            check_output_path(path, what, inputs)
        check_distinct_outputs(paths)
    except InputError as e:
        return _usage(str(e))
    return None


def _load(args: argparse.Namespace, interp: NemInterpreter) -> Program:
    """The program of the command line (a file, or `-`: standard input, .nem,
    NEM IR in MLIR syntax or NEM bytecode, told apart from the contents)."""
    from nem.cli.common import is_stdio

    if is_stdio(args.program):
        from nem.dialect.limits import max_source_bytes
        from nem.dialect.source_files import read_stream_bytes
        from nem.frontends.bytecode import MAGIC
        from nem.frontends.bytecode.container import is_nemb
        from nem.frontends.nem_text.document import detect_format

        raw = read_stream_bytes(sys.stdin.buffer, bytecode_magic=MAGIC)
        if raw is None:
            raise InputError(
                "-",
                f"standard input has more than {max_source_bytes()} bytes "
                "(D-LIMITS; --max-source-bytes N raises the limit)",
            )
        if is_nemb(raw):
            return interp.load_bytecode(raw, "<stdin>")
        from nem.dialect.source_files import decode_source

        text = decode_source(raw, "<stdin>")
        return interp.load_string(text, "<stdin>", syntax=detect_format(text))
    return interp.load(args.program)


def _warn_partial(what: str, name: str, written: int, size: int) -> None:
    """`partial_fill`'s warning, if any (`nem-opt --embed` gives the same)."""
    if why := partial_fill(what, name, written, size):
        print(f"nem-run: warning: {why}", file=sys.stderr)


def _warn_unset(names: list[str], program: str) -> None:
    """One warning line naming the buffers the program reads that no task
    writes and no --input gave (D-RT-UNSET), with the weights archive
    `nem-compile` writes beside the program when there is one."""
    if not names:
        return
    shown = ", ".join(f"'{n}'" for n in names[:3]) + (
        f" and {len(names) - 3} more" if len(names) > 3 else ""
    )
    what = "1 buffer is" if len(names) == 1 else f"{len(names)} buffers are"
    stem = program.removesuffix(".nem") if program.endswith(".nem") else None
    fix = (
        f" (--input {stem}.weights.npz?)" if stem and Path(stem + ".weights.npz").is_file() else ""
    )
    print(
        f"nem-run: warning: {what} read by the program, written by none of its tasks and "
        f"given by no --input: {shown}; the run reads zeros there{fix} (D-RT-UNSET)",
        file=sys.stderr,
    )


def _write_inputs(
    interp: NemInterpreter, args: argparse.Namespace, warn: bool = True
) -> int | None:
    """--input / --input-raw (and bare .npz archives) into memory, read capped
    by the size of their target (D-LIMITS); an error names the flag (exit 2).
    `warn`: say when an array fills only part of its buffer (once, not at
    each --repeat run)."""

    def partial(what: str, name: str, written: int) -> None:
        if warn:
            _warn_partial(what, name, written, interp.tensor_size(name))

    items = [(i, False) for i in args.input] + [(i, True) for i in args.input_raw]
    for item, raw in items:
        flag = "--input-raw" if raw else "--input"
        try:
            if "=" not in item and item.endswith(".npz"):
                arrays = read_archive(
                    item,
                    f"{flag} {item}",
                    interp.tensor_size,
                    lambda n, shape, dt: interp.check_tensor(n, shape, dt, raw),
                )
                for name, array in arrays.items():
                    partial(f"{flag} {item}", name, interp.write_tensor(name, array, raw=raw))
                continue
            [(name, f)] = _pairs([item], flag)
            data = read_input(
                f,
                f"{flag} {item}",
                interp.tensor_size(name),
                f"'{name}'",
                lambda shape, dt: interp.check_tensor(name, shape, dt, raw),
            )
            if f.endswith(".npy"):
                partial(f"{flag} {item}", name, interp.write_tensor(name, data, raw=raw))
            else:
                interp.write_bytes(name, data)
        except InputError as e:
            return _usage(str(e))
        except KeyError as e:  # an unknown name: str(KeyError) would quote the message
            return _usage(f"{flag} {item}: {e.args[0]}")
        except (OSError, ValueError) as e:
            return _usage(f"{flag} {item}: {e}")
    return None


def _fresh_inputs(
    interp: NemInterpreter, args: argparse.Namespace, warn: bool = True
) -> int | None:
    """--random-inputs, then --input / --input-raw: before the run, and
    again before each --repeat run."""
    if args.random_inputs is not None:
        interp.randomize_inputs(args.random_inputs)
    return _write_inputs(interp, args, warn)


@dataclass
class Preparation:
    """--repeat's planning (D-RT-PREPARE): how long `prepare()` took, or why
    nothing was prepared."""

    seconds: float | None = None
    why_not: str | None = None


@dataclass
class Repeat:
    """--repeat's figures (D-RT-REPEAT): the wall time of each run, how many
    were asked, the last run's status, whether its runs were race-checked
    and replayed, and the planning before them."""

    times: list[float]
    asked: int
    status: str
    races: bool
    replayed: bool
    prep: Preparation

    def to_json(self) -> dict[str, object]:
        """The figures for `--json` (D-CLI-ROOFLINE): milliseconds, the best
        and median of the runs after the first (None with one run)."""
        rest = sorted(self.times[1:])

        def ms(seconds: float) -> float:
            return round(seconds * 1e3, 3)

        return {
            "runs": len(self.times),
            "asked": self.asked,
            "prepared_ms": None if self.prep.seconds is None else ms(self.prep.seconds),
            "not_prepared": self.prep.why_not,
            "first_ms": ms(self.times[0]),
            "best_ms": ms(rest[0]) if rest else None,
            "median_ms": ms(rest[len(rest) // 2]) if rest else None,
            "replayed": self.replayed and len(rest) > 0,
        }

    def to_text(self) -> str:
        """The time `prepare` took when it planned the runs, the first
        run's wall time, then the best and median of the others; where the
        runs stopped early, and why nothing was prepared."""
        times, prep = self.times, self.prep
        n = len(times)
        head = f"repeat: {n} run{'s' if n > 1 else ''}"
        if n < self.asked:
            head = f"repeat: stopped after run {n} of {self.asked} ({self.status})"
        checked = ", race-checked" if self.races else ""
        if prep.seconds is not None:
            # a first run that stopped is labelled with its status (it was re-run, D-RT-REPLAY)
            line = (
                f"{head}; prepared in {prep.seconds * 1e3:.2f} ms (scheduled{checked}, "
                f"D-RT-PREPARE); first {times[0] * 1e3:.2f} ms "
                f"({'replayed' if n > 1 else self.status})"
            )
        else:
            why = f"; not prepared: {prep.why_not}" if prep.why_not else ""
            line = f"{head}; first {times[0] * 1e3:.2f} ms (scheduled{checked}{why})"
        rest = sorted(times[1:])
        if rest:
            kind = "replayed, D-RT-REPLAY" if self.replayed else "scheduled"
            line += (
                f", the other {len(rest)}: best {rest[0] * 1e3:.2f} ms, median "
                f"{rest[len(rest) // 2] * 1e3:.2f} ms ({kind})"
            )
        return line


def _check_outputs(interp: NemInterpreter, outputs: list[Output]) -> int | None:
    """Every --output names a buffer or region, and its T[SHAPE] fits; a T
    other than the target's element type, or a SHAPE that covers only part of
    it, is allowed (to read bytes as another type, or a prefix) but more often
    a typo: say so, as a partial --input is."""
    from nem.runtime.tensor_io import target

    for o in outputs:
        try:
            data = interp.read_tensor(o.name, o.shape, o.elem)
        except (ValueError, KeyError) as e:
            return _usage(f"--output {o.name}: {e}")
        if o.elem is None:
            continue
        prog = interp.program
        assert prog is not None  # loaded before any output is read
        t = target(prog.memory, prog.compiled, o.name)
        if t.elem is not None and t.elem != o.elem:
            print(
                f"nem-run: warning: --output {o.name}: {t.kind} '{o.name}' holds {t.elem} "
                f"values; they are written as {o.elem} (their bytes reinterpreted)",
                file=sys.stderr,
            )
        size = interp.tensor_size(o.name)
        if data.nbytes < size:
            print(
                f"nem-run: warning: --output {o.name}: {o.elem}{list(data.shape)} covers "
                f"{data.nbytes} of the {size} bytes of '{o.name}'; the rest is not written",
                file=sys.stderr,
            )
    return None


def _write_outputs(interp: NemInterpreter, outputs: list[Output]) -> None:
    import numpy as np

    from nem.cli.common import output_file

    for o in outputs:
        data = interp.read_tensor(o.name, o.shape, o.elem)
        with output_file(o.file, "wb") as f:
            if o.file.endswith(".npy"):
                np.save(f, data, allow_pickle=False)
            else:
                f.write(np.ascontiguousarray(data).tobytes())


def run(argv: Sequence[str] | None = None) -> int:
    args = run_options.parser().parse_args(argv)  # first: --help and --version need nothing else
    from nem.dialect.limits import source_limit
    from nem.dialect.source_files import tracking_reads

    if args.max_source_bytes < 1:
        return _usage("--max-source-bytes needs N >= 1")
    with (
        source_limit(args.max_source_bytes),
        tracking_reads(),
        error_limit("nem-run", args.error_limit),
    ):
        return _run(args, argv is None)


def _run(args: argparse.Namespace, owns_process: bool) -> int:
    from nem.dialect.diagnostics import NemDiagnosticError
    from nem.runtime.api import NemInterpreter, profile_problem

    outputs = [Output.parse(o) for o in args.output]
    bad = (
        run_options.resolve_mode(args)
        or run_options.usage_problem(args)
        or roofline_cli.usage_problem(args)
    )
    if bad:
        return _usage(bad)
    bad_path = _check_paths(args, outputs)
    if bad_path is not None:
        return bad_path
    model, bad_model = roofline_cli.least_work(args)
    if bad_model is not None:
        print(bad_model, file=sys.stderr)
        return 1
    try:
        interp = NemInterpreter(
            device=args.device,
            ddr_size=args.ddr_size,
            include_dirs=args.include_dirs,
            races=not args.no_races,
            trace=bool(args.trace or args.timeline),
        )
        interp.set_mode(args.mode)
        interp.set_scheduling(args.schedule, args.seed)
        if args.profile:
            profile = read_json(args.profile, "--profile")
            if not isinstance(profile, dict):  # (the one check's message)
                raise ValueError(f"bad timing profile: {profile_problem(profile)}")
            interp.set_timing_profile(profile)
        from nem.dialect.gc_pause import gc_paused

        with gc_paused(owns_process):  # frozen before the collector resumes
            prog = _load(args, interp)
            if owns_process:  # run as a program: the IR lives until the process ends
                keep_until_exit()
    except NemDiagnosticError as e:
        print_diagnostics("nem-run", e.diagnostics)
        return 1
    except (InputError, OSError, ValueError) as e:
        return _usage(str(e))
    for path, flag in _written(args, outputs):  # the files loading read: includes, device
        if (read := read_here(path)) is not None:
            return _usage(f"{flag}: {written_input(path, read)}")
    print_diagnostics("nem-run", prog.diagnostics)  # warnings
    if model is not None:
        foreign, unlike = roofline_cli.foreign_model(args, prog, model)
        if foreign is not None:
            print(foreign, file=sys.stderr)
            return 1
        if unlike is not None:
            print(unlike, file=sys.stderr)
    _kernel_notices(interp, prog, args.max_kernel_ops)
    over = _over_budget(prog, args)
    if over is not None:
        print(f"nem-run: error: {over}", file=sys.stderr)
        return 1

    bad_io = _fresh_inputs(interp, args) or _check_outputs(interp, outputs)
    if bad_io is not None:
        return bad_io
    if outputs:  # values are written out: say which inputs hold zeros (D-RT-UNSET)
        _warn_unset(interp.unset_inputs(), args.program)

    name = prog.name
    dev = prog.device.name if prog.device is not None else "device-agnostic"
    # --schedules N and --explore choose the schedules themselves (the next line says which)
    sched = (
        "timed"
        if args.mode == "timed"
        else "random"
        if args.schedules
        else "every interleaving"
        if args.explore
        else (args.schedule + (f" (seed {args.seed})" if args.schedule == "random" else ""))
    )
    if not args.json:  # --json: standard output is the one JSON document
        print(f"nem-run: {name} on {dev}, mode {args.mode}, schedule {sched}")
    failed = False

    if args.explore:
        failed = _explore(interp, args.max_schedules, args.jobs)
        _write_outputs(interp, outputs)
        return 1 if failed else 0

    if args.schedules:
        results, diff = interp.run_schedules(
            args.schedules, args.seed, jobs=args.jobs, max_tasks=args.max_tasks
        )
        print(
            f"schedules: {args.schedules} random (seeds {args.seed}..."
            f"{args.seed + args.schedules - 1})"
        )
        seen = set()
        nraces = 0
        for j, r in enumerate(results):
            for race in r.races:
                # the pair of statements in either order, and the buffer (README)
                key = (
                    frozenset(
                        {(race.first.label, race.first.line), (race.second.label, race.second.line)}
                    ),
                    race.buffer,
                )
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
            print(
                f"final memory: differs between seed {a} and seed {b}: first at buffer "
                f"{buf} byte {off}"
            )
            failed = True
        failed |= nraces > 0
        _write_outputs(interp, outputs)
        return 1 if failed else 0

    # --repeat: the runs are planned first, as benchmark_model's "Init" (D-RT-PREPARE)
    prep = Preparation()
    if args.repeat > 1:
        t0 = time.perf_counter()
        if interp.prepare():
            prep.seconds = time.perf_counter() - t0
        else:
            from nem.runtime import replay

            prep.why_not = (
                replay.not_eligible(interp.start().sched)
                or "planning stopped at a run-time error or a deadlock"
            )
    s = interp.start()
    total = prog.compiled.static_task_count()
    bar = Progress(total, not args.no_progress and sys.stderr.isatty())
    if bar.enabled:
        interp.escape_hatch.progress = bar.kernel
    try:
        t0 = time.perf_counter()
        # run as a program: what the run keeps (a recorded plan, D-RT-REPLAY:
        # ~100,000 objects for 3,000 tasks) frozen before the collector
        # resumes, as the IR is; else the first young collection after the
        # run traversed all of it
        with gc_paused(owns_process):
            result = s.run_to_end(progress=bar)
            if owns_process:
                keep_until_exit()
        times = [time.perf_counter() - t0]
    finally:
        bar.close()
    while len(times) < args.repeat and result.status == "completed" and result.error is None:
        _fresh_inputs(interp, args, warn=False)  # read and checked above: cannot fail now
        s = interp.start()
        t0 = time.perf_counter()
        result = s.run_to_end()
        times.append(time.perf_counter() - t0)
    # files first: a reader that stops early (`| head`) must not lose them
    written = []
    least = model.of if model is not None else None  # the ideal bounds (--onnx)
    try:
        if result.error is None and result.status == "completed":
            _write_outputs(interp, outputs)
        elif outputs:  # (a kernel it could not run left zeros there: an outside user, session 66)
            print(
                f"nem-run: --output files not written: the run did not complete ({result.status})",
                file=sys.stderr,
            )
        if args.trace:
            s.export_trace(args.trace)
            written.append(f"trace: {args.trace}")
        if args.timeline:
            from nem.runtime.trace import timeline_png

            timeline_png(
                s.trace, args.timeline, f"{name} ({args.mode})", args.mode, s.critical_path()
            )
            written.append(f"timeline: {args.timeline}")
        written += roofline_cli.write_plot(s, args, least)
    except RuntimeError as e:
        print(f"nem-run: error: {e}", file=sys.stderr)
        return 1
    repeat = None
    if args.repeat > 1:
        replayed = prog.compiled.replay is not None
        repeat = Repeat(times, args.repeat, result.status, not args.no_races, replayed, prep)
    if not args.json:
        _summary(result, not args.no_races)
        if repeat is not None:
            print(repeat.to_text())
        for line in written:
            print(line)
    if args.roofline:
        roofline_cli.print_report(s, result, args, model, repeat.to_json() if repeat else None)
    if result.error is not None:
        print(result.error.render(), file=sys.stderr)
        failed = True
    failed |= result.status != "completed" or result.race_count > 0
    return 1 if failed else 0


def _kernel_notices(interp: NemInterpreter, prog: Program, max_ops: int | None) -> None:
    """Escape-hatch kernels (D-RT-MLIR-JIT): their work limit (D-LIMITS,
    --max-kernel-ops); say once when they will be interpreted and how slow
    that is; print the runtime's notices."""
    hatch = interp.escape_hatch
    if max_ops is not None:
        hatch.max_kernel_ops = max_ops
    msg = hatch.load_notice(prog.op)
    if msg:
        print(f"nem-run: warning: {msg}", file=sys.stderr)
    hatch.notice = lambda m: print(f"nem-run: warning: {m}", file=sys.stderr)


def _explore(interp: NemInterpreter, max_schedules: int, jobs: int | None) -> bool:
    """`--explore`: print what the explorer found; True when it found a problem."""
    ex = interp.explore(max_schedules, jobs=jobs)
    if ex.too_large:
        print(
            f"explore: not supported: {ex.task_instances} task instances exceed the "
            f"explorer's limit; use --schedules K (random schedules)"
        )
        return True
    cover = (
        "the space is covered completely"
        if ex.complete
        else f"the space is NOT covered completely (more than --max-schedules {max_schedules})"
    )
    print(
        f"explore: {ex.schedules} schedule(s), one per distinct interleaving of the "
        f"{ex.task_instances} task instances; {cover}"
    )
    print(f"races: {len(ex.races)}")
    for w in ex.races:
        print(f"  {w.race}")
        print(
            "    witness: after "
            + (", ".join(w.schedule) if w.schedule else "nothing")
            + f", both {_short(w.race.first)} and {_short(w.race.second)} are ready: "
            "either may run first"
        )
    print(f"deadlocks: {len(ex.deadlocks)}")
    for d, sched in ex.deadlocks[:5]:
        print("  " + str(d).replace("\n", "\n  "))
        print("    witness schedule: " + (", ".join(sched) or "(no task ran)"))
    for e in ex.errors[:5]:
        print(e.render(), file=sys.stderr)
    for m in ex.diverged[:5]:
        print(
            f"explore: internal: a replay diverged ({m}): happens-before depended on the schedule",
            file=sys.stderr,
        )
    print(f"final memory: {ex.outcomes} distinct outcome(s) over {ex.schedules} schedule(s)")
    return bool(
        ex.races or ex.deadlocks or ex.errors or ex.diverged or not ex.complete or ex.outcomes > 1
    )


def _short(ref: Any) -> str:
    return str(ref.label) + (f" ({ref.iteration})" if ref.iteration else "")


def _over_budget(prog: Program, args: argparse.Namespace) -> str | None:
    """The task budget (D-LIMITS): a run whose estimated count of task
    instances and loop iterations exceeds --max-tasks is refused before it
    starts, naming the estimate and the flag."""
    from nem.runtime.budget import estimate_task_count

    limit = args.max_tasks or DEFAULT_MAX_TASKS
    runs = max(1, args.schedules or args.repeat)
    tasks = estimate_task_count(prog.op)
    if tasks * runs <= limit:
        return None
    what = "schedule" if args.schedules else "run"
    per = f" ({tasks} per {what} x {runs} {what}s)" if runs > 1 else ""
    return (
        f"the program runs an estimated {tasks * runs} tasks and loop iterations{per}, "
        f"above the limit of {limit} (D-LIMITS); raise it with --max-tasks "
        f"{tasks * runs} if that is meant"
    )


def _summary(r: RunResult, races_checked: bool) -> None:
    counts = ", ".join(f"{k} {v}" for k, v in r.counts.items())
    print(f"status: {r.status}")
    print(f"tasks run: {r.tasks_run}" + (f" ({counts})" if counts else ""))
    for line, n in sorted(r.max_active_iterations.items()):
        print(f"loop at line {line}: at most {n} iteration{'' if n == 1 else 's'} in flight")
    if r.cycle_count is not None:
        print(f"total cycles: {r.cycle_count}")
        print(f"{'unit':<14}{'busy':>10}  utilization")
        for u, b in r.unit_busy.items():
            util = b / r.cycle_count if r.cycle_count else 0.0
            print(f"{u:<14}{b:>10}  {util * 100:5.1f}%")
    print(f"races: {r.race_count}" if races_checked else "races: not checked (--no-races)")
    for race in r.races:
        print(f"  {race}")
    if r.race_count > len(r.races):
        print(f"  ... {r.race_count - len(r.races)} more")
    print(f"deadlocks: {1 if r.deadlock else 0}")
    if r.deadlock:
        print("  " + str(r.deadlock).replace("\n", "\n  "))
    for left in r.unconsumed:
        print(str(left))


def main(argv: Sequence[str] | None = None) -> None:
    from nem.cli.entry import guarded_main

    guarded_main("nem-run", run, argv)


if __name__ == "__main__":
    main()
