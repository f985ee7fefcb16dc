"""Lexer for `.nem` text (programs, device configs, type-family catalogs).

Two entry points over one token grammar:

* `tokenize` lexes a whole file for the parsers.  It runs the token
  regular expression line by line with `findall` and builds the tokens with
  `map` -- no Python code per token, only per line and per distinct piece
  (a token with the blanks before it) -- because a compiled CNN is 10,000 lines and 800,000 tokens, and a
  per-token loop cost as much as the rest of the parse.  Any line it cannot
  take whole (a stray character, an unterminated string, an out-of-range
  INT) sends the file to `iter_tokens`, which reports the first problem
  exactly where it is.
* `iter_tokens` yields tokens one at a time with their positions: the
  reference lexer, and what readers of a file's head use (`TokenStream`:
  document detection, include locations), so that they never lex the whole
  file.  Both produce the same tokens (test/unit/test_text_fast_paths.py).

Choices the spec leaves open (docs/conformance.md Gaps E) and how they are made here:

* `ID` is `[A-Za-z_][A-Za-z0-9_]*`; keywords are *contextual*: element-type
  names, `strides`, `layout`, unit names and opcode names are plain IDs, and
  the parser gives them meaning by position (decision D-LEX-1).  That is what
  lets the whitepaper's `accum_type=i32` and `strides=[1,1]` parse.
* `transfer.async|sync`, `store.async|sync`, `opcode.mandatory|extended`
  and `OPCODE.async|sync` are single compound tokens (LEX-04).
* `..` is its own token, so `[0..T-1]` never lexes a FLOAT (LEX-05).
* FLOAT is `DIGIT+ . DIGIT+ ([eE][+-]?DIGIT+)?` only (LEX-02); `1.`, `.5` and
  `1e5` are not floats (`1e5` lexes as INT `1` then ID `e5`, which the parser
  rejects).
* A comment runs from `#` to the end of the line, including the last line of
  a file without a final newline (LEX-01, decision D-LEX-2).
* An INT literal is at most 2^63 - 1 (D-INT-RANGE) and at most
  MAX_LITERAL_CHARS characters long (D-LIMITS); it is rejected here, before
  any conversion of a huge digit string.
* Each token records whether a newline precedes it: a newline outside
  brackets ends a compute task's attribute list (decision D-GRAM-1).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import accumulate, chain, repeat
from operator import add, itemgetter
from typing import Any, NamedTuple

from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc, fail
from nem.dialect.limits import INT_MAX, MAX_LITERAL_CHARS

ID, INT, FLOAT, STRING, PUNCT, CALL, EOF = "ID", "INT", "FLOAT", "STRING", "PUNCT", "CALL", "EOF"


class Token(NamedTuple):
    """One token: a tuple, so that the fast lexer builds it without running
    Python code and the parser reads its fields at C speed."""

    kind: str
    text: str
    line: int
    col: int
    nl_before: bool

    def __repr__(self) -> str:
        return f"{self.kind}({self.text!r}@{self.line}:{self.col})"


_SPACE = r"[ \t\r\f]"

_TOKENS: tuple[tuple[str, str], ...] = (
    ("comment", r"\#[^\n]*"),
    (CALL, r"opcode\.(?:mandatory|extended)\b|[A-Za-z_][A-Za-z0-9_]*\.(?:async|sync)\b"),
    (FLOAT, r"[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?"),
    (INT, r"[0-9]+"),
    (ID, r"[A-Za-z_][A-Za-z0-9_]*"),
    (STRING, r'"(?:[^"\\\n]|\\["\\nt]|\\x[0-9a-fA-F]{2})*"'),
    (PUNCT, r"\.\.|[()\[\]{},=:;@+\-*/<>.]"),
)
"""The token grammar, its one home: each kind's expression, in the order
the lexer tries them (the first that matches wins, whatever its length:
a CALL before the ID it starts with, a FLOAT before its INT).  Both
expressions below are built from it."""

_TOKEN_RE = re.compile(
    rf"(?P<ws>{_SPACE}+)|(?P<nl>\n)|" + "|".join(f"(?P<{kind}>{rx})" for kind, rx in _TOKENS)
)
"""The reference lexer's expression: one named alternative per token kind."""

