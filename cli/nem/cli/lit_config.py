"""The NEM toolchain's lit setup, for this repository's suite and for yours.

A lit suite of your own gets the tools and substitutions in two lines of its
`lit.cfg.py`:

    from nem.cli.lit_config import configure
    configure(config)

and its tests can then use, in RUN lines:

  nem-opt, nem-run       the NEM tools of the Python that runs lit
  nem-compile            the ONNX/linalg compiler driver (needs the `mlir`
                         extra: guard with `REQUIRES: mlir-python`)
  filecheck, FileCheck   the `filecheck` Python package
  not                    lit's internal shell builtin
  mlir-opt               upstream MLIR, when installed (`mlir` extra);
                         guard such tests with `REQUIRES: mlir-opt`
  %python                that Python (sys.executable)
  %devices               the shipped device configs (nem/devices)
  %llvm-filecheck        LLVM's own FileCheck (feature `llvm-filecheck`)

and the features `mlir-opt`, `mlir-python`, `onnx`, `onnxruntime`, `matplotlib`, `llvm-filecheck`
when those are installed.  `configure` fills in what the configuration has
not set itself: the name (the suite's folder), the test format (lit's
internal shell), the suffixes (`.nem`, `.mlir`, `.test`) and the excluded
folders (`Inputs`, `Output`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from nem.cli.upstream_tools import find_tool, package_tool

SUFFIXES = [".nem", ".mlir", ".test"]
EXCLUDES = [
    "Inputs",
    "Output",
    "__pycache__",
    "venv",
    ".venv",
    "build",
    "node_modules",
    ".git",
    ".pytest_cache",
    ".hypothesis",
]


def tool(name: str, module: str) -> str:
    """Absolute path of console script `name` next to this Python, on PATH,
    or `python -m module` as a fallback."""
    bin_dir = os.path.dirname(sys.executable)
    for candidate in (os.path.join(bin_dir, name), shutil.which(name)):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return f"{sys.executable} -m {module}"


def word(name: str) -> str:
    """Regex matching `name` as a command word (not inside a longer name/path)."""
    return r"(?<![\w/.%-])" + re.escape(name) + r"(?![\w.-])"


def devices_dir() -> str:
    """The folder of the shipped device configs (`nem.devices`)."""
    import nem.devices

    return str(Path(next(iter(nem.devices.__path__))))


def configure(config: Any, *, devices: bool = True) -> None:
    """Give a lit `config` the NEM tools, substitutions and features (see the
    module docstring); settings the configuration made itself are kept."""
    import lit.formats

    if not getattr(config, "name", None) or config.name == "<unnamed>":
        # lit sets test_source_root (default: the folder of lit.cfg.py) only after
        # the configuration ran: name the suite after the folder of the lit.cfg.py
        # that calls us (lit runs it with __file__ set)
        root = getattr(config, "test_source_root", None) or os.path.dirname(
            sys._getframe(1).f_globals.get("__file__") or ""
        )
        config.name = Path(root).name if root else "nem-tests"
    if getattr(config, "test_format", None) is None:
        config.test_format = lit.formats.ShTest(execute_external=False)
    if not config.suffixes:
        config.suffixes = list(SUFFIXES)
    config.excludes = list(dict.fromkeys([*getattr(config, "excludes", []), *EXCLUDES]))

    python = sys.executable
    path_dirs = [os.path.dirname(python)]
    filecheck = tool("filecheck", "filecheck")
    mlir_opt = find_tool("mlir-opt")
    llvm_filecheck = package_tool("FileCheck") or shutil.which("FileCheck")

    # lit applies these before its own (%s, %t, ...), top to bottom.
    subs = config.substitutions
    subs.append(("%python", python))
    if devices:
        subs.append(("%devices", devices_dir()))
    subs.append((word("nem-opt"), tool("nem-opt", "nem.cli.nem_opt")))
    subs.append((word("nem-run"), tool("nem-run", "nem.cli.nem_run")))
    subs.append((word("nem-compile"), tool("nem-compile", "nem.cli.nem_compile")))
    subs.append((word("filecheck"), filecheck))
    subs.append((word("FileCheck"), filecheck))

    features = config.available_features
    if importlib.util.find_spec("matplotlib") is not None:
        features.add("matplotlib")
    if mlir_opt:
        features.add("mlir-opt")
        path_dirs.append(os.path.dirname(mlir_opt))
        subs.append((word("mlir-opt"), mlir_opt))
    if llvm_filecheck:
        features.add("llvm-filecheck")
        subs.append(("%llvm-filecheck", llvm_filecheck))
    try:
        if (
            importlib.util.find_spec("mlir") is not None
            and importlib.util.find_spec("mlir.ir") is not None
        ):
            features.add("mlir-python")
    except (ImportError, ValueError):
        pass
    for module in ("onnx", "onnxruntime"):
        if importlib.util.find_spec(module) is not None:
            features.add(module)

    env = config.environment
    env["PATH"] = os.pathsep.join(path_dirs + [env.get("PATH", os.environ.get("PATH", ""))])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for var in ("HOME", "TMPDIR", "PYTHONPATH", "NEM_DEVICE_PATH"):
        if var in os.environ:
            env[var] = os.environ[var]
