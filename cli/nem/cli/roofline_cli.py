"""`nem-run --mode timed --roofline [--json] [--roofline-plot FILE.png] [--onnx M.onnx]`:
the roofline report of a timed run (D-RT-ROOFLINE, D-CLI-ROOFLINE), as text
after the run's summary, as one JSON document on standard output (`--json`,
for tools: nothing else is printed there), and as a per-group bar chart
beside the Gantt chart of `--timeline`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nem.compile.tune import Timing
    from nem.frontends.onnx.traffic import NodeTraffic
    from nem.runtime.roofline import Least
    from nem.runtime.session import Program, RunResult, Session


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--roofline",
        action="store_true",
        help="with --mode timed: print, for the program and each group of tasks "
        "(ONNX node, loop nest, top-level segment), the cycles taken (a group's: "
        "its busy cycles), the bound "
        "of the timed cost model, their ratio, the unit kind that binds and "
        "each unit kind's utilization (D-RT-ROOFLINE)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="with --roofline: print the report as one JSON document on standard "
        "output instead of the text summary",
    )
    p.add_argument(
        "--roofline-plot",
        metavar="FILE.png",
        help="with --roofline: a bar chart of each group's cycles beside its bound",
    )
    p.add_argument(
        "--onnx",
        metavar="MODEL.onnx",
        help="with --roofline: the ONNX model the program was compiled from (nem-compile "
        "-o M.nemb); each node's row gets its ideal bound, the bound of the node's tensors "
        "moved once and its MACs (D-RT-ROOFLINE)",
    )


def usage_problem(args: argparse.Namespace) -> str | None:
    """Flags that do not go together (a usage error, before any work)."""
    if args.json and not args.roofline:
        return "--json prints the roofline report: it needs --roofline"
    if args.onnx and not args.roofline:
        return "--onnx gives the roofline report's ideal bounds: it needs --roofline"
    if args.roofline_plot is not None and not args.roofline:
        return "--roofline-plot draws the roofline report: it needs --roofline"
    if args.roofline and args.mode != "timed":
        return (
            "--roofline needs --mode timed: the cycles and the bound come from the timed "
            "cost model (D-RT-COST); a functional run counts scheduler steps, not cycles"
        )
    return None


def paths(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The files the report writes, for nem-run's checks before the run."""
    return [(args.roofline_plot, "--roofline-plot")] if args.roofline_plot else []


def write_plot(session: Session, args: argparse.Namespace, least: Least | None = None) -> list[str]:
    """The bar chart (before the text, as nem-run writes every file first);
    `least`: the nodes' least work (`least_work`), whose ideal bounds it
    marks (an outside review, session 53: with `--onnx` the chart had no
    tick, byte-identical to the one without)."""
    if not args.roofline_plot:
        return []
    from nem.runtime.roofline_plot import bar_chart_png

    bar_chart_png(session.roofline(least), args.roofline_plot)
    return [f"roofline plot: {args.roofline_plot}"]


def least_work(args: argparse.Namespace) -> tuple[NodeTraffic | None, str | None]:
    """The nodes of `--onnx`'s model, whose least work gives the ideal
    bounds (D-RT-ROOFLINE, "Ideal bound"), read and validated as
    nem-compile reads a model (D-COMPILE-VALIDATE) before the run; or the
    diagnostic saying why the file cannot be read."""
    if not args.onnx:
        return None, None
    from nem.dialect.limits import DEFAULT_MAX_NODES
    from nem.frontends.onnx import OnnxImportError
    from nem.frontends.onnx.traffic import NodeTraffic
    from nem.frontends.onnx.validate import load_model, validate

    try:
        model = load_model(args.onnx, args.onnx)
        validate(model, args.onnx, DEFAULT_MAX_NODES)
    except OnnxImportError as e:
        return None, e.render()
    return NodeTraffic(model), None


