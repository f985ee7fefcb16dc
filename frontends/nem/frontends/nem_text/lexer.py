"""Lexer for `.nem` text (programs, device configs, type-family catalogs).

One compiled regular expression turns the whole input into a list of tokens.
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
from dataclasses import dataclass

from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc, fail
from nem.dialect.limits import INT_MAX, MAX_LITERAL_CHARS

ID, INT, FLOAT, STRING, PUNCT, CALL, EOF = "ID", "INT", "FLOAT", "STRING", "PUNCT", "CALL", "EOF"


@dataclass(slots=True)
class Token:
    kind: str
    text: str
    line: int
    col: int
    nl_before: bool

    def __repr__(self) -> str:
        return f"{self.kind}({self.text!r}@{self.line}:{self.col})"


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\f]+)
  | (?P<nl>\n)
  | (?P<comment>\#[^\n]*)
  | (?P<CALL>(?:transfer|store)\.(?:async|sync)\b|opcode\.(?:mandatory|extended)\b
             |[A-Za-z_][A-Za-z0-9_]*\.(?:async|sync)\b)
  | (?P<FLOAT>[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?)
  | (?P<INT>[0-9]+)
  | (?P<ID>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<STRING>"(?:[^"\\\n]|\\.)*")
  | (?P<PUNCT>\.\.|[()\[\]{},=:;@+\-*/<>.])
    """,
    re.VERBOSE,
)


def tokenize(text: str, file: str) -> list[Token]:
    """Split `text` into tokens; raise a located diagnostic on a stray character."""
    tokens: list[Token] = []
    append = tokens.append
    line, line_start, nl = 1, 0, True
    pos, end = 0, len(text)
    match = _TOKEN_RE.match
    while pos < end:
        m = match(text, pos)
        if m is None:
            col = pos - line_start + 1
            ch = text[pos]
            if ch == '"':
                raise fail("unterminated string literal", SourceLoc(file, line, col), "LEX-01",
                           'close the string with `"` on the same line')
            raise fail(f"unexpected character {ch!r}", SourceLoc(file, line, col), "GRAM-16",
                       "remove it; NEM expressions use only + - * / mod and parentheses")
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN_RE is a named group
        if kind == "nl":
            line += 1
            line_start = m.end()
            nl = True
        elif kind != "ws" and kind != "comment":
            text_ = m.group()
            if kind == "INT" and (len(text_) > MAX_LITERAL_CHARS or int(text_) > INT_MAX):
                raise _int_out_of_range(text_, SourceLoc(file, line, pos - line_start + 1))
            append(Token(kind, text_, line, pos - line_start + 1, nl))
            nl = False
        pos = m.end()
    append(Token(EOF, "<end of file>", line, pos - line_start + 1, True))
    return tokens


def _int_out_of_range(text: str, loc: SourceLoc) -> NemDiagnosticError:
    shown = text if len(text) <= 24 else f"{text[:12]}...{text[-6:]} ({len(text)} digits)"
    return fail(f"integer literal {shown} is out of range: NEM integers are signed 64-bit, "
                f"at most {INT_MAX} (D-INT-RANGE)", loc, None,
                "use a smaller value; sizes, offsets and shapes are 64-bit")
