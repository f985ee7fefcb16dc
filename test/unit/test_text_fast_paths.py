"""The `.nem` front end's fast paths agree with the reference ones.

The lexer's two paths give the same tokens and the same diagnostics.

`tokenize` (a line regex with merged alternatives, `findall` per line) is
what the parsers use; `iter_tokens` (one alternative per kind, one match per
token) is the reference.  A divergence would parse a program differently
from how its head is read and would move diagnostics: this checks every
`.nem` file of the repository and random lines over an alphabet chosen to
hit the prefix cases (`x.async` vs `x.asyncx`, `1.5e3` vs `1..3` vs `1.e`,
`opcode.mandatory` vs `foo.mandatory`, strings, comments, stray characters).

The parser's locations are `FileLineColLoc`s at each statement's line and column.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from source_files import sources
from xdsl.dialects.builtin import FileLineColLoc

from nem.dialect.diagnostics import NemDiagnosticError
from nem.frontends.nem_text.lexer import iter_tokens, tokenize
from nem.frontends.nem_text.parser import parse_nem

ROOT = Path(__file__).resolve().parents[2]
PIECES = [
    "relu",
    "x",
    "_a1",
    "opcode",
    "transfer",
    "store",
    "foo",
    ".",
    "..",
    "async",
    "sync",
    "asyncx",
    "mandatory",
    "extended",
    "1",
    "12",
    "0",
    "5",
    "e",
    "E3",
    "e+2",
    "-",
    "+",
    '"s"',
    '"a\\"b"',
    '"open',
    '"\\q"',
    '"\\x4',
    '"\\x4f"',
    "\\",
    "#c",
    " ",
    "  ",
    "\t",
    "\r",
    "\f",
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    ":",
    "@",
    "*",
    "/",
    "<",
    ">",
    "{",
    "}",
    ";",
    "!",
    "$",
    "é",
    "99999999999999999999",
]


def _lex(fn, text: str) -> tuple[str, object]:
    try:
        return "ok", list(fn(text, "t.nem"))
    except NemDiagnosticError as e:
        return "error", [d.render() for d in e.diagnostics]


def _same(text: str) -> None:
    assert _lex(tokenize, text) == _lex(iter_tokens, text), repr(text)


@pytest.mark.parametrize(
    "path",
    [p.relative_to(ROOT) for p in sources("*.nem", ".")],
    ids=str,
)
def test_repository_programs_lex_alike(path: Path) -> None:
    _same((ROOT / path).read_text(errors="replace"))


def test_random_lines_lex_alike() -> None:
    rng = random.Random(34)
    for _ in range(3000):
        line = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12)))
        _same(line)
        _same(f"a = 1\n{line}\nb")


@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=16))
def test_property_lines_lex_alike(pieces: list[str]) -> None:
    _same("".join(pieces))


def test_parser_locations_equal_verified_ones() -> None:
    text = "buffer B : L2 (size=64)\nR = region(B, 0, 16)\nt = transfer.async(dst=R, src=R)\n"
    module = parse_nem(text, "p.nem")
    locs = [op.location for op in module.walk() if isinstance(op.location, FileLineColLoc)]
    assert len(locs) >= 4
    for loc in locs:
        made = FileLineColLoc(loc.filename, loc.line, loc.column)
        assert loc == made and hash(loc) == hash(made) and loc.parameters == made.parameters
        assert str(loc) == str(made)
    assert [(loc.line.data, loc.column.data) for loc in locs][-2:] == [(2, 1), (3, 1)]
