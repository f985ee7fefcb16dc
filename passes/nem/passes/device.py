"""`nem-verify-device{device=NAME reject-future=false}`: a program against its target.

The target is the pass option `device=NAME`, else `nem-opt --device NAME`,
else the program's `device` directive; with none of them the pass reports a
remark (DEV-20) and checks nothing.  Rules (decisions D-DEV-* in
docs/spec-decisions.md, "Device checks"):

* DEV-13/14/15  Device Validity Rule (`program_device.check_device_validity`)
* DEV-03        duplicate variants of the resolved device (warnings)
* BUF-05        `L1[k]` needs k < num_engines; unindexed `L1` is `L1[0]`,
                with a warning on a multi-engine device (D-DEV-L1)
* RES-03/04/05  Target Resource Validity Rule: exact match silently, same-type
                remap as a remark naming the chosen instance, cross-type
                translation as a remark or, with no eligible unit, an error;
                RES-07: a present unit type that cannot run the task is an
                error (D-DEV-RES)
* DEV-16        capacity per level, with the level's memory map in a note
                (`nem.analysis.capacity`, D-DEV-CAP)
* DEV-17        live tokens vs `SEQ.max_active_tokens` (D-DEV-TOKENS)
* DEV-18        opcodes with hardware status `future`: a warning, an error
                with `reject-future=true` (D-DEV-FUTURE)
* DEV-19        nothing to check statically (D-DEV-WDM)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nem.analysis.capacity import check_capacity
from nem.analysis.ir_walk import ops_by_base, ops_of
from nem.dialect.attributes import ResourceAttr
from nem.dialect.device_model import Device
from nem.dialect.diagnostics import Diagnostic, SourceLoc, error
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import BufferOp, ComputeOp, ProgramOp, TaskOp
from nem.dialect.semantics.units import RESOURCE_UNITS, bind_unit, eligible_units, task_kind
from nem.passes.pass_context import driver_options, report


def target_device(
    ctx: Context, prog: ProgramOp, option: str | None = None, include_dirs: tuple[str, ...] = ()
) -> Device | None:
    """The program's target: pass option, else the driver's `--device`, else
    its directive; its file searched in the pass's `include_dirs`, then the
    driver's `-I` (both from `ctx`, `nem.passes.pass_context`).  Memoized per
    run in the driver's context."""
    from nem.devices.device_lookup import find_device
    from nem.devices.program_device import program_device

    env = driver_options(ctx)
    dirs = tuple(dict.fromkeys((*include_dirs, *env.include_dirs)))
    key = ("device", id(prog), option, env.device, dirs)
    if key in env.cache:
        known: Device = env.cache[key]
        return known
    loc = SourceLoc.of(prog)
    file = env.file or (loc.file if loc else "<stdin>")
    device: Device | None
    if option:
        device = find_device(option, dirs, file)
    else:
        device = program_device(prog, file, dirs, env.device)
    env.cache[key] = device
    return device


def no_device_remark(prog: ProgramOp, what: str) -> Diagnostic:
    return Diagnostic(
        "remark",
        f"no target device: {what} skipped",
        SourceLoc.of(prog),
        "DEV-20",
        "add a device directive, pass --device NAME or use nem-verify-device{device=NAME}",
    )


# -- units (which unit types can run a task: nem.dialect.semantics.units) ---------


def check_resources(tasks: Sequence[TaskOp], device: Device) -> list[Diagnostic]:
    """The Target Resource Validity Rule on every task of a program (`tasks`,
    in walk order; `semantics.bind_unit`, the binding the runtime uses): a
    task no unit of the device can run is an error with or without `@resource`."""
    diags = []
    for op in tasks:
        res = next(
            (
                (d.unit.data, d.index.data)
                for d in op.decorator_list()
                if isinstance(d, ResourceAttr) and d.unit.data in RESOURCE_UNITS
            ),
            None,
        )
        diag = _resource(op, res, device)
        if diag is not None:
            diags.append(diag)
    return diags


def _resource(op: TaskOp, res: tuple[str, int] | None, device: Device) -> Diagnostic | None:
    kind = task_kind(op)
    eligible = eligible_units(op)
    b = bind_unit(op, res, device.units)
    written = f"@resource({res[0]}[{res[1]}])" if res is not None else kind
    if b.rule == "RES-07" and res is not None:  # (only a written @resource gets RES-07)
        return error(
            f"{written}: {res[0]} cannot run {kind} (eligible: {', '.join(eligible)})",
            op,
            "RES-07",
            b.fix,
        )
    if b.error is not None:
        missing = f"no {res[0]} and no other" if res is not None else "no"
        return error(
            f"{written}: device '{device.name}' has {missing} unit type that can run {kind} "
            f"(eligible: {', '.join(eligible)})",
            op,
            "RES-05",
            b.fix,
        )
    if res is None or b.rule == "RES-03":
        return None
    unit, idx = res
    if b.rule == "RES-04":
        count = device.units(unit)
        return Diagnostic(
            "remark",
            f"{written} remapped to {unit}[{b.index}]: device '{device.name}' has "
            f"{count} {unit} per engine (same-type remap)",
            SourceLoc.of(op),
            "RES-04",
            f"write @resource({unit}[{b.index}]) to pin the instance, or drop @resource",
        )
    return Diagnostic(
        "remark",
        f"{written}: device '{device.name}' has no {unit}; {kind} is translated "
        f"to {b.unit}[0] (cross-type translation)",
        SourceLoc.of(op),
        "RES-05",
        f"write @resource({b.unit}[0]) for this device, or drop @resource",
    )


