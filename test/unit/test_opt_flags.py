"""nem-opt's one-dash spellings (D-OPT-FLAGS) as actions of their own
(D-NO-PRIVATE-API): the same namespace, the same errors and the same --help
as the listed spelling.  test/lit/cli/mlir_opt_flags.test runs nem-opt."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from nem.cli.opt_flags import OptionRecorder, accept_mlir_opt_spellings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tool")
    options = OptionRecorder(parser)
    options.add_argument("-t", "--target", default="mlir")
    options.add_argument("--max-bytes", type=int, default=8)
    options.add_argument("--split-input-file", action="store_true")
    options.add_argument("--print-op-generic", action="store_true")
    options.add_argument("--plugin", action="append", default=[])
    group = options.add_argument_group("group").as_parser()
    group.add_argument("--strip", action="store_true")
    accept_mlir_opt_spellings(parser, options.actions)
    return parser


def _outcome(argv: list[str]) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()
    result: object
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            result = vars(_parser().parse_args(argv))
        except SystemExit as e:
            result = e.code
    return result, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("one_dash", "two_dashes"),
    [
        (["-target", "nem"], ["--target", "nem"]),
        (["-target=nem"], ["--target=nem"]),
        (["-max-bytes", "3"], ["--max-bytes", "3"]),
        (["-split-input-file", "-strip"], ["--split-input-file", "--strip"]),
        (["-plugin", "a", "-plugin=b"], ["--plugin", "a", "--plugin", "b"]),
        (["-mlir-print-op-generic"], ["--print-op-generic"]),
        (["--mlir-print-op-generic"], ["--print-op-generic"]),
        (["-max-bytes", "x"], ["--max-bytes", "x"]),
        (["-target"], ["--target"]),
        (["-split-input-file=1"], ["--split-input-file=1"]),
        (["-help"], ["--help"]),
    ],
)
def test_one_dash_is_the_listed_option(one_dash: list[str], two_dashes: list[str]) -> None:
    assert _outcome(one_dash) == _outcome(two_dashes)


def test_errors_name_the_listed_option() -> None:
    _, _, err = _outcome(["-max-bytes", "x"])
    assert "argument --max-bytes: invalid int value: 'x'" in err
    _, _, err = _outcome(["-target"])
    assert "argument -t/--target: expected one argument" in err


def test_help_lists_only_the_two_dash_names() -> None:
    _, out, _ = _outcome(["--help"])
    assert "--split-input-file" in out and "--strip" in out
    assert " -split-input-file" not in out and "mlir-print-op-generic" not in out
    assert "-help" not in out.replace("--help", "")


def test_recorder_keeps_every_action() -> None:
    parser = argparse.ArgumentParser()
    options = OptionRecorder(parser)
    a = options.add_argument("--a")
    b = options.add_argument_group("g").add_argument("--b")
    assert options.actions == [a, b]


def test_a_required_option_gets_no_spelling() -> None:
    """argparse checks a required option by its own action: a spelling that
    ran it would be reported missing."""
    parser = argparse.ArgumentParser()
    options = OptionRecorder(parser)
    options.add_argument("--print-op-generic", action="store_true")
    options.add_argument("--needed", required=True)
    with pytest.raises(ValueError, match="required option"):
        accept_mlir_opt_spellings(parser, options.actions)
