"""Reading source text (programs, config documents, includes, MLIR) safely.

One reader for every tool and loader (D-LIMITS): only regular files (or
standard input, read by the CLIs through `read_source_stream`), at most
`MAX_SOURCE_BYTES`, and UTF-8 only; a file that is not valid UTF-8 is an
error located at the first bad byte (`file:line:col`, with its byte offset).
`/dev/zero`, a FIFO or a directory is refused before anything is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc, fail
from nem.dialect.limits import MAX_SOURCE_BYTES


def read_source(path: str | Path, what: str = "input", loc: SourceLoc | None = None,
                rule: str | None = None) -> str:
    """The text of the regular file `path` (`what` names it in diagnostics;
    `loc`/`rule` locate errors at the include or directive that named it)."""
    return decode_source(read_source_bytes(path, what, loc, rule), str(path))


def read_source_bytes(path: str | Path, what: str = "input", loc: SourceLoc | None = None,
                      rule: str | None = None) -> bytes:
    """The bytes of the regular file `path`, at most MAX_SOURCE_BYTES (text or
    NEM bytecode)."""
    name = str(path)
    try:
        st = os.stat(name)
    except OSError as e:
        raise fail(f"cannot read {what} '{name}': {e.strerror}", loc, rule) from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise fail(f"cannot read {what} '{name}': it is {kind}", loc, rule,
                   "give a regular file (or '-' for standard input)")
    if st.st_size > MAX_SOURCE_BYTES:
        raise too_large(name, what, st.st_size, loc, rule)
    try:
        with open(name, "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
    except OSError as e:
        raise fail(f"cannot read {what} '{name}': {e.strerror}", loc, rule) from None
    if len(data) > MAX_SOURCE_BYTES:
        raise too_large(name, what, len(data), loc, rule)
    return data


def read_source_stream(stream: BinaryIO, name: str = "<stdin>", what: str = "input") -> str:
    """The text of a byte stream (standard input), with the same cap."""
    data = stream.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise too_large(name, what, len(data), None, None)
    return decode_source(data, name)


def too_large(name: str, what: str, size: int, loc: SourceLoc | None,
              rule: str | None) -> NemDiagnosticError:
    more = "more than " if size > MAX_SOURCE_BYTES else ""
    return fail(f"{what} '{name}' has {more}{size} bytes, above the limit of "
                f"{MAX_SOURCE_BYTES} (D-LIMITS)", loc, rule,
                "split the input; sources are read whole")


def decode_source(data: bytes, name: str) -> str:
    """`data` as UTF-8; an invalid byte is an error at its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        prefix = data[:e.start].decode("utf-8", errors="replace")
        line = prefix.count("\n") + 1
        col = len(prefix) - (prefix.rfind("\n") + 1) + 1
        raise fail(f"not valid UTF-8: byte 0x{data[e.start]:02x} at byte offset {e.start} "
                   f"({e.reason})", SourceLoc(name, line, col), None,
                   "save the file as UTF-8") from None


__all__ = ["read_source", "read_source_bytes", "read_source_stream", "decode_source"]
