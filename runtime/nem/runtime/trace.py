"""Execution traces: a text table, Chrome/Perfetto JSON and CSV.

A trace entry is `(step, task template, iteration, unit, start, end, bytes)`.
In timed mode start/end are cycles; in functional mode a task occupies one
step.  Time units are stated wherever times are written (decision
D-RT-TRACE-TIME): the CSV columns are `start_cycle,end_cycle` (or
`start_step,end_step`), the timeline's axis says cycles or steps, and the
JSON trace, whose `ts`/`dur` the format defines in microseconds, maps one
cycle (step) to one nanosecond: `ts = cycles / 1000` with
`"displayTimeUnit": "ns"`, so viewers show durations in ns equal to cycles.  JSON output has one process per engine (`engine k`, plus `device` for
device-wide units such as sDMA) and one named thread per unit instance, and
is written with sorted keys and no wall-clock data, so the same schedule
gives byte-identical files.

A timed run's critical path (D-RT-ROOFLINE, `nem.runtime.critical_path`)
is drawn beside the units: in the JSON a process and thread `critical
path` with a slice per segment (named by its group, `args.entered_by` what
its start waited for), in the CSV a row per segment with unit
`critical-path` (task: the group, op: what its start waited for), in the
timeline a `critical path` row.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from nem.runtime.critical_path import Segment

PATH = "critical path"
"""The name of the critical path's process, thread and timeline row."""

CHAR_PX = 6
"""The width of a character of the timeline's smallest text, in pixels (at
its 100 dpi): a critical-path segment is named only where its name fits."""

CSV_HEADER = ["step", "task", "op", "iteration", "line", "engine", "unit", "start", "end", "bytes"]
"""The CSV columns; `start`/`end` get the time unit appended (`start_cycle`)."""


def time_unit(mode: str) -> str:
    """What trace times count: cycles in timed mode, scheduler steps otherwise."""
    return "cycle" if mode == "timed" else "step"


def csv_header(mode: str = "functional") -> list[str]:
    unit = time_unit(mode)
    return [f"{c}_{unit}" if c in ("start", "end") else c for c in CSV_HEADER]


class TracedTask(Protocol):
    """What a trace reads of a task's statement (`engine.TaskTpl`)."""

    label: str
    opcode: str
    line: int
    sync: bool


Unit = tuple[int, str, int]
"""A unit instance: (engine, unit type, index); engine -1: device-wide."""

TraceEntry = tuple[int, TracedTask, str, Unit, int, int, int]
"""One executed task: (step, statement, iteration, unit, start, end, bytes)."""


def _unit_parts(unit: Unit) -> tuple[str, str]:
    e, u, i = unit
    return ("device" if e == -1 else str(e)), f"{u}[{i}]"


def rows(trace: Iterable[TraceEntry], file: str = "") -> Iterator[list[object]]:
    for step, tpl, it, unit, start, end, nbytes in trace:
        eng, uname = _unit_parts(unit)
        yield [step, tpl.label, tpl.opcode, it, tpl.line, eng, uname, start, end, nbytes]


