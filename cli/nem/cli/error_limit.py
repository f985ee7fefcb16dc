"""Diagnostics printed by the command-line tools, at most `--error-limit`
errors per run (decision D-CLI-ERROR-LIMIT).

A hostile or broken input can hold hundreds of thousands of errors (600,000
duplicate `const`s fit in the source limit); printing them all costs more
than finding them and buries the first, which is the one to fix.  As clang
(`-ferror-limit`, default 20), a tool prints the first `DEFAULT_ERROR_LIMIT`
errors (with what comes between them: warnings, notes) and then one note:

    nem-opt: note: too many errors; stopping after 20 (600000 in all; raise
    the limit with --error-limit N, 0 for no limit)

The work, the exit code and `--verify-diagnostics` (which checks every
diagnostic, printing none) are unchanged.  One limit counts over a whole
run (every `--split-input-file` chunk).

    >>> from nem.dialect.diagnostics import Diagnostic
    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err), error_limit("nem-opt", 2):
    ...     print_diagnostics("nem-opt", [Diagnostic("error", f"e{i}") for i in range(5)])
    >>> print(err.getvalue().replace("; raise", ";\\nraise"), end="")
    nem-opt: error: e0
    nem-opt: error: e1
    nem-opt: note: too many errors; stopping after 2 (5 in all;
    raise the limit with --error-limit N, 0 for no limit)
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nem.dialect.diagnostics import Diagnostic

DEFAULT_ERROR_LIMIT = 20
"""Errors printed before the tools stop reporting (clang's default)."""


class _Report:
    """The errors printed and counted in one run of a tool."""

    def __init__(self, tool: str, limit: int):
        self.tool, self.limit, self.errors = tool, limit, 0

    def over(self) -> bool:
        return 0 < self.limit < self.errors


_ACTIVE: ContextVar[_Report | None] = ContextVar("error_limit_report", default=None)
"""The report of the innermost `error_limit` block: a context variable
(scoped to the block, per thread), not a module global (issue 36 item 4)."""


@contextlib.contextmanager
def error_limit(tool: str, limit: int) -> Iterator[None]:
    """Within the block, `print_diagnostics` prints at most `limit` errors
    (0: all); the note that says how many were left out is printed when the
    block ends, also by `sys.exit`."""
    report = _Report(tool, limit)
    token = _ACTIVE.set(report)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
        if report.over():
            print(
                f"{tool}: note: too many errors; stopping after {report.limit} "
                f"({report.errors} in all; raise the limit with --error-limit N, 0 for "
                "no limit)",
                file=sys.stderr,
            )


def print_diagnostics(tool: str, diagnostics: Iterable[Diagnostic]) -> None:
    """Print diagnostics to stderr, up to the error limit of the run; one
    without a source location is about the command line (a file it names, a
    --device), so it is prefixed with the tool's name like the tool's other
    command-line errors."""
    report = _ACTIVE.get()
    for d in diagnostics:
        if report is not None:
            report.errors += d.severity == "error"
            if report.over():
                continue  # counted for the note, not printed
        text = d.render()
        print(text if d.loc is not None else f"{tool}: {text}", file=sys.stderr)


def error_limit_count(text: str) -> int:
    """argparse type of `--error-limit`: an integer >= 0."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"needs N >= 0 (0: no limit), got {n}")
    return n


def add_error_limit_argument(parser: argparse.ArgumentParser) -> None:
    """`--error-limit N`, the same in every tool."""
    parser.add_argument(
        "--error-limit",
        type=error_limit_count,
        default=DEFAULT_ERROR_LIMIT,
        metavar="N",
        help=f"print at most N errors (default "
        f"{DEFAULT_ERROR_LIMIT}; 0: no limit; D-CLI-ERROR-LIMIT)",
    )


__all__ = ["DEFAULT_ERROR_LIMIT", "add_error_limit_argument", "error_limit", "print_diagnostics"]
