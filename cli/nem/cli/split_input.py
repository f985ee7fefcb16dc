"""`--split-input-file`: an input cut into chunks at a marker, as mlir-opt 22
cuts it (`mlir::splitAndProcessBuffer`; decision D-OPT-SPLIT).

The marker (`// -----` for MLIR, `# -----` for `.nem`, or the one given with
`--split-input-file=MARKER`) splits the text wherever it occurs, not only on
a line of its own: indented, after code, with text after it (which starts
the next chunk).  Upstream finds the marker without its last two characters
and then checks them; where they are not there, or are followed by `0` (the
check upstream makes), it is a "near miss": a warning, and no split.

    >>> chunks, near = split_input("a\\n  // -----\\nb\\n// ----\\n", "x.mlir", "// -----")
    >>> [(c.text, c.line, c.col) for c in chunks], [str(d.loc) for d in near]
    ([('a\\n  ', 0, 0), ('\\nb\\n// ----\\n', 1, 10)], ['x.mlir:4:7'])

Each chunk keeps its place in the file (`line`, `col` of its first
character); the readers take it as an offset (`at=` of `parse_nem` and
`parse_mlir_checked`), so that diagnostics about a chunk carry the file's
own line and column and the work stays linear in the file.  Two differences from mlir-opt: a
marker at the very start of the input starts an empty first chunk (mlir-opt
takes the marker's last two characters as the chunk's first text, a parse
error), and a marker of one or two characters is refused by the driver
(mlir-opt fails an assertion).
"""

from __future__ import annotations

from dataclasses import dataclass

from nem.dialect.diagnostics import Diagnostic, SourceLoc

__all__ = ["Chunk", "split_input"]

CHECKED = 2
"""How many of the marker's last characters upstream checks after a match
of the rest."""


@dataclass(frozen=True)
class Chunk:
    """A piece of the input: its text and where it starts in the file
    (lines before it, characters before it on its first line)."""

    text: str
    line: int = 0
    col: int = 0


def split_input(text: str, file: str, marker: str) -> tuple[list[Chunk], list[Diagnostic]]:
    """The chunks of `text` between occurrences of `marker` (at least three
    characters; an empty marker: the whole text), and a warning at each
    near miss.  An empty text has no chunk, as in mlir-opt."""
    if not marker:
        return [Chunk(text)], []
    head, tail = marker[:-CHECKED], marker[-CHECKED:]
    pieces = text.split(head)
    chunks: list[Chunk] = []
    near: list[Diagnostic] = []
    start, end = 0, len(pieces[0])  # the chunk being built: text[start:end]
    lines = _LineCounter(text)
    place = (0, 0)  # where the chunk being built starts
    for piece in pieces[1:]:
        at = end + len(head)  # where `piece` starts in `text`
        if piece.startswith(tail) and len(piece) > CHECKED and piece[CHECKED] != "0":
            chunks.append(Chunk(text[start:end], *place))
            start = at + CHECKED
            place = lines.at(start)
        else:
            line, col = lines.at(at)
            near.append(
                Diagnostic(
                    "warning",
                    f"near miss with file split marker '{marker}'",
                    SourceLoc(file, line + 1, col + 1),
                    fix=f"write the marker '{marker}' (followed by anything but '0') to split "
                    f"here, or change the text so that it does not hold '{head}'",
                )
            )
        end = at + len(piece)
    if end > start:
        chunks.append(Chunk(text[start:end], *place))
    return chunks, near


class _LineCounter:
    """Lines and columns of increasing offsets of a text (chunk starts and
    near misses, in order), each counted from the previous one: splitting
    the text is linear, whatever its chunks."""

    def __init__(self, text: str):
        self.text, self.pos, self.line, self.line_start = text, 0, 0, 0

    def at(self, offset: int) -> tuple[int, int]:
        """(newlines before `offset`, characters between the last one and it)."""
        text = self.text
        self.line += text.count("\n", self.pos, offset)
        nl = text.rfind("\n", self.pos, offset)
        if nl >= 0:
            self.line_start = nl + 1
        self.pos = offset
        return self.line, offset - self.line_start