_LINE_RE = re.compile(rf"{_SPACE}*(?:" + "|".join(rx for _name, rx in _TOKENS) + ")")
"""The same tokens on one line, each with the blanks before it, unnamed:
`findall` gives the pieces of the line, from which columns are sums of
lengths, and `_kind` tells each distinct piece's kind once."""


def iter_tokens(text: str, file: str, at: tuple[int, int] = (0, 0)) -> Iterator[Token]:
    """The tokens of `text` one at a time, ending with EOF; a located
    diagnostic at the first character that starts no token.  `at`: the
    lines, and the characters on its first line, before `text` in `file` (a
    chunk of `--split-input-file`): positions are the file's."""
    line, line_start, nl = 1 + at[0], -at[1], True
    pos, end = 0, len(text)
    match = _TOKEN_RE.match
    while pos < end:
        m = match(text, pos)
        if m is None:
            col = pos - line_start + 1
            ch = text[pos]
            if ch == '"':
                raise _bad_string(text, pos, SourceLoc(file, line, col))
            raise fail(
                f"unexpected character {ch!r}",
                SourceLoc(file, line, col),
                "GRAM-16",
                _unexpected_fix(ch, pos == 0 and at == (0, 0)),
            )
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN_RE is a named group
        if kind == "nl":
            line += 1
            line_start = m.end()
            nl = True
        elif kind != "ws" and kind != "comment":
            text_ = m.group()
            if kind == "INT" and not _int_in_range(text_):
                raise _int_out_of_range(text_, SourceLoc(file, line, pos - line_start + 1))
            yield Token(kind, text_, line, pos - line_start + 1, nl)
            nl = False
        pos = m.end()
    yield Token(EOF, "<end of file>", line, pos - line_start + 1, True)


def _unexpected_fix(ch: str, file_start: bool) -> str:
    """The fix of an unexpected character: a byte-order mark is no operator
    (a file saved "UTF-8 with BOM" by a Windows editor was told NEM
    expressions use only + - * / mod, an outside user, session 66)."""
    if ch != "\ufeff":
        return "remove it; NEM expressions use only + - * / mod and parentheses"
    if file_start:
        return (
            "the file starts with a UTF-8 byte-order mark (BOM, as some Windows editors "
            "write): save it as UTF-8 without BOM"
        )
    return "remove it: a byte-order mark (U+FEFF, invisible) has no place inside NEM text"


def tokenize(text: str, file: str, at: tuple[int, int] = (0, 0)) -> list[Token]:
    """All the tokens of `text`, ending with EOF; a located diagnostic at the
    first character that starts no token (the same tokens and diagnostics
    as `iter_tokens`, faster; `at` as there)."""
    tokens: list[Token] = []
    # each distinct piece (blanks, then a token): its token's kind, its text
    # (one string object per distinct text) and the blanks before it
    pieces_seen: dict[str, tuple[str, str, int]] = {}
    texts: dict[str, str] = {}
    findall = _LINE_RE.findall
    new_token = tuple.__new__
    seen = pieces_seen.get
    lines = text.split("\n")
    for number, line in enumerate(lines, 1 + at[0]):
        first = 1 + at[1] if number == 1 + at[0] else 1  # the column of the line's start
        pieces = findall(line)  # each: blanks, then a token
        if not pieces:
            if line.strip(" \t\r\f"):
                return list(iter_tokens(text, file, at))
            continue
        known: list[Any] = list(map(seen, pieces))  # (None: a piece not seen yet)
        if None in known:
            for piece in pieces:
                if piece not in pieces_seen:
                    t = piece.lstrip(" \t\r\f")
                    t = texts.setdefault(t, t)
                    kind = _kind(t)
                    if kind == INT and not _int_in_range(t):
                        return list(iter_tokens(text, file, at))
                    pieces_seen[piece] = (kind, t, len(piece) - len(t))
            known = list(map(pieces_seen.__getitem__, pieces))
        lengths = list(map(len, pieces))
        comment = known[-1][0] == "comment"  # a comment runs to the end of the line
        # findall skips what matches nothing: the pieces cover the line
        # (up to its trailing blanks) only if their lengths add up to it
        if sum(lengths) != (len(line) if comment else len(line.rstrip(" \t\r\f"))):
            return list(iter_tokens(text, file, at))
        if comment:
            del known[-1]
            if not known:
                continue
        # a token's column: where its piece starts, plus the blanks before it
        cols = map(add, accumulate(lengths, initial=first), map(_BLANKS, known))
        tokens += map(
            new_token,
            repeat(Token),
            zip(
                map(_KIND, known),
                map(_TEXT, known),
                repeat(number),
                cols,
                chain((True,), repeat(False)),
            ),
        )
    tokens.append(
        Token(
            EOF,
            "<end of file>",
            len(lines) + at[0],
            len(lines[-1]) + 1 + (at[1] if len(lines) == 1 else 0),
            True,
        )
    )
    return tokens


