"""`nem-compile`: ONNX or linalg-on-tensors MLIR -> verified NEM in one command.

    nem-compile model.onnx --device npm_pro_x1 -o model.nem
    nem-compile model.mlir --device npm_pro_x1 -o model.nem --save-temps -v

Thin: parses arguments and calls `nem.compile` (docs/compile.md).  Writes the
`.nem` program and, when the model has weights, the sidecar
`<output stem>.weights.npz` (`nem-run model.nem --input model.weights.npz`).
Exit status: 0 compiled and verified, 1 a diagnostic (unsupported op, a
lowering or verification failure, the `mlir` extra missing), 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nem.cli.compile_interface import interface_lines
from nem.cli.error_limit import add_error_limit_argument, error_limit, print_diagnostics

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from nem.compile.pipeline import CompileResult, StageResult


def _parser() -> argparse.ArgumentParser:
    from nem.compile.pipeline import ROUTES, STAGE_NAMES
    from nem.dialect.limits import DEFAULT_MAX_NODES, MAX_MODEL_BYTES, MAX_SOURCE_BYTES

    p = argparse.ArgumentParser(
        prog="nem-compile",
        description="Compile an ONNX model (.onnx) or linalg on tensors (.mlir) to a "
        "verified NEM program (.nem text, or .nemb bytecode with the weights embedded).",
    )
    p.add_argument("input", help="model.onnx or model.mlir (linalg on tensors)")
    p.add_argument(
        "-o",
        dest="output",
        help="output .nem file (weights beside it in "
        "STEM.weights.npz) or .nemb bytecode (weights embedded); '-': .nem on "
        "standard output; /dev/null: no program and no weights written; default: the "
        "input's name with .nem",
    )
    p.add_argument(
        "--device",
        default="npm_pro_x1",
        help="target device (a shipped device or one found with -I; default npm_pro_x1)",
    )
    p.add_argument(
        "-I",
        dest="include_dirs",
        action="append",
        default=[],
        help="add a directory to the device search path",
    )
    p.add_argument(
        "--dump-after",
        choices=STAGE_NAMES,
        action="append",
        default=[],
        metavar="STAGE",
        help=f"print the text a stage leaves to stdout ({', '.join(STAGE_NAMES)}); repeatable",
    )
    p.add_argument(
        "--save-temps",
        action="store_true",
        help="write every stage's text beside the output "
        "(STEM.import.mlir, STEM.bufferize.mlir, STEM.tile.mlir) with each "
        "op's location, its ONNX node",
    )
    p.add_argument(
        "--tile-sizes",
        metavar="A,B,...",
        help="tile sizes, positive integers, for every loop band (outermost "
        "first) instead of the L1-derived ones",
    )
    p.add_argument(
        "--no-pipeline",
        action="store_true",
        help="no double buffering (tiles loaded, computed and stored in turn)",
    )
    p.add_argument(
        "--engines",
        type=int,
        metavar="N",
        help="engines to spread tiles over (default: all of the device's)",
    )
    p.add_argument(
        "--split-units",
        action="store_true",
        help="transform route: split tile loops' large copies over the engine's DMAs in the "
        "tile stage (longer compile; D-COMPILE-SPLIT-OPT)",
    )
    p.add_argument(
        "--no-split-nmus",
        action="store_true",
        help="transform route: keep a tile loop's convolution whole on one NMU instead of one "
        "band of output rows per NMU of the engine (D-COMPILE-NMU-SPLIT)",
    )
    p.add_argument(
        "--no-jam",
        action="store_true",
        help="leave the engine parts of a split nest one loop after the other instead of "
        "jamming them into one loop whose iterations run every engine (D-NEM-JAM-ENGINES)",
    )
    p.add_argument(
        "--no-split-transfers",
        action="store_true",
        help="one transfer per copy: do not split large L1 transfers over the engine's DMAs "
        "(D-NEM-SPLIT-TRANSFERS)",
    )
    p.add_argument(
        "--no-fuse",
        action="store_true",
        help="transform route: tile each op apart (no bias or elementwise epilogue run on "
        "a convolution's or pooling's tiles in L1, no elementwise prologue on a 1x1 "
        "convolution's input tiles; D-COMPILE-FUSE-L1)",
    )
    p.add_argument(
        "--no-fuse-chains",
        action="store_true",
        help="transform route: tile each elementwise op apart (no chain of elementwise ops "
        "fused into one op whose intermediates stay in L1; D-COMPILE-FUSE-CHAIN)",
    )
    p.add_argument(
        "--no-hoist",
        action="store_true",
        help="transform route: stage read-only tile copies (weight tiles) in every tile "
        "instead of once outside the loops they do not depend on (D-COMPILE-HOIST), and "
        "fuse no prologue before a convolution (D-COMPILE-FUSE-L1)",
    )
    p.add_argument(
        "--no-share-staged",
        action="store_true",
        help="transform route: a peeled tile stages again what its loop staged instead of "
        "reading that buffer (D-COMPILE-SHARE-STAGED), and each tile of a padded border "
        "fills a buffer of its own (D-COMPILE-FILL-TILES)",
    )
    p.add_argument(
        "--no-pad-in-place",
        action="store_true",
        help="a padded tensor is its source copied into a buffer filled whole with the "
        "padding, not computed into the padded buffer's interior (D-COMPILE-PAD-IN-PLACE)",
    )
    p.add_argument(
        "--no-transposed-reads",
        action="store_true",
        help="a transposed graph input (NCHW) is transposed into a DDR buffer of its own "
        "that its consumers read, not read through a strided view (D-COMPILE-LAYOUT)",
    )
    p.add_argument(
        "--no-concat-in-place",
        action="store_true",
        help="a concatenation's inputs are computed into buffers of their own and copied "
        "into it, not computed into its slices (D-COMPILE-CONCAT-IN-PLACE)",
    )
    p.add_argument(
        "--route",
        choices=ROUTES,
        default="transform",
        help="tiling route (default transform; affine: see docs/compile.md)",
    )
    p.add_argument(
        "--no-verify", action="store_true", help="skip nem-verify on the result (not recommended)"
    )
    p.add_argument(
        "--no-simplify",
        action="store_true",
        help="ONNX: import the graph as it is, without onnxscript's simplifier "
        "(constant folding, shape subgraphs, no-op removal)",
    )
    p.add_argument(
        "--no-demote-f64",
        action="store_true",
        help="ONNX: refuse f64 tensors instead of computing them in f32",
    )
    p.add_argument(
        "--no-demote-i64",
        action="store_true",
        help="ONNX: refuse int64 data instead of computing it in i32",
    )
    p.add_argument(
        "--bind",
        action="append",
        default=[],
        metavar="NAME=VALUES",
        help="ONNX: compile graph input NAME as a constant: numbers separated by commas "
        "or a .npy file (axes, starts, sizes, bounds given as inputs; D-COMPILE-BIND)",
    )
    p.add_argument(
        "--max-nodes",
        type=int,
        default=DEFAULT_MAX_NODES,
        metavar="N",
        help="ONNX: the compile budget, refuse a model of more than N nodes "
        f"(default {DEFAULT_MAX_NODES}, D-LIMITS)",
    )
    p.add_argument(
        "--max-model-bytes",
        type=int,
        default=MAX_MODEL_BYTES,
        metavar="N",
        help="ONNX: refuse a model file larger than N bytes with its external "
        f"data (default {MAX_MODEL_BYTES}, D-LIMITS)",
    )
    add_error_limit_argument(p)
    p.add_argument(
        "--max-source-bytes",
        type=int,
        default=MAX_SOURCE_BYTES,
        metavar="N",
        help=f"MLIR: refuse a source larger than N bytes (default {MAX_SOURCE_BYTES}, D-LIMITS)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="per-stage timings and the lowering's remarks on stderr",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress display on a terminal")
    p.add_argument(
        "--bisect",
        action="store_true",
        help="run every step's program on the same inputs and print the first "
        "that differs from onnxruntime (nem.compile.bisect); writes nothing",
    )
    p.add_argument(
        "--input",
        dest="bisect_inputs",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="with --bisect: an input array, or FILE.npz: every array of it "
        "(default: random, --seed)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="with --bisect: seed of random inputs; with --tune: of the search",
    )
    p.add_argument(
        "--tune",
        action="store_true",
        help="ONNX: choose each op's tile sizes by the timed cost model, op by op "
        "(D-COMPILE-TUNE; costs compile time, bounded by --tune-budget)",
    )
    p.add_argument(
        "--tune-budget",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="with --tune: stop searching after this many seconds (default 60)",
    )
    p.add_argument(
        "--tune-trials",
        type=int,
        default=12,
        metavar="N",
        help="with --tune: candidates per op at most (default 12)",
    )
    return p


def _attach_tile_sizes(argv: Sequence[str]) -> list[str]:
    """`--tile-sizes -1,2` as `--tile-sizes=-1,2`.  argparse takes a value
    that starts with '-' for an option unless it is a single number, so a
    size list with a negative first entry failed as 'expected one argument'
    and never reached `_tile_sizes`, which says what is wrong with it."""
    out, i = [], 0
    while i < len(argv):
        if (
            argv[i] == "--tile-sizes"
            and i + 1 < len(argv)
            and re.fullmatch(r"-\d[\d,-]*", argv[i + 1])
        ):
            out.append(f"--tile-sizes={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def _tile_sizes(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise SystemExit(
            _usage(f"--tile-sizes expects positive integers A,B,..., got {text!r}")
        ) from None
    if not sizes or min(sizes) < 1:
        raise SystemExit(_usage(f"--tile-sizes expects positive integers, got {text!r}"))
    return sizes


def _check_outputs(
    args: argparse.Namespace, src: str, out: str, stem: str, ext: str, null: bool
) -> str | None:
    """Why a file the compile would write cannot be written (D-FILE-PATHS),
    checked before any work: a typo must not cost a compile, and no output
    (the program, the weights beside it, --save-temps' stages) may be the
    model or an input array the command reads.  `null`: `out` is the null
    device, beside which no weights are written."""
    if args.bisect:
        return None
    from nem.cli.inputs import (
        InputError,
        check_distinct_outputs,
        check_output_path,
        external_data_inputs,
    )
    from nem.compile.pipeline import STAGES

    paths = [] if out == "-" else [(out, "-o")]
    if not out.endswith(".nemb") and ext == ".onnx" and not null:
        paths.append((stem + ".weights.npz", "-o (the weights beside it)"))
    if args.save_temps:
        paths += [(stem + s.suffix, "--save-temps") for s in STAGES if s.name != "lower"]
    inputs = [src, *(external_data_inputs(src, [p for p, _ in paths]) if ext == ".onnx" else [])]
    try:
        for path, flag in paths:
            check_output_path(path, flag, inputs)
        check_distinct_outputs(paths)
    except InputError as e:
        return str(e)
    return None


def _check_device(args: argparse.Namespace) -> int | None:
    """`--device` found (with -I) and `--engines` within its engines,
    checked before any work: command-line errors, printed as nem-opt and
    nem-run print them (an unknown device was an unprefixed `error:` of a
    failed stage 'device', too many engines a bare line of stage 'tile')."""
    from nem.devices.device_lookup import find_device
    from nem.dialect.diagnostics import NemDiagnosticError

    try:
        device = find_device(args.device, args.include_dirs)
    except NemDiagnosticError as e:
        print_diagnostics("nem-compile", e.diagnostics)
        return 1
    n = device.topology.num_engines
    if args.engines is not None and args.engines > n:
        return _usage(
            f"--engines {args.engines}: device {device.name} has {n} engine(s); "
            f"give N from 1 to {n}"
        )
    return None


def _usage(msg: str) -> int:
    print(f"nem-compile: error: {msg}", file=sys.stderr)
    return 2


class _Display:
    """What the compile shows as it goes: on a terminal a progress bar per
    stage (rich; nodes imported, ops tiled, top-level ops lowered); with -v
    each stage's time, and each pass of the lowering, as it ends; dumps
    and temps as stages finish."""

    def __init__(self, args: argparse.Namespace, stem: str):
        self.args, self.stem = args, stem
        self.stage: str | None = None
        """The stage running (an internal error names it)."""
        self.bar: Any = None
        self.task: Any = None
        if not args.no_progress and sys.stderr.isatty():
            try:
                from rich.console import Console
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    SpinnerColumn,
                    TextColumn,
                    TimeElapsedColumn,
                )

                self.bar = Progress(
                    SpinnerColumn(),
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    console=Console(stderr=True),
                    transient=True,
                )
                self.bar.start()
            except ImportError:
                self.bar = None

    def __call__(self, stage: str, result: StageResult | None) -> None:
        from nem.compile.pipeline import STAGES

        if result is None:
            self.stage = stage
            if self.bar is not None:
                desc = next(s.description for s in STAGES if s.name == stage)
                if self.task is not None:
                    self.bar.remove_task(self.task)
                self.task = self.bar.add_task(f"nem-compile: {stage} ({desc})", total=None)
            return
        self.say(f"nem-compile: {result.name:<10} {_times(result.seconds, result.cpu_seconds)}")
        if stage in self.args.dump_after:
            self.pause()
            sys.stdout.write(
                f"// ----- nem-compile: after {stage}\n"
                if stage != "lower"
                else f"# ----- nem-compile: after {stage}\n"
            )
            sys.stdout.write(result.text if result.text.endswith("\n") else result.text + "\n")
            sys.stdout.flush()
            self.resume()
        if self.args.save_temps and stage != "lower":
            suffix = next(s.suffix for s in STAGES if s.name == stage)
            Path(self.stem + suffix).write_text(
                result.located or result.text, encoding="utf-8"
            )  # D-COMPILE-TEMPS-LOC

    def step(self, stage: str, what: str, done: int, total: int) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.update(
                self.task, description=f"nem-compile: {stage}: {what}", completed=done, total=total
            )

    def substage(self, stage: str, name: str, seconds: float, cpu_seconds: float) -> None:
        self.say(f"nem-compile:   {stage}/{name:<22} {_times(seconds, cpu_seconds)}")

    def say(self, line: str) -> None:
        """A -v line, printed now (above the progress bar on a terminal)."""
        if not self.args.verbose:
            return
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=sys.stderr, flush=True)

    def pause(self) -> None:
        if self.bar is not None:
            self.bar.stop()

    def resume(self) -> None:
        if self.bar is not None:
            self.bar.start()

    def close(self) -> None:
        self.pause()
        self.bar = None


def run(argv: Sequence[str] | None = None) -> int:
    """nem-compile; run as a program (`argv` None), with the cyclic garbage
    collector paused throughout: the process ends after the compile, its IR
    kept out of the collector's sight until then (`keep_until_exit`), and
    the full collection each stage's end would start scans millions of IR
    objects to free them just before the exit (5% of a CNN's compile, D-RT-GC)."""
    from nem.cli.entry import keep_until_exit
    from nem.dialect.gc_pause import gc_paused
    from nem.dialect.limits import source_limit
    from nem.dialect.source_files import tracking_reads

    args = _parser().parse_args(_attach_tile_sizes(sys.argv[1:] if argv is None else argv))
    if args.max_source_bytes < 1:
        return _usage("--max-source-bytes needs N >= 1")
    with (
        source_limit(args.max_source_bytes),
        tracking_reads(),
        gc_paused(argv is None),
    ):  # D-FILE-PATHS, D-RT-GC
        try:
            return _run(args)
        except OSError as e:  # an output refused at the end: a file the compile read
            print(f"nem-compile: error: cannot write {e.filename}: {e.strerror}", file=sys.stderr)
            return 1
        finally:
            if argv is None:
                # frozen before the collector resumes: resumed first, its next
                # young collection would traverse every object the compile left
                keep_until_exit()


def _run(args: argparse.Namespace) -> int:
    from nem.compile import missing_extra

    why = missing_extra()
    if why:
        print(f"nem-compile: error: {why}", file=sys.stderr)
        return 1
    from nem.compile import CompileError, CompileOptions, compile_mlir, compile_onnx
    from nem.compile.errors import AVOIDING_OPTIONS

    src = args.input
    ext = Path(src).suffix.lower()
    if ext not in (".onnx", ".mlir"):
        return _usage(f"{src}: expected a .onnx model or .mlir (linalg on tensors) input")
    from nem.dialect.source_files import FileRefused, regular_file

    try:
        regular_file(src, "input")
    except FileRefused as e:
        print(f"nem-compile: error: {e}", file=sys.stderr)
        return 1
    out = args.output if args.output is not None else str(Path(src).with_suffix(".nem"))
    if args.engines is not None and args.engines < 1:
        return _usage("--engines needs N >= 1")
    for flag in ("max_nodes", "max_model_bytes", "max_source_bytes"):
        if getattr(args, flag) < 1:
            return _usage(f"--{flag.replace('_', '-')} needs N >= 1")
    # `-o /dev/null` discards the program and its weights; `-o -` and it name
    # no file beside which --save-temps' stages could go (D-FILE-PATHS)
    null = out != "-" and os.path.realpath(out) == os.devnull
    stem = (
        str(Path(src).with_suffix(""))
        if out == "-" or null
        else out.removesuffix(".nemb").removesuffix(".nem")
    )
    if why := _check_outputs(args, src, out, stem, ext, null):
        return _usage(why)
    if (status := _check_device(args)) is not None:
        return status
    from nem.cli.inputs import InputError, read_binding

    try:
        bind = tuple(read_binding(text) for text in args.bind)
    except InputError as e:
        return _usage(str(e))
    if bind and ext != ".onnx":
        return _usage("--bind takes a .onnx model")
    options = CompileOptions(
        bind=bind,
        device=args.device,
        tile_sizes=_tile_sizes(args.tile_sizes),
        pipeline=not args.no_pipeline,
        engines=args.engines,
        route=args.route,
        verify=not args.no_verify,
        include_dirs=tuple(args.include_dirs),
        simplify=not args.no_simplify,
        demote_f64=not args.no_demote_f64,
        demote_i64=not args.no_demote_i64,
        max_nodes=args.max_nodes,
        max_model_bytes=args.max_model_bytes,
        origins=out.endswith(".nemb"),
        located_temps=args.save_temps,
        split_units=args.split_units,
        split_nmus=not args.no_split_nmus,
        fuse=not args.no_fuse,
        fuse_chains=not args.no_fuse_chains,
        hoist=not args.no_hoist,
        share_staged=not args.no_share_staged,
        split_transfers=not args.no_split_transfers,
        jam=not args.no_jam,
        pad_in_place=not args.no_pad_in_place,
        concat_in_place=not args.no_concat_in_place,
        transposed_reads=not args.no_transposed_reads,
    )
    if args.tune and (ext != ".onnx" or args.bisect):
        return _usage("--tune takes a .onnx model (and no --bisect)")
    if not args.tune and (args.tune_budget != 60.0 or args.tune_trials != 12):
        return _usage("--tune-budget and --tune-trials are options of --tune")
    if not args.tune_budget > 0 or args.tune_trials < 1:  # NaN too
        return _usage("--tune-budget needs SECONDS > 0 and --tune-trials N >= 1")
    if args.seed < 0:  # numpy's generators take seeds >= 0
        return _usage(f"--seed needs a SEED >= 0, got {args.seed}")
    if args.bisect:
        if ext != ".onnx":
            return _usage("--bisect compares with onnxruntime: it takes a .onnx model")
        from nem.cli.bisect import run_bisect

        return run_bisect(
            src, options, args.bisect_inputs, args.seed, stem if args.save_temps else None
        )
    if args.bisect_inputs:
        return _usage("--input is an option of --bisect")
    display = _Display(args, stem)
    try:
        if args.tune:
            from nem.cli.roofline_cli import timed_score
            from nem.compile.tune import compile_tuned

            result, _ = compile_tuned(
                src,
                options,
                timed_score,
                args.tune_budget,
                args.seed,
                args.tune_trials,
                progress=display,
                stem=stem,
            )
        else:
            compile_fn = compile_onnx if ext == ".onnx" else compile_mlir
            result = compile_fn(src, options, progress=display, stem=stem)
    except CompileError as e:
        display.close()
        if e.diagnostics is not None:
            with error_limit("nem-compile", args.error_limit):  # D-CLI-ERROR-LIMIT
                print_diagnostics("nem-compile", e.diagnostics)
        else:
            print(str(e), file=sys.stderr)
        print(f"nem-compile: failed in stage '{e.stage}'", file=sys.stderr)
        if e.stage == "lower" and not args.save_temps and out != "-":
            print(
                f"nem-compile: the lowering's locations are in {stem}.tile.mlir, the tiled "
                "program: rerun with --save-temps to write it",
                file=sys.stderr,
            )
        return 1
    except Exception as e:  # a bug: `guarded_main` reports it, with these notes
        display.close()
        where = f" '{display.stage}'" if display.stage is not None else ""
        e.add_note(f"in nem-compile's stage{where}, compiling {src}")
        e.add_note(f"options that turn one transformation off may avoid it: {AVOIDING_OPTIONS}")
        raise
    display.close()
    # timed as a stage of its own: encoding DenseNet-121's .nemb takes 6 s,
    # which the stages' total left out (session 50)
    started = time.perf_counter(), time.process_time()
    if out.endswith(".nemb"):
        try:
            _write_nemb(out, src, result)
        except ValueError as e:
            print(f"nem-compile: error: -o {out}: {e}", file=sys.stderr)
            return 1
        weights = ""
    else:
        from nem.cli.common import output_file

        with output_file(out) as f:
            f.write(result.nem)
        weights = ""
        if result.interface.weights and not null:  # with -o -: beside the input (STEM is its name)
            weights = stem + ".weights.npz"
            result.save_weights(weights)
            if out == "-":  # nothing on stdout but the program: say where they went
                print(f"nem-compile: weights written to {weights}", file=sys.stderr)
    write = time.perf_counter() - started[0], time.process_time() - started[1]
    if args.verbose:
        print(f"nem-compile: {'write':<10} {_times(*write)}", file=sys.stderr)
    for w in result.warnings:  # with or without -v (D-COMPILE-LOW-SHARE)
        print(w, file=sys.stderr)
    if args.verbose:
        # without --save-temps the tiled program is not written: its remarks
        # are led by their ONNX nodes, or the model (D-COMPILE-LOC)
        remarks = "\n".join(result.remarks)
        print(remarks if args.save_temps else result.located(remarks), file=sys.stderr)
        total = _times(
            sum(r.seconds for r in result.stages) + write[0],
            sum(r.cpu_seconds for r in result.stages) + write[1],
        )
        print(f"nem-compile: {'total':<10} {total}", file=sys.stderr)
        if weights:
            from nem.cli.common import command_line, path_word

            n = len(result.interface.weights)
            print(
                f"weights: {weights} ({n} buffer{'s' if n != 1 else ''}; "
                f"{command_line(['nem-run', path_word(out), '--input', path_word(weights)])})",
                file=sys.stderr,
            )
        for line in interface_lines(result.interface, out, weights):
            print(line, file=sys.stderr)
    return 0


def _times(seconds: float, cpu_seconds: float) -> str:
    """`  812.3 ms wall   790.1 ms cpu`, the times of a -v line (docs/compile.md,
    "What -v prints")."""
    return f"{seconds * 1000:9.1f} ms wall {cpu_seconds * 1000:9.1f} ms cpu"


def _write_nemb(out: str, src: str, result: CompileResult) -> None:
    """`-o FILE.nemb`: the verified program as NEM bytecode with the weights
    embedded as its Data section (D-BC-DATA, D-COMPILE-WEIGHTS): one file to
    ship, `nem-run FILE.nemb` needs no sidecar.  Its source locations name
    FILE.nemb (there is no FILE.nem)."""
    from nem.cli.common import output_file

    data = nemb_bytes(result, out, src)
    with output_file(out, "wb") as f:
        f.write(data)


def nemb_bytes(result: CompileResult, out: str, src: str) -> bytes:
    """The bytes `nem-compile -o OUT` writes for `result` (compiled from the
    model file `src`): also what a bench loads to report per ONNX node
    (bench/bench_roofline.py --per-node)."""
    from nem.compile.lower import Verified
    from nem.dialect.limits import own_source
    from nem.frontends.bytecode.writer import Embedded, NotEncodable, WriteOptions, write_nemb
    from nem.frontends.nem_text.parser import parse_nem

    # no .nem file is written: the locations name the .nemb itself, at the
    # lines of its text form, `nem-opt FILE.nemb -t nem`, by the empty file
    # name that a reader takes for the file it reads, so the bytes do not
    # depend on `out` (D-COMPILE-NEMB-LOC); the program nem-verify read back
    # is taken rather than the text parsed again (`Verified`)
    verified, result.verified = result.verified, None
    if verified is None:
        with own_source(result.nem):
            verified = Verified(parse_nem(result.nem, out), out)
    module = verified.module
    _with_nodes(module, result.origins)
    embed = [
        Embedded(name, np.ascontiguousarray(array).tobytes())
        for name, array in result.interface.weights.items()
    ]
    options = WriteOptions(
        embed=embed, build={"source": src, "producer-tool": "nem-compile"}, self_file=verified.file
    )
    try:
        return write_nemb(module, options)
    except NotEncodable as e:
        raise ValueError(str(e)) from None


def _with_nodes(module: ModuleOp, origins: list[str | None]) -> None:
    """Each statement lowered from an ONNX node located `fused[FILE.nemb:LINE:COL,
    NODE]` (`fuse_origin`), which the writer keeps in the Debug section and `nem-run --roofline`
    groups by (D-BC-NODES).  `origins` is in `printed_statements` order, the
    order `module`, the printed text read back, gives them."""
    from xdsl.dialects.builtin import LocationAttr

    from nem.dialect.diagnostics import fuse_origin
    from nem.frontends.nem_text.printer import printed_statements
    from nem.frontends.upstream_dialects.mlir_input import parse_location

    statements = list(printed_statements(module))
    if len(statements) != len(origins):  # not the lowered program's statements: no nodes
        return
    parsed: dict[str, LocationAttr | None] = {}
    for op, origin in zip(statements, origins):
        if origin is not None:
            if origin not in parsed:
                parsed[origin] = parse_location(origin)
            node = parsed[origin]
            if node is not None:
                op.location = fuse_origin(op.location, node)


def main(argv: Sequence[str] | None = None) -> None:
    from nem.cli.entry import guarded_main

    guarded_main("nem-compile", run, argv)


if __name__ == "__main__":
    main()
