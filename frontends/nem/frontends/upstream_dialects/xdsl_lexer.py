"""xDSL 0.74's string-literal regex, made linear (D-XDSL-STRING-LEXER).

`MLIRLexer._unescaped_characters_regex` is
`"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"`: a `+` inside a `*`,
so on a string literal that never closes (a truncated or hand-edited
escape-hatch kernel, a `.mlir` file cut short) the regex engine tries every
way of splitting the rest of the input before failing -- exponential time;
a 300-character unterminated kernel string kept `nem-run` busy for minutes.
The two alternatives cannot start with the same character (the first never
consumes a backslash), so the possessive form (Python 3.11) matches exactly
the same literals and fails in linear time.  Every xDSL parse in the
project goes through this package (`LocatingParser`, the runtime's kernel
parser imports it), which applies the fix once on import.
"""

from __future__ import annotations

import re

from xdsl.utils.mlir_lexer import MLIRLexer

LINEAR_STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')


def use_linear_string_literals() -> None:
    """Replace xDSL's backtracking string-literal regex (idempotent)."""
    MLIRLexer._unescaped_characters_regex = LINEAR_STRING_LITERAL  # noqa: SLF001
