"""How the lowering rejects what it cannot lower: one located error naming
the op and the reason, with a fix when there is one."""

from __future__ import annotations

from xdsl.ir import Operation

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from nem.dialect.view_op import written_name


def reject(op: Operation | None, reason: str, fix: str | None = None) -> NemDiagnosticError:
    """An error naming the op (its name and location) and the reason; an op
    without a location (an implicit module) is reported at the first op it
    holds that has one (an implicit module is located at its first op, or
    at the input's first line: `upstream_dialects.parse_mlir`).  A view op
    is named as the op it replaced (`written_name`, D-LOW-VIEW-OP)."""
    where = f"'{written_name(op)}'" if op is not None else "input"
    return NemDiagnosticError(
        [Diagnostic("error", f"cannot lower {where}: {reason}", _where(op), None, fix)]
    )


def _where(op: Operation | None) -> SourceLoc | None:
    for o in op.walk() if op is not None else ():
        loc = SourceLoc.of(o)
        if loc is not None:
            return loc
    return None
