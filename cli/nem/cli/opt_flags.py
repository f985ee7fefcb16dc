"""nem-opt's command line as mlir-opt users write it (decision D-OPT-FLAGS).

mlir-opt (LLVM's `cl::opt`) takes every long option with one dash or two
(`-split-input-file`, `-verify-diagnostics`, `-pass-pipeline=...`), and
upstream lit RUN lines are full of the single-dash form; argparse reads a
single dash as short options (`-verify-diagnostics` is `-v` with the value
`erify-diagnostics`, `-pass-pipeline=X` is `-p 'ass-pipeline=X'`).  So:

* `accept_mlir_opt_spellings(parser)` makes `-NAME` the same option as
  `--NAME` for every long option of the parser (not listed by `--help`), and
  `--mlir-print-op-generic` / `-mlir-print-op-generic` mlir-opt's names of
  `--print-op-generic`;
* `take_split_marker(argv)` takes mlir-opt's `--split-input-file=MARKER`
  (a custom marker; `--split-input-file` alone keeps its default): argparse
  cannot give a flag an optional value that only `=` introduces, and
  `--split-input-file tests.mlir` must not read the file name as a marker.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

__all__ = [
    "MLIR_OPT_ALIASES",
    "accept_mlir_opt_spellings",
    "take_split_marker",
    "check_split_marker",
]

MLIR_OPT_ALIASES = {"mlir-print-op-generic": "print-op-generic"}
"""mlir-opt's name of an option -> nem-opt's (xdsl-opt's) name."""

_SPLIT = ("--split-input-file", "-split-input-file")


def accept_mlir_opt_spellings(parser: argparse.ArgumentParser) -> None:
    """`-NAME` for every `--NAME` of `parser`, and the MLIR_OPT_ALIASES, both
    spellings; call it once every option is added."""
    # argparse has no public way to give an option a name --help does not list
    table = parser._option_string_actions  # noqa: SLF001
    for flag, action in list(table.items()):
        if flag.startswith("--") and len(flag) > 3:
            table.setdefault(flag[1:], action)
    for alias, name in MLIR_OPT_ALIASES.items():
        table[f"--{alias}"] = table[f"-{alias}"] = table[f"--{name}"]


def take_split_marker(argv: Sequence[str]) -> tuple[list[str], str | None]:
    """`argv` with `--split-input-file=MARKER` (one dash or two) written
    `--split-input-file`, and the last MARKER given (None: none was)."""
    out: list[str] = []
    marker: str | None = None
    for i, arg in enumerate(argv):
        if arg == "--":
            out += argv[i:]
            break
        flag, eq, value = arg.partition("=")
        if eq and flag in _SPLIT:
            out.append(_SPLIT[0])
            marker = value
        else:
            out.append(arg)
    return out, marker


def check_split_marker(marker: str) -> str | None:
    """Why `--split-input-file=MARKER` cannot be used (None: it can).  An
    empty marker means no split, as in mlir-opt; one of one or two
    characters makes mlir-opt fail an assertion (it checks the last two
    characters after finding the rest)."""
    if 0 < len(marker) < 3:
        return (
            f"--split-input-file={marker}: the marker must have at least 3 characters "
            "(mlir-opt checks its last two after finding the rest)"
        )
    return None
