"""A cursor over `.nem` tokens, shared by the program and config parsers.

It owns error reporting so that every parse error carries `file:line:col`,
the rule id it enforces and a fix hint.
"""

from __future__ import annotations

from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc, fail
from nem.frontends.nem_text.lexer import EOF, ID, INT, PUNCT, Token


class TokenCursor:
    def __init__(self, tokens: list[Token], file: str):
        self.tokens = tokens
        self.file = file
        self.pos = 0

    # -- looking -----------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, k: int = 1) -> Token:
        i = self.pos + k
        return self.tokens[i] if i < len(self.tokens) else self.tokens[-1]

    def at(self, text: str, kind: str | None = None) -> bool:
        t = self.tokens[self.pos]
        return t.text == text and (kind is None or t.kind == kind) and t.kind != "STRING"

    def at_punct(self, text: str) -> bool:
        t = self.tokens[self.pos]
        return t.kind == PUNCT and t.text == text

    def at_eof(self) -> bool:
        return self.tokens[self.pos].kind == EOF

    def loc(self, tok: Token | None = None) -> SourceLoc:
        t = tok or self.tokens[self.pos]
        return SourceLoc(self.file, t.line, t.col)

    # -- consuming ---------------------------------------------------------
    def advance(self) -> Token:
        t = self.tokens[self.pos]
        if t.kind != EOF:
            self.pos += 1
        return t

    def accept(self, text: str) -> Token | None:
        """Consume the current token if its text is `text` (not a string)."""
        t = self.tokens[self.pos]
        if t.text == text and t.kind != "STRING":
            self.pos += 1
            return t
        return None

    def expect(self, text: str, rule: str, what: str | None = None, fix: str | None = None) -> Token:
        t = self.tokens[self.pos]
        if t.text == text and t.kind != "STRING":
            self.pos += 1
            return t
        raise self.error(f"expected '{text}'{' ' + what if what else ''}, found {describe(t)}",
                         rule, fix or f"insert '{text}' here")

    def expect_kind(self, kind: str, rule: str, what: str, fix: str | None = None) -> Token:
        t = self.tokens[self.pos]
        if t.kind == kind:
            self.pos += 1
            return t
        raise self.error(f"expected {what}, found {describe(t)}", rule, fix or f"write {what} here")

    def expect_id(self, rule: str, what: str = "an identifier", fix: str | None = None) -> Token:
        return self.expect_kind(ID, rule, what, fix)

    def expect_int(self, rule: str, what: str = "an integer literal", fix: str | None = None) -> int:
        return int(self.expect_kind(INT, rule, what, fix).text)

    def error(self, message: str, rule: str | None = None, fix: str | None = None,
              tok: Token | None = None) -> NemDiagnosticError:
        return fail(message, self.loc(tok), rule, fix)


def describe(t: Token) -> str:
    if t.kind == EOF:
        return "end of file"
    return f"'{t.text}'"


__all__ = ["TokenCursor", "describe", "ID", "INT"]
