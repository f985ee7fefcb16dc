"""What a NEM pass needs from its driver, and where its non-error diagnostics go.

xDSL's `ModulePass.apply(ctx, module)` has no channel for warnings and
remarks, nor for the driver's `-I` directories and `--device` option.  A
driver (`nem-opt`, the `nem-verify` pipeline, a test, a benchmark) opens a
`PassEnv` with `pass_env(...)`; passes read it with `current()` and hand
their diagnostics to `report(...)`:

* errors: a pass raises `NemDiagnosticError(all its diagnostics)` (errors,
  warnings and remarks of that pass together, so the order is kept);
* no error: `report(diags)` appends them to the environment's list, which
  the driver prints (or checks with `--verify-diagnostics`).

Without an open environment (a pass run by plain `xdsl-opt`), `report`
prints to stderr and `current()` is an empty environment (no `-I`, no
`--device`; the program's directive still names its device).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError


@dataclass
class PassEnv:
    file: str | None = None
    """The input file (programs also carry it in their locations)."""
    include_dirs: tuple[str, ...] = ()
    device: str | None = None
    """`nem-opt --device NAME`: overrides the program's directive."""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    cache: dict = field(default_factory=dict)
    """Per-run memo (resolved devices, ...) shared by the passes of one pipeline."""


_STACK: list[PassEnv] = []


def current() -> PassEnv:
    return _STACK[-1] if _STACK else PassEnv()


@contextmanager
def pass_env(file: str | None = None, include_dirs: Iterable[str] = (),
             device: str | None = None) -> Iterator[PassEnv]:
    env = PassEnv(file, tuple(include_dirs), device)
    _STACK.append(env)
    try:
        yield env
    finally:
        _STACK.pop()


def report(diags: Iterable[Diagnostic]) -> None:
    """Deliver a pass's diagnostics: raise if any is an error, else record them."""
    diags = list(diags)
    if any(d.severity == "error" for d in diags):
        raise NemDiagnosticError(diags)
    if not diags:
        return
    if _STACK:
        _STACK[-1].diagnostics.extend(diags)
    else:
        for d in diags:
            print(d.render(), file=sys.stderr)