def foreign_model(
    args: argparse.Namespace, prog: Program, model: NodeTraffic
) -> tuple[str | None, str | None]:
    """(error, warning) when `--onnx`'s model is not the one `prog` was
    compiled from, read off the ONNX nodes its tasks are located at
    (D-BC-NODES): an error when one of them is not a node of the model, or
    one of another op type (every ideal bound would be another model's, or
    none: an outside review, session 52, saw a different model's ideal
    bounds printed without a word); a warning when all match but the model
    the locations name is another file (a copy, or the model edited since:
    the ideal bounds take the shapes of the file given; a program compiled
    from a `ModelProto` names none).  A program with no node (`.nem` text)
    has only its ports checked, and a warning that `--onnx` is unused: its
    report has no node rows (an outside review, session 55: the flag was
    taken and did nothing)."""
    import os

    from nem.dialect.diagnostics import LAYOUT, located_nodes

    nodes: dict[tuple[str, str], str] = {}  # (name, op type) -> the model file named
    for tpl in prog.compiled.tasks:
        for name, op, file, _ in located_nodes(str(tpl.op.location)):
            if op != LAYOUT:  # (a graph input's or output's layout: no node)
                nodes.setdefault((name, op), file)
    # the files the locations name (not `<model>`: compiled from a ModelProto)
    files = {os.path.realpath(f) for f in nodes.values() if os.path.isfile(f)}
    named = f" ({', '.join(sorted(files))})" if files else ""
    fix = "give --onnx the model the program was compiled from"
    if (port := unlike_port(prog, model)) is not None:
        return (
            f"nem-run: error: --onnx {args.onnx} is not the model {args.program} was "
            f"compiled from{named}: {port}\nfix: {fix}",
            None,
        )
    if not nodes:
        return None, (
            f"nem-run: warning: --onnx {args.onnx} is unused: no task of {args.program} "
            "names an ONNX node (nem-compile writes them into M.nemb, not into .nem text: "
            "compile with -o M.nemb)"
        )
    for name, op in nodes:
        theirs = model.op_type(name)
        if theirs != op:
            there = f"a {theirs} node there" if theirs else "not a node of it"
            return (
                f"nem-run: error: --onnx {args.onnx} is not the model {args.program} was "
                f"compiled from{named}: its node '{name}' ({op}) is {there}\nfix: {fix}",
                None,
            )
    if files and files != {os.path.realpath(args.onnx)}:
        return None, (
            f"nem-run: warning: {args.program} was compiled from {', '.join(sorted(files))}, "
            f"not --onnx {args.onnx}: their nodes match by name and op type; the ideal "
            f"bounds take the shapes of {args.onnx}"
        )
    return None, None


def unlike_port(prog: Program, model: NodeTraffic) -> str | None:
    """How a model input or output differs from the buffer the program
    holds it in (D-COMPILE-IFACE), its bytes or element type, None where
    none does: the ideal bounds are priced in the model's types and shapes,
    so an f32 model given for its f16 program showed ideal ratios under 1
    (an outside review, session 53).  A port without a buffer (an integer
    input only shapes read, D-COMPILE-IFACE) is not compared."""
    for port in model.ports:
        held = prog.memory.buffers.get(port.buffer)
        if held is None or port.nbytes is None:
            continue
        if held.size != port.nbytes or (held.elem_hint or port.elem) != port.elem:
            theirs = f"{held.elem_hint or 'untyped'}, {held.size:,} B"
            return (
                f"its {port.onnx_name!r} is {port.elem}, {port.nbytes:,} B; the program's "
                f"buffer {port.buffer} is {theirs}"
            )
    return None


def print_report(
    session: Session,
    result: RunResult,
    args: argparse.Namespace,
    model: NodeTraffic | None = None,
    repeat: dict[str, object] | None = None,
) -> None:
    """The report: text, or with --json the JSON document (with the run's
    status, race count, deadlock witness and each unit instance's
    utilization (the summary's table), and `--repeat`'s wall times
    (`repeat`, which the text prints above the report), so a tool needs
    nothing else from standard output; diagnostics stay on standard
    error); `model`: `--onnx`'s nodes (`least_work`), for the ideal
    bounds and the nodes no task names."""
    rep = session.roofline(model.of, model.nodes) if model else session.roofline()
    if args.json:
        doc = {
            "status": result.status,
            "tasks_run": result.tasks_run,
            "races": result.race_count,
            "deadlock": str(result.deadlock) if result.deadlock else None,
            "unit_utilization": {u: round(x, 4) for u, x in result.utilization().items()},
            **({"repeat": repeat} if repeat is not None else {}),
            **rep.to_json(),
        }
        print(json.dumps(doc, indent=1, sort_keys=True))
    else:
        print(rep.to_text())


def timed_score(nem: str, device: str) -> Timing | None:
    """The timed cycles and roofline bound of the `.nem` program `nem` on
    `device` (one run, buffers zero), None if it does not run to its end:
    `--tune`'s score and the gap it orders its search by (D-COMPILE-TUNE)."""
    from nem.compile.tune import Timing
    from nem.runtime.api import NemInterpreter

    it = NemInterpreter(device=device, trace=False)
    it.set_mode("timed")
    it.load_string(nem, file="nest.nem")
    session = it.start()
    if session.run_to_end().status != "completed":
        return None
    total = session.roofline().total
    return Timing(total.cycles, total.bound)
