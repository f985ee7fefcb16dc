"""The error every stage of `nem-compile` raises: its rendered diagnostics
and the stage they come from."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nem.dialect.diagnostics import Diagnostic


AVOIDING_OPTIONS = (
    "--engines 1, --no-pipeline, --no-split-transfers, --no-pad-in-place, --no-fuse, "
    "--no-fuse-chains, --no-share-staged, or the other tiling route: --route affine"
)
"""The options that turn one of nem-compile's transformations off, and the
other route: what a user can try where the compiler fails on its own (its
final check rejects its output, D-COMPILE-VERIFY-LOC; an internal error,
`nem-compile`'s note) until the defect is fixed.  `--route affine` since
an outside user found it the one besides `--no-fuse` that avoided a crash
(session 62)."""


class CompileError(Exception):
    """A compile failure with its rendered diagnostics (stage-prefixed);
    `diagnostics`: the diagnostics themselves where the stage has a list
    (a tool prints them up to its error limit, D-CLI-ERROR-LIMIT)."""

    def __init__(self, stage: str, message: str, diagnostics: list[Diagnostic] | None = None):
        self.stage = stage
        self.diagnostics = diagnostics
        super().__init__(message)

    @staticmethod
    def of(stage: str, diagnostics: list[Diagnostic]) -> CompileError:
        """The error of a list of diagnostics, rendered one after the other."""
        return CompileError(stage, "\n".join(d.render() for d in diagnostics), diagnostics)
