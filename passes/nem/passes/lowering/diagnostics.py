"""How the lowering rejects what it cannot lower: one located error naming
the op and the reason, with a fix when there is one."""

from __future__ import annotations

from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from xdsl.ir import Operation


def reject(op: Operation | None, reason: str, fix: str | None = None) -> NemDiagnosticError:
    """An error naming the op (its name and location) and the reason."""
    where = f"'{op.name}'" if op is not None else "input"
    return NemDiagnosticError([Diagnostic("error", f"cannot lower {where}: {reason}",
                                          SourceLoc.of(op) if op is not None else None,
                                          None, fix)])
