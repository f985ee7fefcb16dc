"""Diagnostics with source locations, rule ids and fixes.

Every error a user can cause (parser, verifier, device resolution, pass,
runtime) is reported as a `Diagnostic`: `file:line:col: severity: message
[RULE-ID]`, the source line with a caret under the column, and an optional
`fix:` hint.  A batch of diagnostics travels in `NemDiagnosticError`; the
`--verify-diagnostics` mode of `nem-opt` compares these against the
`expected-*` comments of the input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from xdsl.dialects.builtin import (
    ArrayAttr,
    FileLineColLoc,
    FusedLoc,
    IntAttr,
    LocationAttr,
    NoneAttr,
    StringAttr,
)
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import ParseError, VerifyException

from nem.dialect.bounded_cache import BoundedCache
from nem.dialect.limits import max_source_bytes


@dataclass(frozen=True)
class SourceLoc:
    """A 1-based file:line:col position."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    @staticmethod
    def in_chunk(file: str, line: int, col: int, at: tuple[int, int]) -> SourceLoc:
        """The place in `file` of one-based `line`:`col` of a chunk of it
        that starts after `at` = (lines, characters on its first line): a
        `--split-input-file` chunk is parsed where it is, not padded to its
        place (D-OPT-SPLIT)."""
        return SourceLoc(file, line + at[0], col + at[1] if line == 1 else col)

    def to_attr(self) -> FileLineColLoc:
        return FileLineColLoc(StringAttr(self.file), IntAttr(self.line), IntAttr(self.col))

    @staticmethod
    def of(obj: Operation | Attribute | SourceLoc | None) -> SourceLoc | None:
        """The location of an op (from its `location`), or None when unknown."""
        if obj is None or isinstance(obj, SourceLoc):
            return obj
        loc, _origin = split_origin(obj.location if isinstance(obj, Operation) else obj)
        if isinstance(loc, FileLineColLoc):
            return SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
        return None


def fuse_origin(at: Attribute | None, origin: LocationAttr) -> LocationAttr:
    """The location of an op at source position `at` that was compiled from
    `origin` (the ONNX node's location, D-COMPILE-LOC): `fused[FILE:LINE:COL,
    ORIGIN]`, `origin` alone without a position.  This convention
    (D-BC-NODES) is built here and read back by `split_origin` only: the
    `.nemb` writer keeps ORIGIN in the Debug section, its reader restores
    it, diagnostics report FILE:LINE:COL."""
    return FusedLoc(ArrayAttr([at, origin]), NoneAttr()) if at is not None else origin


def split_origin(loc: Attribute | None) -> tuple[Attribute | None, Attribute | None]:
    """(position, origin) of a location: `fuse_origin`'s parts for
    `fused[FILE:LINE:COL, ORIGIN]`, (the first part, None) for another
    fused location, (`loc`, None) for any other."""
    if isinstance(loc, FusedLoc) and isinstance(loc.locations, ArrayAttr) and loc.locations.data:
        parts = loc.locations.data
        origin = parts[1] if len(parts) == 2 and isinstance(parts[0], FileLineColLoc) else None
        return parts[0], origin
    return loc, None


_STR = r'"((?:[^"\\]|\\.)*)"'
NODE_LOC = re.compile(_STR + r"\(" + _STR + r"\(" + _STR + r":(\d+):\d+\)\)")
"""The ONNX importer's location of a node, `"<name>"("<op type>"("<model
file>":<line>:1))` (D-COMPILE-LOC), inside a location's text (also inside
`fused[...]`: an origin naming the nodes fused into its op, D-BC-NODES)."""


LAYOUT = "layout"
"""The op type in the location the ONNX importer gives the change of a
graph input's or output's layout (NCHW to the NHWC a convolution computes
in, and back: D-COMPILE-LAYOUT), named after the input or output: no node
of the model, a row of its own in the roofline report (`layout of 'x'`),
which charged it to the first or last node (an outside review, session 54)."""


def located_nodes(location: str) -> list[tuple[str, str, str, int]]:
    """(name, op type, model file, line) of each ONNX node a location's text
    names (`NODE_LOC`), in order: the node an op was compiled from first,
    then the nodes fused into it (D-BC-NODES).  Here, not in the ONNX front
    end, because the runtime's roofline report reads them without onnx."""
    return [
        (_unescape(m[1]), _unescape(m[2]), _unescape(m[3]), int(m[4]))
        for m in NODE_LOC.finditer(location)
    ]


def _unescape(text: str) -> str:
    return text.replace('\\"', '"').replace("\\\\", "\\")


@dataclass
class Diagnostic:
    """One message about one place in the user's text."""

    severity: str
    message: str
    loc: SourceLoc | None = None
    rule: str | None = None
    fix: str | None = None
    notes: list[Diagnostic] = field(default_factory=list)

    def headline(self) -> str:
        where = f"{self.loc}: " if self.loc else ""
        rule = f" [{self.rule}]" if self.rule else ""
        return f"{where}{self.severity}: {self.message}{rule}"

    def render(self, sources: SourceCache | None = None) -> str:
        lines = [self.headline()]
        if self.loc is not None:
            text = (sources or _DEFAULT_SOURCES).line(self.loc.file, self.loc.line)
            if text is not None:
                shown, caret = _window(text, self.loc.col)
                lines.append(shown)
                lines.append(" " * caret + "^")
        if self.fix:
            lines.append(f"fix: {self.fix}")
        for note in self.notes:
            lines.append(note.render(sources))
        return "\n".join(lines)