def to_csv(
    trace: Iterable[TraceEntry], mode: str = "functional", path: Sequence[Segment] = ()
) -> str:
    """The trace's rows, then a `critical-path` row per segment of `path`."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csv_header(mode))
    for r in rows(trace):
        w.writerow(r)
    for seg in path:
        w.writerow(
            ["", seg.name, seg.entered_by, "", "", "", "critical-path", seg.start, seg.end, ""]
        )
    return buf.getvalue()


def to_chrome(
    trace: Iterable[TraceEntry],
    program: str = "nem",
    mode: str = "functional",
    path: Sequence[Segment] = (),
) -> str:
    """Chrome trace-event JSON (loads in chrome://tracing and ui.perfetto.dev);
    `path`: the critical path's segments, a process of their own."""
    pids: dict[str, int] = {}
    tids: dict[tuple[str, str], int] = {}
    events = []
    body = []
    for step, tpl, it, unit, start, end, nbytes in trace:
        eng, uname = _unit_parts(unit)
        if eng not in pids:
            pids[eng] = len(pids)
        key = (eng, uname)
        if key not in tids:
            tids[key] = len(tids)
        args = {"line": tpl.line, "op": tpl.opcode, "step": step, "bytes": nbytes}
        if it:
            args["iteration"] = it
        # one cycle (step) = 1 ns; the format's ts/dur are microseconds
        body.append(
            {
                "name": tpl.label,
                "cat": tpl.opcode,
                "ph": "X",
                "pid": pids[eng],
                "tid": tids[key],
                "ts": start / 1000,
                "dur": max(end - start, 0) / 1000,
                "args": args,
            }
        )
    for eng, pid in pids.items():
        events.append(
            {
                "name": "process_name",
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "args": {"name": "device" if eng == "device" else f"engine {eng}"},
            }
        )
        events.append(
            {
                "name": "process_sort_index",
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "args": {"sort_index": pid},
            }
        )
    for (eng, uname), tid in tids.items():
        events.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": pids[eng],
                "tid": tid,
                "args": {"name": uname},
            }
        )
    events.extend(body)
    if path:
        pid = len(pids)
        meta: list[tuple[str, dict[str, object]]] = [
            ("process_name", {"name": PATH}),
            ("process_sort_index", {"sort_index": pid}),
            ("thread_name", {"name": PATH}),
        ]
        events += [{"name": n, "ph": "M", "pid": pid, "tid": 0, "args": a} for n, a in meta]
        events += [
            {
                "name": seg.name,
                "cat": "critical-path",
                "ph": "X",
                "pid": pid,
                "tid": 0,
                "ts": seg.start / 1000,
                "dur": (seg.end - seg.start) / 1000,
                "args": {"group": seg.group, "entered_by": seg.entered_by},
            }
            for seg in path
        ]
    tunit = time_unit(mode)
    doc = {
        "displayTimeUnit": "ns",
        "otherData": {
            "program": program,
            "mode": mode,
            "time_unit": f"{tunit}s",
            "time_scale": f"1 {tunit} is shown as 1 ns",
        },
        "traceEvents": events,
    }
    return json.dumps(doc, sort_keys=True, indent=None, separators=(",", ":")) + "\n"


def to_table(trace: Iterable[TraceEntry], timed: bool) -> str:
    out = []
    if timed:
        out.append(
            f"{'Step':<6}{'Task':<14}{'Type':<18}{'Start':>8}{'End':>8}  "
            f"{'Unit':<10}{'Engine':<7}Iteration"
        )
    else:
        out.append(f"{'Step':<6}{'Task':<14}{'Type':<18}{'Unit':<10}{'Engine':<7}Iteration")
    for step, tpl, it, unit, start, end, _n in trace:
        eng, uname = _unit_parts(unit)
        kind = f"{tpl.opcode}.{'sync' if tpl.sync else 'async'}"
        if timed:
            out.append(
                f"{step:<6}{tpl.label:<14}{kind:<18}{start:>8}{end:>8}  {uname:<10}{eng:<7}{it}"
            )
        else:
            out.append(f"{step:<6}{tpl.label:<14}{kind:<18}{uname:<10}{eng:<7}{it}")
    return "\n".join(out)


def export(
    trace: Iterable[TraceEntry],
    path: str,
    program: str = "nem",
    mode: str = "functional",
    critical: Sequence[Segment] = (),
) -> None:
    """`trace` written to `path` (CSV when it ends in `.csv`, else Chrome
    JSON), with the critical path's segments `critical`."""
    text = (
        to_csv(trace, mode, critical)
        if str(path).endswith(".csv")
        else to_chrome(trace, program, mode, critical)
    )
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def lane_key(unit: tuple[int, str, int]) -> tuple[int, str, int]:
    """A Gantt row's place: engine by engine (E0's units, then E1's, ...,
    device-wide units last), each engine's units by name and index."""
    engine, name, index = unit
    return (engine if engine >= 0 else 1 << 30, name, index)


def lane_label(unit: tuple[int, str, int]) -> str:
    eng, uname = _unit_parts(unit)
    return f"{'dev' if eng == 'device' else 'E' + eng}.{uname}"


