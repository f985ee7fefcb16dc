"""Shared test helper: parse `.nem` text into its module and program op
(imported by test modules; test/unit is on sys.path through conftest.py)."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from nem.dialect.ops import ProgramOp
from nem.frontends.nem_text.parser import parse_nem


def program(text: str, file: str = "t.nem") -> tuple[ModuleOp, ProgramOp]:
    """The module parsed from `text` and its (first) `nem.program`."""
    module = parse_nem(text, file)
    return module, next(op for op in module.walk() if isinstance(op, ProgramOp))
