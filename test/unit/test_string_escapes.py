"""STRING literals: one escape grammar for every reader and printer (D-LEX-3).

The program reader once resolved escapes with Python's `unicode_escape`
(a traceback on `\\x8`, non-ASCII text read as Latin-1) and the device
reader dropped any escape's backslash.  These pin the shared `quote` /
`unquote` pair: every string value round-trips, every bad escape is a
located LEX-01 diagnostic, and FLOAT folding divides only when asked to
(`1.0 + 0` once raised ZeroDivisionError: nem-opt hostile campaign, seed 7).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nem.dialect.attributes import fmt_num
from nem.dialect.diagnostics import NemDiagnosticError
from nem.frontends.nem_text.lexer import STRING, quote, tokenize, unquote
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem

PROGRAM = """program p:
buffer X : DDR (size=128, align=64)
buffer Z : DDR (size=128, align=64)
c = compute.async in region(X, 0, 128) elem=f32, shape=[4, 8], layout=MN \
out region(Z, 0, 128) elem=f32, shape=[4, 8], layout=MN op="mlir.kernel" kernel=KERNEL
wait(c)
"""


@given(st.text())
def test_every_string_value_round_trips(value: str) -> None:
    (tok, _eof) = tokenize(quote(value), "t.nem")
    assert tok.kind == STRING and unquote(tok.text) == value


@pytest.mark.parametrize(
    "literal, value",
    [
        (r'"a\"b"', 'a"b'),
        (r'"a\\b"', "a\\b"),
        (r'"x\ny"', "x\ny"),
        (r'"\t"', "\t"),
        (r'"\x41\x0d"', "A\r"),
        ('"é"', "é"),
        (r'"\\x41"', "\\x41"),
    ],
)
def test_escapes(literal: str, value: str) -> None:
    assert unquote(tokenize(literal, "t.nem")[0].text) == value


@pytest.mark.parametrize(
    "line, col, shown",
    [
        (r'k = "ab\qc"', 8, r"\q"),
        (r'k = "ab\x8x"', 8, r"\x"),
        (r'k = "\u12"', 6, r"\u"),
        ('k = "ab\\', 8, "\\"),
    ],
)
def test_unknown_escape_is_located(line: str, col: int, shown: str) -> None:
    with pytest.raises(NemDiagnosticError) as e:
        tokenize(line, "t.nem")
    (d,) = e.value.diagnostics
    assert (d.loc.line, d.loc.col, d.rule) == (1, col, "LEX-01")
    assert f"unknown escape '{shown}'" in d.message and "D-LEX-3" in (d.fix or "")


def test_unterminated_string_is_still_reported_as_such() -> None:
    with pytest.raises(NemDiagnosticError, match="unterminated string literal"):
        tokenize('k = "ab\\"', "t.nem")


def test_kernel_text_with_control_characters_prints_and_reads_back() -> None:
    kernel = 'line one\nline "two"\twith \\ and é\r\x01'
    program = parse_nem(PROGRAM.replace("KERNEL", quote(kernel)), "p.nem")
    text = print_nem(program)
    assert quote(kernel) in text
    assert print_nem(parse_nem(text, "p2.nem")) == text


@pytest.mark.parametrize(
    "expr, value",
    [("1.5 + 0", 1.5), ("2.0 * 0", 0.0), ("0 - 1.0", -1.0), ("7.0 mod 2", 1.0), ("1.0 / 4", 0.25)],
)
def test_float_folding_applies_only_the_operator(expr: str, value: float) -> None:
    text = PROGRAM.replace('op="mlir.kernel" kernel=KERNEL', f'op="leaky_relu" alpha={expr}')
    assert f"alpha={fmt_num(value)}\n" in print_nem(parse_nem(text, "p.nem"))


def test_bytecode_carries_a_backslash_beside_non_ascii_text() -> None:
    """`.nemb` refused such strings while the text reader decoded escapes as
    Latin-1; with D-LEX-3 both forms carry them exactly."""
    from nem.frontends.bytecode.reader import read_nemb
    from nem.frontends.bytecode.writer import write_nemb

    kernel = 'C:\\dir "é" \\x41'
    program = parse_nem(PROGRAM.replace("KERNEL", quote(kernel)), "p.nem")
    assert print_nem(read_nemb(write_nemb(program), "p.nemb").module) == print_nem(program)