def opcode_colors(opcodes: list[str]) -> dict[str, tuple[float, ...]]:
    """A distinct colour per opcode of a chart: matplotlib's qualitative
    tab10 or tab20 up to 20 opcodes, else evenly spaced hues of `turbo`
    (tab10 alone made `transfer` and `clamp` share one with 12 opcodes)."""
    import matplotlib

    n = len(opcodes)
    if n <= 20:
        cmap = matplotlib.colormaps["tab10" if n <= 10 else "tab20"]
        return {op: tuple(cmap(k)) for k, op in enumerate(opcodes)}
    cmap = matplotlib.colormaps["turbo"]
    return {op: tuple(cmap(k / (n - 1))) for k, op in enumerate(opcodes)}


def timeline_png(
    trace: Sequence[TraceEntry],
    path: str,
    title: str = "",
    mode: str = "timed",
    critical: Sequence[Segment] = (),
) -> None:
    """A Gantt chart (one row per engine/unit, and a last `critical path`
    row of `critical`'s segments, `path_row`); needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise RuntimeError(
            "not supported: --timeline needs matplotlib; install it with "
            "pip install 'nem-toolchain[viz]'"
        ) from e
    units = sorted({unit for _step, _tpl, _it, unit, _s, _e, _n in trace}, key=lane_key)
    lanes = {unit: row for row, unit in enumerate(units)}
    # one artist per opcode and row, holding all its bars: an artist per
    # task instance made the chart 4x the run's own time (issue 34)
    bars: dict[str, dict[int, list[tuple[int, int]]]] = {}
    for _step, tpl, _it, unit, start, end, _n in trace:
        rows = bars.setdefault(tpl.opcode, {})
        rows.setdefault(lanes[unit], []).append((start, max(end - start, 1)))
    fig, ax = plt.subplots(figsize=(12, 1 + 0.5 * max(len(lanes) + bool(critical), 1)))
    colors = opcode_colors(sorted(bars))
    for opcode, by_row in sorted(bars.items()):
        for j, (row, spans) in enumerate(sorted(by_row.items())):
            ax.broken_barh(
                spans,
                (row - 0.4, 0.8),
                facecolors=colors[opcode],
                label=opcode if j == 0 else None,
            )
    labels = [lane_label(u) for u in units]
    if critical:
        path_row(ax, critical, len(lanes))
        labels.append(PATH)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"{time_unit(mode)}s")
    ax.set_title(title)
    # beside the rows, not over them (an outside reading, session 43: it hid bars)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    if critical:  # named once the layout has fixed the row's width
        path_labels(ax, critical, len(lanes))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def path_row(ax: Any, critical: Sequence[Segment], row: int) -> None:
    """The critical path's segments as timeline row `row`, black and white
    alternating at each segment (each a change of group; colours the opcodes'
    palettes never give)."""
    spans: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])
    for k, seg in enumerate(critical):
        spans[k % 2].append((seg.start, max(seg.end - seg.start, 1)))
    for k, shade in enumerate(("black", "white")):
        if spans[k]:
            label = f"{PATH} (a segment per change of group)" if k == 0 else None
            ax.broken_barh(
                spans[k], (row - 0.4, 0.8), facecolors=shade, edgecolors="black", label=label
            )


def path_labels(ax: Any, critical: Sequence[Segment], row: int) -> None:
    """Each segment of `path_row` named with what entered it (`name <-
    kind`), or by its name alone, where that fits in it at the axes' final
    width (so a path of thousands of segments stays legible)."""
    length = critical[-1].end - critical[0].start
    px = ax.get_window_extent().width / max(length, 1)
    for k, seg in enumerate(critical):
        room = (seg.end - seg.start) * px
        text = next(
            (t for t in (f"{seg.name} <- {seg.entered_by}", seg.name) if len(t) * CHAR_PX <= room),
            None,
        )
        if text is not None:
            ax.text(
                (seg.start + seg.end) / 2,
                row,
                text,
                ha="center",
                va="center",
                fontsize="x-small",
                color="white" if k % 2 == 0 else "black",
            )
