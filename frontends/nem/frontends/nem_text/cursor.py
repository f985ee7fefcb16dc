"""A cursor over `.nem` tokens, shared by the program and config parsers.

It owns error reporting so that every parse error carries `file:line:col`,
the rule id it enforces and a fix hint.

The current token is an attribute (`tok`), set whenever the position moves
(`advance`, `seek`), not looked up on each read: the parsers read it several
times per token, and a large program has close to a million tokens.  A
token's text tells keywords and punctuation from string literals by itself
(a STRING's text keeps its quotes), so matching a text needs no kind test.
"""

from __future__ import annotations

from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc, fail
from nem.frontends.nem_text.lexer import EOF, ID, INT, PUNCT, Token, TokenStream


class TokenCursor:
    """A position in a token sequence ending with EOF: a list, or a
    `TokenStream` that lexes as far as it is read."""

    def __init__(self, tokens: list[Token] | TokenStream, file: str, pos: int = 0):
        self.tokens = tokens
        self.file = file
        self.seek(pos)

    # -- looking -----------------------------------------------------------
    def seek(self, pos: int) -> None:
        """Move to token `pos` (backtracking, or a reader's starting point)."""
        self.pos = pos
        self.tok: Token = self.tokens[pos]

    def peek(self, k: int = 1) -> Token:
        try:
            return self.tokens[self.pos + k]
        except IndexError:  # past EOF: EOF again
            return self.tokens[-1]

    def at(self, text: str, kind: str | None = None) -> bool:
        t = self.tok
        return t.text == text and (kind is None or t.kind == kind)

    def at_punct(self, text: str) -> bool:
        t = self.tok
        return t.text == text and t.kind == PUNCT

    def at_eof(self) -> bool:
        return self.tok.kind == EOF

    def loc(self, tok: Token | None = None) -> SourceLoc:
        t = tok or self.tok
        return SourceLoc(self.file, t.line, t.col)

    # -- consuming ---------------------------------------------------------
    def advance(self) -> Token:
        t = self.tok
        if t.kind != EOF:
            self.pos += 1
            self.tok = self.tokens[self.pos]
        return t

    def accept(self, text: str) -> Token | None:
        """Consume the current token if its text is `text` (not a string)."""
        t = self.tok
        if t.text == text:
            self.pos += 1
            self.tok = self.tokens[self.pos]
            return t
        return None

    def expect(
        self, text: str, rule: str, what: str | None = None, fix: str | None = None
    ) -> Token:
        t = self.tok
        if t.text == text:
            self.pos += 1
            self.tok = self.tokens[self.pos]
            return t
        raise self.error(
            f"expected '{text}'{' ' + what if what else ''}, found {describe(t)}",
            rule,
            fix or f"insert '{text}' here",
        )

    def expect_kind(self, kind: str, rule: str, what: str, fix: str | None = None) -> Token:
        t = self.tok
        if t.kind == kind:
            self.pos += 1
            self.tok = self.tokens[self.pos]
            return t
        raise self.error(f"expected {what}, found {describe(t)}", rule, fix or f"write {what} here")

    def expect_id(self, rule: str, what: str = "an identifier", fix: str | None = None) -> Token:
        return self.expect_kind(ID, rule, what, fix)

    def expect_int(
        self, rule: str, what: str = "an integer literal", fix: str | None = None
    ) -> int:
        return int(self.expect_kind(INT, rule, what, fix).text)

    def error(
        self,
        message: str,
        rule: str | None = None,
        fix: str | None = None,
        tok: Token | None = None,
    ) -> NemDiagnosticError:
        return fail(message, self.loc(tok), rule, fix)


def describe(t: Token) -> str:
    if t.kind == EOF:
        return "end of file"
    return f"'{t.text}'"


__all__ = ["TokenCursor", "describe", "ID", "INT"]