# -- memory levels -------------------------------------------------------------
def check_levels(buffers: Sequence[BufferOp], device: Device) -> list[Diagnostic]:
    """BUF-05 (and the D-DEV-L1 warning for unindexed L1 on multi-engine
    devices) on a program's buffers, in walk order."""
    diags = []
    n = device.topology.num_engines
    for op in buffers:
        level = op.result.type.level
        if level.kind != "L1":
            continue
        name = op.buffer_name.data
        if level.engine is None:
            if n > 1:
                diags.append(
                    Diagnostic(
                        "warning",
                        f"buffer '{name}' is at L1 without an engine index; on "
                        f"'{device.name}' ({n} engines) it is L1[0]",
                        SourceLoc.of(op),
                        "BUF-05",
                        "write L1[k] to choose the engine (decision D-DEV-L1)",
                    )
                )
        elif level.engine >= n:
            diags.append(
                error(
                    f"buffer '{name}' is at L1[{level.engine}] but device '{device.name}' has "
                    f"{n} engine{'s' if n != 1 else ''} (L1[0]..L1[{n - 1}])",
                    op,
                    "BUF-05",
                    f"use L1[k] with 0 <= k < {n}, or target a device with more engines",
                )
            )
    return diags


# -- tokens ----------------------------------------------------------------
def check_tokens(prog: ProgramOp, device: Device, ev: Evaluator) -> list[Diagnostic]:
    limit = device.max_active_tokens
    if limit is None:
        return []
    from nem.analysis.token_liveness import first_over, live_token_peak

    count, _ = live_token_peak(prog)
    if count <= limit:
        return []
    where = first_over(prog, limit) or prog
    return [
        error(
            f"up to {count} tokens can be live at once but device '{device.name}' allows "
            f"SEQ.max_active_tokens = {limit}",
            where,
            "DEV-17",
            "wait on (or depend on) earlier tokens sooner, use .sync tasks, or lower "
            "@max_in_flight",
        )
    ]


# -- opcodes ------------------------------------------------------------------
def check_future_opcodes(
    computes: Sequence[ComputeOp], device: Device, reject: bool
) -> list[Diagnostic]:
    diags = []
    for op in computes:
        if op.SPEC.hw_status == "future":
            diags.append(
                Diagnostic(
                    "error" if reject else "warning",
                    f"{op.opcode} has hardware status 'future': current NPM silicon (device "
                    f"'{device.name}') does not implement it",
                    SourceLoc.of(op),
                    "DEV-18",
                    "use a supported opcode (e.g. conv2d, gemm) for current silicon "
                    "(decision D-DEV-FUTURE)",
                )
            )
    return diags


def device_diagnostics(
    prog: ProgramOp, device: Device, reject_future: bool = False
) -> list[Diagnostic]:
    from nem.devices.program_device import check_device_validity

    ev = Evaluator()
    found = ops_by_base(prog, (TaskOp, ComputeOp, BufferOp))  # one walk for the rules
    tasks = cast(list[TaskOp], found[0])
    computes = cast(list[ComputeOp], found[1])
    diags: list[Diagnostic] = list(device.warnings)
    diags += check_device_validity(prog, device, computes)
    diags += check_levels(cast(list[BufferOp], found[2]), device)
    diags += check_resources(tasks, device)
    diags += check_capacity(prog, device, ev)
    diags += check_tokens(prog, device, ev)
    diags += check_future_opcodes(computes, device, reject_future)
    return diags


@dataclass(frozen=True)
class VerifyDevicePass(ModulePass):
    """Check a program against its target device (Device Validity Rule, capacity, resources, tokens).

    Options:
      device: the target (default: nem-opt --device, else the program's directive)
      reject-future: make opcodes with hardware status `future` errors (DEV-18)
    """

    name = "nem-verify-device"

    device: str | None = None
    reject_future: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        diags: list[Diagnostic] = []
        for prog in ops_of(op, ProgramOp):
            device = target_device(ctx, prog, self.device)
            if device is None:
                diags.append(no_device_remark(prog, "device checks"))
                continue
            diags += device_diagnostics(prog, device, self.reject_future)
        report(ctx, diags)
