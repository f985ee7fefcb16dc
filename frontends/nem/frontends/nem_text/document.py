"""Which kind of `.nem` document a text is (docs/conformance.md Gaps E, decision D-DOC-KIND).

A document is a program or a config document (GRAM-01).  A file that holds
only includes, `type_family` and `device NAME [extends P] { ... }` blocks is a
config document; anything else (statements, a `program` header, `device
"file"` / `device ID` directives) makes it a program.  An empty file is an
empty program.

The test lexes only as far as it reads (`TokenStream`): a program is told
by its first statement, whatever its length.
"""

from __future__ import annotations

import re

from nem.frontends.nem_text.lexer import EOF, ID, STRING, TokenStream


def _skip_braces(tokens: TokenStream, i: int) -> int | None:
    """Index after the `{...}` block starting at or after `i` (None if unbalanced).

    A type family's parameter list `<T: {f16, bf16}>` comes before its body
    and holds braces of its own, so it is skipped first."""
    angle = 0
    while tokens[i].text != "{" or angle:
        if tokens[i].kind == EOF:
            return None
        if tokens[i].text == "<" and tokens[i].kind != STRING:
            angle += 1
        elif tokens[i].text == ">" and tokens[i].kind != STRING:
            angle = max(0, angle - 1)
        i += 1
    depth = 0
    while tokens[i].kind != EOF:
        t = tokens[i]
        i += 1
        if t.kind == STRING:
            continue
        if t.text == "{":
            depth += 1
        elif t.text == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def is_config_document(text: str, file: str, at: tuple[int, int] = (0, 0)) -> bool:
    """Whether `text` is a config document (else a program); a lexical error
    in the part read is raised as the parsers would (`at` as `parse_nem`'s)."""
    tokens = TokenStream(text, file, at)
    i = 0
    while tokens[i].text == "include" and tokens[i + 1].kind == STRING:
        i += 2
    seen = False
    while tokens[i].kind != EOF:
        t = tokens[i]
        if t.kind == ID and t.text == "type_family":
            pass
        elif (
            t.kind == ID
            and t.text == "device"
            and tokens[i + 1].kind == ID
            and tokens[i + 2].text in ("{", "extends")
        ):
            pass
        else:
            return False
        j = _skip_braces(tokens, i)
        if j is None:
            return True  # let the config parser report the unbalanced block
        i, seen = j, True
    return seen


_NEM_STATEMENT = re.compile(
    r"(?:include|device|program|const|let|buffer|loop|type_family)\b"
    r"|wait\s*\("
    r"|[A-Za-z_]\w*\s*=\s*(?:region\s*\(|[A-Za-z_]\w*\.(?:async|sync)\b|wait\s*\()"
    r"|[A-Za-z_]\w*\.(?:async|sync)\b"
    r"|;"
)
_MLIR_ALIAS = re.compile(r"[#!][A-Za-z_][\w.$-]*\s*(?:=|<)")


def detect_format(text: str) -> str:
    """`"nem"` or `"mlir"`: the syntax of an input with no file name (stdin),
    from its first significant line (decision D-OPT-STDIN).

    `//` lines are MLIR comments and `#` lines `.nem` comments, except an MLIR
    attribute alias (`#map = ...`, `#x<...>`); the first other line is `.nem`
    when it starts a `.nem` statement (a keyword such as `const`, `buffer`,
    `device`, `NAME = region(`, a task `NAME = op.async`), else MLIR.  A text
    of comments only takes the syntax of its comments."""
    from nem.dialect.arguments import check_type

    check_type("detect_format", "text", text, str, "a str")
    hash_comments = slash_comments = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("//"):
            slash_comments = True
            continue
        if line.startswith("#"):
            if _MLIR_ALIAS.match(line):
                return "mlir"
            hash_comments = True
            continue
        return "nem" if _NEM_STATEMENT.match(line) else "mlir"
    return "nem" if hash_comments and not slash_comments else "mlir"
