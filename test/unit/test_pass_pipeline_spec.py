"""Pipeline specs as users write them (`nem.passes.pipeline_spec`):
mlir-opt's anchor (D-OPT-PIPELINE, D-OPT-PIPELINE-ANCHOR), and errors that
name the pass and option as spelt and count columns in the typed string
(D-OPT-PIPELINE-ERRORS)."""

from __future__ import annotations

import re

import pytest

from nem.passes.driver import available_passes, parse_pipeline
from nem.passes.pipeline_spec import PipelineError, check_pipeline

PASSES = available_passes()


def check(spec: str, anchored: bool = False) -> str:
    return check_pipeline(spec, PASSES, anchored=anchored)


@pytest.mark.parametrize(
    "spec, want",
    [
        ("builtin.module(nem-verify,nem-fold-consts{})", "nem-verify,nem-fold-consts{}"),
        ("module(nem-verify)", "nem-verify"),
        (" builtin.module( nem-verify ) ", "nem-verify"),
        ("builtin.module()", ""),
        ("lower-to-nem{memory-spaces=0:DDR,1:L2}", 'lower-to-nem{memory-spaces="0:DDR,1:L2"}'),
        ('lower-to-nem{entry="f(x)"}', 'lower-to-nem{entry="f(x)"}'),
        ("nem-verify-device{reject_future=true}", "nem-verify-device{reject_future=true}"),
    ],
)
def test_accepted(spec, want):
    assert check(spec) == want


def error(spec: str, anchored: bool = False) -> PipelineError:
    with pytest.raises(PipelineError) as e:
        check(spec, anchored)
    return e.value


@pytest.mark.parametrize(
    "spec, col, message",
    [
        (
            "builtin.module(nem-verify",
            26,
            "missing ')' closing 'builtin.module(' (opened at column 15)",
        ),
        (
            "builtin.module(nem-verify{device=npm_lite)",
            42,
            "missing '}' closing the options of 'nem-verify'",
        ),
        ("builtin.module(nem-verify) x", 28, "unexpected text after the ')'"),
        ("builtin.module(func.func(cse))", 16, "nested pass pipeline 'func.func(...)'"),
        ("builtin.module(nem-verify,,cse)", 27, "expected pass name here"),
        # an empty item anywhere, as mlir-opt refuses it (outside report 28)
        ("builtin.module(nem-verify,)", 27, "expected pass name here"),
        ("builtin.module(,)", 16, "expected pass name here"),
        ("nem-verify , ", 13, "expected pass name here"),
        ("lower-to-nem{memory-spaces=0:DDR,1:L2},", 40, "expected pass name here"),
        ("any(cse)", 1, "not supported: pipeline anchor 'any(...)'"),
        # columns count in the typed text, also after a quoted memory-spaces value
        (
            "lower-to-nem{memory-spaces=0:DDR,1:L2 tile=3}",
            39,
            "pass 'lower-to-nem' has no option 'tile'",
        ),
        ("nem-verfy", 1, "unknown pass 'nem-verfy'; did you mean 'nem-verify'?"),
        (
            "nem-verify-device{devic=npm_lite}",
            19,
            "pass 'nem-verify-device' has no option 'devic'; did you mean 'device'?",
        ),
        (
            "nem-check-placement{remarks=maybe}",
            21,
            "option 'remarks' of pass 'nem-check-placement' expects true or false, not 'maybe'",
        ),
        ("nem-check-hazards{max-instances=a}", 19, "expects an integer, not 'a'"),
        ("nem-verify-device{device=1}", 19, "expects a name or a quoted string, not '1'"),
    ],
)
def test_errors_are_located_in_the_typed_string(spec, col, message):
    e = error(spec)
    assert (e.col, e.spec) == (col, spec)
    assert message in e.message


def test_options_listed_in_the_users_spelling():
    e = error("nem-verify-device{devic=npm_lite}")
    assert e.fix == "its options: device, reject-future"
    assert "reject_future" not in e.render("-p")


def test_render_names_the_flag_and_puts_the_caret_under_the_column():
    e = error("builtin.module(nem-verify", anchored=True)
    assert e.render("--pass-pipeline").splitlines() == [
        "nem-opt: error: --pass-pipeline, column 26: bad pass pipeline: missing ')' closing "
        "'builtin.module(' (opened at column 15)",
        "builtin.module(nem-verify",
        " " * 25 + "^",
        "fix: end the pipeline with ')': 'builtin.module(nem-verify)'",
    ]


def test_anchor_required_only_for_pass_pipeline():
    assert check("nem-verify") == "nem-verify"
    e = error("nem-verify", anchored=True)
    assert e.col is None
    assert e.message.startswith(
        "expected pass pipeline to be wrapped with the anchor operation "
        "type, e.g. 'builtin.module(...)'"
    )
    assert "-p 'nem-verify'" in (e.fix or "")
    assert check("", anchored=True) == ""


def test_python_api_raises_the_same_error():
    with pytest.raises(PipelineError, match="did you mean 'nem-fold-consts'"):
        parse_pipeline("nem-fold-const")
    assert [p.name for p in parse_pipeline("builtin.module(nem-verify)").passes] == ["nem-verify"]


@pytest.mark.parametrize(
    "spec, fix",
    [
        ("any(cse)", "--pass-pipeline='builtin.module(cse)', or -p 'cse'"),
        ("any(func.func(cse))", "--pass-pipeline='builtin.module(cse)', or -p 'cse'"),
        (" func.func( cse ) ", "--pass-pipeline='builtin.module(cse)', or -p 'cse'"),
        (
            "builtin.module(any(cse))",
            "list the passes without the nested anchor: 'builtin.module(cse)'",
        ),
        (
            "builtin.module(func.func(any(cse)),canonicalize)",
            "list the passes without the nested anchor: 'builtin.module(cse,canonicalize)'",
        ),
        (
            "cse,func.func(canonicalize)",
            "list the passes without the nested anchor: 'builtin.module(cse,canonicalize)'",
        ),
        ("nem-verify,", "drop the extra ','"),
    ],
)
def test_fixes_are_pipelines_that_work(spec, fix):
    """Outside report 28: the fix of an anchor or nesting error was itself an
    error; each pipeline a fix suggests is accepted."""
    assert error(spec).fix == fix
    for suggested in re.findall(r"'([^']*)'", fix):
        if suggested != ",":
            check(suggested, anchored=suggested.startswith("builtin.module("))


def test_unanchored_fix_drops_nested_anchors():
    assert error("any(cse),canonicalize", anchored=True).fix == (
        "--pass-pipeline='builtin.module(cse,canonicalize)', or -p 'cse,canonicalize' "
        "for a bare list of passes"
    )
    # text right after a nested anchor's `)` stays a pass of its own
    assert error("any(cse)canonicalize", anchored=True).fix == (
        "--pass-pipeline='builtin.module(cse,canonicalize)', or -p 'cse,canonicalize' "
        "for a bare list of passes"
    )
