"""Differential tests across a rewrite of the lowering (issue 36 item 1):
`lower-to-nem{device=npm_pro_x1 remarks=true}` of every public function of
the lowering's inputs, with the pipeline as declared and with it edited (a
pass left out, the conversion with another table), must print the same
`.nem` and the same remarks or errors (test_lowering_outline_kernels.py,
test_lowering_memref_hints.py, test_lowering_async_groups.py,
test_lowering_async_awaits.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pytest
from xdsl.dialects import func
from xdsl.ir import Operation
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import ParseError

from nem.compile.lower import xdsl_context
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError
from nem.frontends.nem_text.printer import print_nem
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.driver import run_pipeline
from nem.passes.lowering.passes import LowerToNemPass, PreparedConversionPass
from nem.passes.lowering.state import Handler

INPUTS = Path(__file__).resolve().parents[1] / "lit" / "lowering" / "Inputs"
MLIR_INPUTS = sorted(INPUTS.rglob("*.mlir"))
LIT_MLIR = sorted(INPUTS.parent.glob("*.mlir"))
"""The lit tests of the lowering that are MLIR themselves (globals.mlir, ...)."""

Steps = tuple[ModulePass, ...]
Outcome = tuple[str | None, list[tuple[str, str, str, str | None]]]


def entries(path: Path) -> list[str]:
    """The public functions of `path` (each an entry `lower-to-nem` may take)."""
    return entries_in(path.read_text())


def entries_in(text: str) -> list[str]:
    """The public functions of MLIR `text` (a transform script is skipped)."""
    try:
        module = parse_mlir(xdsl_context(), text)
    except ParseError:
        pytest.skip("a transform script or its payload: lit runs it")
    return [
        f.sym_name.data
        for f in module.ops
        if isinstance(f, func.FuncOp)
        and f.body.blocks
        and (f.sym_visibility is None or f.sym_visibility.data == "public")
    ]


def lower(text: str, entry: str, edit: Callable[[Steps], Steps] | None = None) -> Outcome:
    """`lower-to-nem{device=npm_pro_x1 remarks=true}` of `entry`, its steps
    changed by `edit` when given: the `.nem` (None on an error) and the
    diagnostics (remarks, or the errors)."""
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    passes = LowerToNemPass(device="npm_pro_x1", entry=entry, remarks=True).pipeline()
    if edit is not None:
        passes = edit(passes)
    try:
        diags = run_pipeline(module, PassPipeline(passes), ctx=ctx)
    except NemDiagnosticError as e:
        return None, [_text(d) for d in e.diagnostics]
    return print_nem(module), [_text(d) for d in diags]


def _text(d: Diagnostic) -> tuple[str, str, str, str | None]:
    return d.severity, d.message, str(d.loc), d.fix


def before(
    dropped: type[ModulePass], table: dict[type[Operation], Handler]
) -> Callable[[Steps], Steps]:
    """The edit that gives `lower-to-nem`'s steps as they were before a pass
    of rewrite patterns took ops out of the conversion's table: pass
    `dropped` left out, the conversion converting with `table` (the old one)."""

    class Conversion(PreparedConversionPass):
        def handlers(self) -> dict[type[Operation], Handler]:
            return table

    def edit(steps: Steps) -> Steps:
        out: list[ModulePass] = []
        for p in steps:
            if isinstance(p, PreparedConversionPass):
                p = Conversion(**{f.name: getattr(p, f.name) for f in fields(p)})
            if not isinstance(p, dropped):
                out.append(p)
        return tuple(out)

    return edit