_KIND, _TEXT, _BLANKS = itemgetter(0), itemgetter(1), itemgetter(2)


def _kind(text: str) -> str:
    """The kind of a token text `_LINE_RE` found (once per distinct text):
    the alternative of `_TOKEN_RE` that matches it."""
    m = _TOKEN_RE.match(text)
    assert m is not None and m.end() == len(text) and m.lastgroup is not None  # one token
    return m.lastgroup


_ESCAPE = re.compile(r'\\(x[0-9a-fA-F]{2}|["\\nt])')
_ESCAPED = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def unquote(text: str) -> str:
    """The value of a STRING token: its text without the quotes, each escape
    (`\\"`, `\\\\`, `\\n`, `\\t`, `\\xHH`; D-LEX-3) resolved.  The lexer
    admits no other escape, so every token has a value."""
    body = text[1:-1]
    if "\\" not in body:
        return body
    return _ESCAPE.sub(lambda m: chr(int(m[1][1:], 16)) if m[1][0] == "x" else _ESCAPED[m[1]], body)


def quote(value: str) -> str:
    """The STRING token whose value is `value` (`unquote`'s inverse): `"` and
    `\\` escaped, and every control character, which a one-line token cannot
    hold raw (D-LEX-3)."""
    out = value.replace("\\", "\\\\").replace('"', '\\"')
    if not out.isprintable():  # control characters (\xHH reaches up to U+00FF)
        out = "".join(
            c
            if c.isprintable() or ord(c) > 0xFF
            else {"\n": "\\n", "\t": "\\t"}.get(c, f"\\x{ord(c):02x}")
            for c in out
        )
    return f'"{out}"'


def _bad_string(text: str, start: int, loc: SourceLoc) -> NemDiagnosticError:
    """Why the string literal starting at `start` is not a STRING token: an
    escape NEM does not define (located at its backslash), or no closing
    quote on its line."""
    pos = start + 1
    while pos < len(text) and text[pos] not in '"\n':
        if text[pos] == "\\":
            m = _ESCAPE.match(text, pos)
            if m is None:
                bad = text[pos : pos + 2].rstrip("\n")
                return fail(
                    f"unknown escape '{bad}' in a string literal",
                    SourceLoc(loc.file, loc.line, loc.col + pos - start),
                    "LEX-01",
                    'the escapes are \\" \\\\ \\n \\t and \\xHH (D-LEX-3); '
                    "write \\\\ for a backslash",
                )
            pos = m.end()
        else:
            pos += 1
    return fail(
        "unterminated string literal", loc, "LEX-01", 'close the string with `"` on the same line'
    )


def _int_in_range(text: str) -> bool:
    return len(text) <= MAX_LITERAL_CHARS and int(text) <= INT_MAX


class TokenStream:
    """The tokens of a text, lexed only as far as they are read: a reader of
    a file's head (its includes, its first declaration) pays for the head
    only.  Indexing past the end gives the EOF token."""

    def __init__(self, text: str, file: str, at: tuple[int, int] = (0, 0)):
        self._iter = iter_tokens(text, file, at)
        self._tokens: list[Token] = []

    def __getitem__(self, index: int) -> Token:
        tokens = self._tokens
        while index >= len(tokens) and (not tokens or tokens[-1].kind != EOF):
            tokens.append(next(self._iter))
        return tokens[index] if index < len(tokens) else tokens[-1]


def _int_out_of_range(text: str, loc: SourceLoc) -> NemDiagnosticError:
    shown = text if len(text) <= 24 else f"{text[:12]}...{text[-6:]} ({len(text)} digits)"
    return fail(
        f"integer literal {shown} is out of range: NEM integers are signed 64-bit, "
        f"at most {INT_MAX} (D-INT-RANGE)",
        loc,
        None,
        "use a smaller value; sizes, offsets and shapes are 64-bit",
    )
