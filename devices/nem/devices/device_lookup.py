"""Finding a device by name for `--device NAME` / `--print-device NAME`.

Search order (decision D-DEV-LOOKUP): the input file's own declarations and
includes, then `NAME.nem` in each `-I` directory and in the shipped
`devices/` folder, then every other `.nem` file of those directories.

A `NAME.nem` of an `-I` directory that cannot be read as a config document
is an error with its own diagnostics (and one that defines no device NAME
is an error too), not a file to skip: skipping it
targeted the shipped device of that name instead of the user's, silently
(hostile10, D-DEV-LOOKUP).  Other `.nem` files of the directories (programs
among them) are still skipped when they are not config documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nem.devices.device_resolver import load_config_file, resolve_device, shipped_devices_dir
from nem.dialect.device_model import Device
from nem.dialect.diagnostics import NemDiagnosticError, fail


def find_device(
    name: str, include_dirs: Sequence[str | Path] = (), input_file: str | None = None
) -> Device:
    dirs = [Path(d) for d in include_dirs] + [shipped_devices_dir()]
    candidates: list[Path] = []
    if input_file and input_file.endswith(".nem"):
        candidates.append(Path(input_file))
    named = [d / f"{name}.nem" for d in dirs]
    candidates += named
    candidates += sorted(p for d in dirs if d.is_dir() for p in d.glob("*.nem"))
    seen: set[Path] = set()
    for path in candidates:
        if not path.is_file() or path.resolve() in seen:
            continue
        seen.add(path.resolve())
        try:
            # a file whose errors are dropped (the input program, the other
            # .nem files) is lexed only as far as it is read: the input of
            # `nem-verify x.nem` is a program, not a config document, and
            # lexing all of it cost seconds on a lowered CNN (issue 30)
            scope = load_config_file(path, include_dirs, lazy=path not in named)
        except NemDiagnosticError:
            if path in named:  # the user's NAME.nem: its errors, not another device
                raise
            continue
        if name in scope.devices:
            return resolve_device(scope, name)
        if path in named[: len(include_dirs)]:  # an -I DIR/NAME.nem without NAME
            raise fail(
                f"device file '{path}' defines no device '{name}'"
                + (f" (it defines {', '.join(sorted(scope.devices))})" if scope.devices else ""),
                None,
                "DEV-20",
                f"declare `device {name}` in it, or rename the file",
            )
    raise fail(
        f"device '{name}' not found",
        None,
        "DEV-20",
        "ship it as NAME.nem in a directory given with -I",
    )
