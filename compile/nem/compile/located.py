"""A stage's MLIR text with its locations, on the lines of the plain text.

The lowering parses and reports positions in the tile stage's plain text
(`str(module)`: no locations), so a file written for the user must have
the same op on the same line and column, and carry each op's location, the
ONNX node it was built for (D-COMPILE-LOC) or the user's `.mlir` position.
Upstream's printer with debug info puts the location aliases (`#loc3 =
loc(...)`) before the module, among the attribute aliases, which moves
every line; with `use_local_scope` it inlines the attribute aliases too.
So the aliased print is taken and each `#locN` replaced by what it stands
for: the attribute aliases (`#map`) stay where the plain text has them,
the locations are inline, and upstream parses the result as it is
(D-COMPILE-TEMPS-LOC).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlir import ir

_ALIAS_DEF = re.compile(r"(#loc\d*) = loc\((.*)\)")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|#loc\d*\b')
"""A string literal (left as it is: a node may be named `#loc1`) or a
location alias."""


def located_text(module: ir.Module) -> str:
    """`module` (an `mlir.ir.Module`) printed with its locations inline, each
    op on the line and column where `str(module)` prints it."""
    text = module.operation.get_asm(enable_debug_info=True)
    defs: dict[str, str] = {}
    body: list[str] = []
    for line in text.split("\n"):
        m = _ALIAS_DEF.fullmatch(line)
        if m is not None:
            defs[m[1]] = m[2]
        else:
            body.append(line)
    resolved: dict[str, str] = {}

    def expand(part: str) -> str:
        return _TOKEN.sub(lambda t: t[0] if t[0].startswith('"') else resolve(t[0]), part)

    def resolve(alias: str) -> str:
        if alias not in resolved:  # an alias refers only to aliases defined before it
            resolved[alias] = expand(defs[alias])
        return resolved[alias]

    for alias in defs:  # in definition order: each one's references are resolved first
        resolve(alias)
    return "\n".join(expand(line) if "#loc" in line else line for line in body)
