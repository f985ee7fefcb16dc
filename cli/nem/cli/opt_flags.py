"""nem-opt's command line as mlir-opt users write it (decision D-OPT-FLAGS).

mlir-opt (LLVM's `cl::opt`) takes every long option with one dash or two
(`-split-input-file`, `-verify-diagnostics`, `-pass-pipeline=...`), and
upstream lit RUN lines are full of the single-dash form; argparse reads a
single dash as short options (`-verify-diagnostics` is `-v` with the value
`erify-diagnostics`, `-pass-pipeline=X` is `-p 'ass-pipeline=X'`).  So:

* `accept_mlir_opt_spellings(parser, actions)` makes `-NAME` the same
  option as `--NAME` for every long option of the parser (not listed by
  `--help`), and `--mlir-print-op-generic` / `-mlir-print-op-generic`
  mlir-opt's names of `--print-op-generic`: each an action of its own that
  runs the listed one (`OptionRecorder` keeps the actions: argparse has no
  public list of them);
* `take_split_marker(argv)` takes mlir-opt's `--split-input-file=MARKER`
  (a custom marker; `--split-input-file` alone keeps its default): argparse
  cannot give a flag an optional value that only `=` introduces, and
  `--split-input-file tests.mlir` must not read the file name as a marker.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, Protocol, cast

__all__ = [
    "MLIR_OPT_ALIASES",
    "OptionRecorder",
    "accept_mlir_opt_spellings",
    "take_split_marker",
    "check_split_marker",
]

MLIR_OPT_ALIASES = {"mlir-print-op-generic": "print-op-generic"}
"""mlir-opt's name of an option -> nem-opt's (xdsl-opt's) name."""

_SPLIT = ("--split-input-file", "-split-input-file")


class _AddsArguments(Protocol):
    """A parser or an argument group."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action: ...


class OptionRecorder:
    """Adds arguments to `parser` (or an argument group of it) and keeps each
    `Action` `add_argument` returns: argparse has no public list of a
    parser's actions, and `accept_mlir_opt_spellings` and nem-opt's help
    texts need them.  xDSL's `register_all_arguments` calls only
    `add_argument` on the parser it is given (`as_parser` hands it this
    recorder)."""

    def __init__(self, parser: _AddsArguments, actions: list[argparse.Action] | None = None):
        self.parser = parser
        self.actions: list[argparse.Action] = [] if actions is None else actions

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = self.parser.add_argument(*args, **kwargs)
        self.actions.append(action)
        return action

    def add_argument_group(self, *args: Any, **kwargs: Any) -> OptionRecorder:
        """The group `parser.add_argument_group` makes, recorded into the same list."""
        parser = cast(argparse.ArgumentParser, self.parser)
        return OptionRecorder(parser.add_argument_group(*args, **kwargs), self.actions)

    def as_parser(self) -> argparse.ArgumentParser:
        """This recorder where an `ArgumentParser` to add arguments to is expected."""
        return cast(argparse.ArgumentParser, self)


class _Spelling(argparse.Action):
    """Another spelling of `target`'s option, not listed by --help: takes the
    same arguments and runs `target`, so that the parsed namespace, the
    errors (which name the option as --help lists it) and every other
    outcome are those of the listed spelling."""

    def __init__(
        self, option_strings: list[str], target: argparse.Action, **_argparse: object
    ) -> None:
        # (`dest`, `default` and the like that add_argument passes: the target's count)
        if target.required:  # argparse would see only the spelling given, not `target`
            raise ValueError(f"{target.option_strings}: a required option has no other spelling")
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            nargs=target.nargs,
            type=cast(Any, target.type),  # as add_argument resolved it
            choices=target.choices,
            metavar=target.metavar,
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )
        self.target = target

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        self.target(parser, namespace, values, option_string)


def accept_mlir_opt_spellings(
    parser: argparse.ArgumentParser, actions: Sequence[argparse.Action]
) -> None:
    """`-NAME` for every `--NAME` of `actions` (every action of `parser` but
    its help, which gets `-help`), and the MLIR_OPT_ALIASES, both spellings;
    call it once every option is added."""
    taken = {flag for action in actions for flag in action.option_strings}
    taken.update(("-h", "--help"))
    by_flag = {flag: action for action in actions for flag in action.option_strings}
    spellings: list[tuple[str, argparse.Action]] = [
        (flag[1:], action)
        for action in actions
        for flag in action.option_strings
        if flag.startswith("--") and len(flag) > 3 and flag[1:] not in taken
    ]
    for alias, name in MLIR_OPT_ALIASES.items():
        spellings += [(f"--{alias}", by_flag[f"--{name}"]), (f"-{alias}", by_flag[f"--{name}"])]
    for flag, action in spellings:
        spelling = parser.add_argument(flag, action=_Spelling, target=action)
        # named in errors as the listed spelling (argparse names an option
        # by its `option_strings`; the parser's table already holds `flag`)
        spelling.option_strings = action.option_strings
    parser.add_argument("-help", action="help", help=argparse.SUPPRESS)


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
