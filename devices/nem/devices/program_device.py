"""The target device of a program and the Device Validity Rule (DEV-13).

The target is `--device NAME` when given (it overrides the directive, with a
remark), else the program's `device` directive: `device "file.nem"` (path
relative to the program, then `-I` dirs, then the shipped devices),
`device NAME` (a device made visible by the program's includes, DEV-20) or an
inline `device NAME { ... }` block.  No directive and no option: the program
is device-agnostic and only the device-independent checks run.
"""

from __future__ import annotations

from pathlib import Path

from nem.dialect.device_model import Device
from nem.devices.device_resolver import (
    resolve_device,
    resolve_device_file,
    scope_for_document,
    shipped_devices_dir,
)
from nem.dialect.diagnostics import Diagnostic, SourceLoc, error, fail
from nem.dialect.ops import ComputeOp, ProgramOp
from nem.dialect.operand_binding import match_families


def program_device(prog: ProgramOp, file: str, include_dirs=(),
                   override: str | None = None) -> Device | None:
    from nem.devices.device_lookup import find_device
    from nem.frontends.nem_text.config_parser import ConfigDocument, parse_config_document

    loc = SourceLoc.of(prog)
    if override:
        return find_device(override, include_dirs, None)
    if prog.device_kind is None:
        return None
    kind, value = prog.device_kind.data, prog.device.data
    includes = tuple(i.data for i in prog.includes.data) if prog.includes else ()
    if kind == "file":
        base = Path(file).parent
        for d in [base, *map(Path, include_dirs), shipped_devices_dir()]:
            if (d / value).is_file():
                return resolve_device_file(d / value, None, include_dirs, loc)
        raise fail(f"device file \"{value}\" not found next to the program, in -I "
                   "directories or among the shipped devices", loc, "DEV-20",
                   'name a .nem device file, e.g. device "npm_lite.nem"')
    if kind == "name":
        scope = scope_for_document(
            ConfigDocument(file, includes, (), (), (loc,) * len(includes)), include_dirs)
        if value not in scope.devices:
            raise fail(f"device '{value}' is not defined by the program's includes", loc,
                       "DEV-20", f'add include "{value}.nem" (or the file that defines it)')
        return resolve_device(scope, value, loc)
    # the inline device's canonical text must not replace the program's text
    # in the diagnostics source cache (it is parsed under the program's name)
    from nem.dialect.diagnostics import _DEFAULT_SOURCES

    saved = _DEFAULT_SOURCES._texts.get(file)
    doc = parse_config_document(value, file)
    if saved is not None:
        _DEFAULT_SOURCES._texts[file] = saved
    doc = ConfigDocument(file, includes + doc.includes, doc.families, doc.devices,
                         (loc,) * len(includes) + doc.include_locs)
    scope = scope_for_document(doc, include_dirs)
    return resolve_device(scope, doc.devices[-1].name, loc)


def check_device_validity(prog: ProgramOp, device: Device) -> list[Diagnostic]:
    """DEV-13/DEV-15: every compute op matches a variant of the effective set;
    the diagnostic names the nearest available variant (DEV-14)."""
    diags = []
    for op in prog.walk():
        if not isinstance(op, ComputeOp) or not op.SPEC.families:
            continue
        result = match_families(op, device.catalog,
                                device.effective_for_family(op.SPEC.families))
        if result.ok:
            continue
        near = f"; nearest available variant {result.nearest}: " + "; ".join(result.differences) \
            if result.nearest else ""
        what = f" ({result.unavailable[0]} is not in its effective set)" if result.unavailable else ""
        diags.append(error(
            f"{op.opcode} is not valid on device '{device.name}'{what}{near}", op, "DEV-13",
            f"use a type combination of the device's effective set, or target a device that "
            f"lists {result.unavailable[0] if result.unavailable else 'the variant'}"))
    return diags
