"""The command line of `nem-run` (see `nem.cli.nem_run` for what it does)."""

from __future__ import annotations

import argparse

from nem.cli import roofline_cli
from nem.cli.error_limit import add_error_limit_argument
from nem.dialect.limits import DEFAULT_MAX_KERNEL_OPS, DEFAULT_MAX_TASKS, MAX_SOURCE_BYTES


def parser() -> argparse.ArgumentParser:
    """`nem-run`'s options; parsed first, since --help and --version need
    nothing else."""
    p = argparse.ArgumentParser(
        prog="nem-run",
        description="Run a NEM program (.nem text, .nemb bytecode or NEM IR .mlir) on the "
        "reference runtime.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "program",
        help="the program (.nem, .nemb or .mlir, told apart by its contents); '-' reads it "
        "from standard input (e.g. piped from nem-opt -t nem)",
    )
    p.add_argument(
        "--device", help="target device (name or .nem file); overrides the program's directive"
    )
    p.add_argument(
        "-I",
        dest="include_dirs",
        action="append",
        default=[],
        help="include / device search directory",
    )
    p.add_argument(
        "--mode",
        choices=("functional", "timed"),
        default=None,
        help="functional (the default): tasks in a schedule's order; timed: each at its "
        "earliest start under the cost model (D-RT-COST)",
    )
    p.add_argument(
        "--timed",
        action="store_true",
        help="same as --mode timed (what users and issue 35 write)",
    )
    p.add_argument("--schedule", choices=("source", "random"), default="source")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--schedules",
        type=int,
        metavar="K",
        help="run K random schedules (seeds SEED..SEED+K-1) and compare final memory",
    )
    p.add_argument(
        "--explore",
        action="store_true",
        help="run one schedule of every distinct interleaving (small programs): "
        "report every race and deadlock with a witness schedule and whether the "
        "space was covered completely",
    )
    p.add_argument(
        "--max-schedules",
        type=int,
        default=1000,
        metavar="N",
        help="--explore runs at most N schedules (default 1000)",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="processes for --schedules/--explore (default: every core; results "
        "do not depend on N)",
    )
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="write FILE into buffer or region NAME before the run: a .npy array "
        "must have NAME's element type (and a region's shape); any other file is "
        "raw bytes; a bare FILE.npz writes each of its arrays into the buffer or "
        "region of the same name (nem-compile's weights sidecar)",
    )
    p.add_argument(
        "--input-raw",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="as --input, but a .npy array's bytes are written as they are, "
        "whatever its dtype and shape",
    )
    p.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="NAME[:T[SHAPE]]=FILE",
        help="write buffer or region NAME to FILE after the run (.npy: a typed "
        "array, NAME's element type and shape, or T[SHAPE] such as "
        "Y:f16[64,32], T[] a 0-d array such as Y:f32[]; any other file: the "
        "array's bytes)",
    )
    p.add_argument(
        "--random-inputs",
        type=int,
        metavar="SEED",
        help="fill DDR and L2 buffers with seeded random values before running",
    )
    p.add_argument(
        "--trace",
        metavar="FILE",
        help="trace as Chrome/Perfetto JSON or .csv (timed: with the critical path's track)",
    )
    p.add_argument(
        "--timeline",
        metavar="FILE.png",
        help="Gantt chart of the schedule (timed: and a critical path row)",
    )
    p.add_argument(
        "--profile",
        metavar="FILE.json",
        help='cost-model overrides, e.g. {"DMA": {"bandwidth": 64, "latency": 8}}: '
        "rates from 0.001 to 1e9 per cycle, latencies whole cycles from 0 to 1e9",
    )
    p.add_argument("--ddr-size", type=int, default=None, help="DDR bytes (default 256 MB)")
    p.add_argument(
        "--max-tasks",
        type=int,
        default=None,
        metavar="N",
        help="refuse a run whose estimated count of tasks and loop iterations "
        f"(times --schedules or --repeat) exceeds N (default {DEFAULT_MAX_TASKS})",
    )
    p.add_argument(
        "--max-kernel-ops",
        type=int,
        default=None,
        metavar="N",
        help='refuse an escape-hatch task (compute op="mlir.kernel") whose kernel '
        f"does more than N scalar operations (default {DEFAULT_MAX_KERNEL_OPS})",
    )
    p.add_argument(
        "--max-source-bytes",
        type=int,
        default=MAX_SOURCE_BYTES,
        metavar="N",
        help=f"read a program or include of up to N bytes (default {MAX_SOURCE_BYTES}, D-LIMITS)",
    )
    add_error_limit_argument(p)
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run the program N times on one memory, the inputs written again "
        "before each run, and print the time taken to prepare the runs (schedule "
        "and race-check them once, D-RT-PREPARE), the wall time of the first run "
        "and the best and median of the others (replayed when the schedule "
        "allows, D-RT-REPLAY); the summary, outputs and trace are the last run's",
    )
    roofline_cli.add_arguments(p)
    p.add_argument("--no-races", action="store_true", help="disable race detection")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (it is only ever shown on a terminal)",
    )
    from nem.cli.common import version_text

    p.add_argument(
        "--version",
        action="version",
        version=version_text("nem-run"),
        help="print the version of nem-run and of what it runs on, and exit",
    )
    return p


def resolve_mode(args: argparse.Namespace) -> str | None:
    """Set `args.mode` from `--mode` and `--timed` (default functional);
    the usage error where they disagree (an outside review, session 55:
    `--mode functional --timed` ran timed without a word)."""
    if args.timed and args.mode == "functional":
        return "--timed is --mode timed: it excludes --mode functional"
    args.mode = "timed" if args.timed else args.mode or "functional"
    return None


def usage_problem(args: argparse.Namespace) -> str | None:
    """What makes the command line unusable before any work (exit 2,
    D-CLI-EXIT): a flag value out of range, or flags that do not go
    together (an outside user's `--schedules 2 --trace` wrote no trace and
    said nothing; `--mode timed --schedule random` printed "schedule timed"
    and ignored the random schedule, session 42)."""
    if args.schedules is not None and args.schedules < 1:
        return "--schedules needs K >= 1"
    if args.max_schedules < 1:
        return "--max-schedules needs N >= 1"
    if args.jobs is not None and args.jobs < 1:
        return "-j needs N >= 1"
    if args.explore and (args.schedules or args.mode == "timed"):
        return "--explore runs functional schedules; it excludes --schedules and --mode timed"
    if args.mode == "timed" and args.schedule == "random":
        return (
            "--schedule random picks among the ready tasks at random; --mode timed runs each "
            "task at its earliest start (schedule timed): drop one of them"
        )
    if args.schedules and (args.mode == "timed" or args.trace or args.timeline):
        return (
            "--schedules compares functional random schedules; it excludes --mode "
            "timed, --trace and --timeline (trace one of them: --schedule random --seed S)"
        )
    if args.repeat < 1:
        return "--repeat needs N >= 1"
    if args.repeat > 1 and (args.schedules or args.explore):
        return "--repeat times one schedule; it excludes --schedules and --explore"
    if args.random_inputs is not None and args.random_inputs < 0:
        return "--random-inputs needs a SEED >= 0"
    if args.seed < 0:  # Python's random takes -S as S (api.check_seed)
        return "--seed needs a SEED >= 0"
    if args.max_tasks is not None and args.max_tasks < 1:
        return "--max-tasks needs N >= 1"
    if args.max_kernel_ops is not None and args.max_kernel_ops < 1:
        return "--max-kernel-ops needs N >= 1"
    if args.ddr_size is not None and args.ddr_size < 1:
        return "--ddr-size needs a positive number of bytes"
    return None
