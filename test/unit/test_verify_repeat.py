"""D-VERIFY-REPEAT: a loop-dependent region check that passed is not run
again for a region of the same loop body with identical expressions, buffer
size and element type, and nothing else is skipped: every region that
breaks a rule gets its own diagnostic."""

from __future__ import annotations

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


def test_smaller_buffer_is_checked():
    # RULE: REG-02
    errs = _errors("loop i in [0..3]:\n"
                   "  let X = region(A, (i mod 2) * 64, 64)\n"
                   "  let Y = region(S, (i mod 2) * 64, 64)\n"
                   "endloop\n")
    assert [(r, line) for r, line, _ in errs] == [("REG-02", 7)], errs


def test_other_element_type_is_checked():
    # RULE: EXT-01
    errs = _errors("loop i in [0..3]:\n"
                   "  let X = region(A, (i mod 2) * 64, 64) elem=f16, shape=[32], layout=K\n"
                   "  let Y = region(B, (i mod 2) * 64, 64) elem=f32, shape=[32], layout=K\n"
                   "endloop\n")
    assert [(r, line) for r, line, _ in errs] == [("EXT-01", 7)], errs


def test_each_failing_region_reports():
    # RULE: REG-02
    errs = _errors("loop i in [0..3]:\n"
                   "  let X = region(S, (i mod 2) * 64, 64)\n"
                   "  let Y = region(S, (i mod 2) * 64, 64)\n"
                   "endloop\n")
    assert [(r, line) for r, line, _ in errs] == [("REG-02", 6), ("REG-02", 7)], errs