SHOWN_LINE_CHARS = 120
"""A quoted source line longer than this is cut to a window around the column."""


def _window(text: str, col: int) -> tuple[str, int]:
    """The part of source line `text` to quote and the caret's offset in it."""
    if len(text) <= SHOWN_LINE_CHARS:
        return text, col - 1
    half = SHOWN_LINE_CHARS // 2
    start = max(0, min(col - 1 - half, len(text) - SHOWN_LINE_CHARS))
    end = start + SHOWN_LINE_CHARS
    head = "..." if start > 0 else ""
    tail = "..." if end < len(text) else ""
    return head + text[start:end] + tail, col - 1 - start + len(head)


SOURCE_CACHE_FILES = 256
"""The files whose text a `SourceCache` keeps (issue 36: bounded); a file
read from disk again when it is quoted after more have been registered."""


class SourceCache:
    """Source text by file name, so diagnostics can quote the line they name;
    at most `limit` files (the oldest dropped first)."""

    def __init__(self, limit: int = SOURCE_CACHE_FILES) -> None:
        # file -> (its lines, where they start: `at` of `add`)
        self._files: BoundedCache[str, tuple[list[str], tuple[int, int]]] = BoundedCache(limit)

    def add(self, file: str, text: str, at: tuple[int, int] = (0, 0)) -> None:
        """`at`: the lines, and the characters on its first line, before
        `text` in `file` (a chunk of `--split-input-file`), so that the
        file's line numbers find their text without padding it."""
        lines = text.splitlines()
        if lines and at[1]:
            lines[0] = " " * at[1] + lines[0]
        self._files[file] = (lines, at)

    def text(self, file: str) -> str | None:
        """The registered text of `file` (None when it was never registered),
        which starts at `start(file)`."""
        got = self._files.get(file)
        if got is None:
            return None
        lines, at = got
        return "\n".join(lines)[at[1] :]

    def start(self, file: str) -> tuple[int, int]:
        """Where the registered text of `file` starts (`at` of `add`)."""
        got = self._files.get(file)
        return (0, 0) if got is None else got[1]

    def line(self, file: str, line: int) -> str | None:
        got = self._files.get(file)
        if got is None:
            try:
                path = Path(file)
                if not path.is_file() or path.stat().st_size > max_source_bytes():
                    return None
                got = self._files[file] = (path.read_text(encoding="utf-8").splitlines(), (0, 0))
            except (OSError, UnicodeDecodeError):
                return None
        lines, at = got
        line -= at[0]
        return lines[line - 1] if 0 < line <= len(lines) else None


_DEFAULT_SOURCES = SourceCache()


def register_source(file: str, text: str, at: tuple[int, int] = (0, 0)) -> None:
    """Remember the text of an input that may not exist on disk (stdin,
    chunks; `at` as `SourceCache.add`)."""
    _DEFAULT_SOURCES.add(file, text, at)


def source_text(file: str) -> str | None:
    """The text registered for `file` by `register_source` (a parsed input),
    which starts at `source_start(file)` in the file."""
    return _DEFAULT_SOURCES.text(file)


def source_start(file: str) -> tuple[int, int]:
    """Where the text registered for `file` starts (lines, columns before it)."""
    return _DEFAULT_SOURCES.start(file)


class NemDiagnosticError(Exception):
    """One or more diagnostics of which at least one is an error."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.render() for d in diagnostics))


def error(
    message: str,
    loc: SourceLoc | Operation | None = None,
    rule: str | None = None,
    fix: str | None = None,
) -> Diagnostic:
    return Diagnostic("error", message, SourceLoc.of(loc), rule, fix)


def fail(
    message: str,
    loc: SourceLoc | Operation | None = None,
    rule: str | None = None,
    fix: str | None = None,
) -> NemDiagnosticError:
    """An exception carrying one error diagnostic (raise the result)."""
    return NemDiagnosticError([error(message, loc, rule, fix)])


class RuleVerifyException(VerifyException):
    """A NEM op or attribute verifier's error that breaks a spec rule.

    xDSL re-raises the verifier's own exception object, so the drivers
    (`nem-opt`, the MLIR reader, the builder) report it with its rule and
    fix, like the static verifier, instead of as bare xDSL text."""

    def __init__(self, message: str, rule: str, fix: str):
        super().__init__(f"{message} [{rule}]")
        self.message, self.rule, self.fix = message, rule, fix

    def diagnostic(self, loc: SourceLoc | None) -> Diagnostic:
        return Diagnostic("error", self.message, loc, self.rule, self.fix)


@dataclass
class RuleParseError(ParseError):
    """An xDSL `ParseError` in a NEM attribute's MLIR syntax that breaks a
    spec rule: the MLIR driver reports it with the rule and its fix, as the
    `.nem` parser does, not as a generic syntax error."""

    rule: str = ""
    fix: str = ""
