"""D-VERIFY-REPEAT: a loop-dependent region check that passed is not run
again for a region of the same loop body with identical expressions, buffer
size and element type, and nothing else is skipped: every region that
breaks a rule gets its own diagnostic."""

from __future__ import annotations

import pytest

from nem.dialect.verifier import verify_program
from nem.frontends.nem_text.parser import parse_nem

HEAD = "program p:\nbuffer A : L2 (size=4096)\nbuffer B : L2 (size=4096)\nbuffer S : L2 (size=64)\n"


def _errors(body: str) -> list[tuple[str | None, int | None, str]]:
    module = parse_nem(HEAD + body, "t.nem")
    return [(d.rule, d.loc.line if d.loc else None, d.message)
            for d in verify_program(module.ops.first) if d.severity == "error"]


def test_repeated_expressions_pass():
    assert _errors("loop i in [0..3]:\n"
                   "  let X = region(A, (i mod 2) * 64, 64) elem=f16, shape=[32], layout=K\n"
                   "  let Y = region(B, (i mod 2) * 64, 64) elem=f16, shape=[32], layout=K\n"
                   "endloop\n") == []


def _loop(x: str, y: str) -> str:
    return f"loop i in [0..3]:\n  let X = {x}\n  let Y = {y}\nendloop\n"


F16 = "elem=f16, shape=[32], layout=K"


@pytest.mark.parametrize("x, y, expected", [
    # a smaller buffer than the region that passed (RULE: REG-02)
    ("region(A, (i mod 2) * 64, 64)", "region(S, (i mod 2) * 64, 64)", [("REG-02", 7)]),
    # another element type than the region that passed (RULE: EXT-01)
    (f"region(A, (i mod 2) * 64, 64) {F16}",
     "region(B, (i mod 2) * 64, 64) elem=f32, shape=[32], layout=K", [("EXT-01", 7)]),
    # a check that failed is never taken as passed (RULE: REG-02)
    ("region(S, (i mod 2) * 64, 64)", "region(S, (i mod 2) * 64, 64)",
     [("REG-02", 6), ("REG-02", 7)]),
], ids=["smaller-buffer", "other-element-type", "each-failure-reports"])
def test_what_differs_is_checked(x, y, expected):
    errs = _errors(_loop(x, y))
    assert [(r, line) for r, line, _ in errs] == expected, errs
