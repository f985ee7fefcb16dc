"""The error every stage of `nem-compile` raises: its rendered diagnostics
and the stage they come from."""

from __future__ import annotations


class CompileError(Exception):
    """A compile failure with its rendered diagnostics (stage-prefixed)."""

    def __init__(self, stage: str, message: str):
        self.stage = stage
        super().__init__(message)
