"""Reading files safely: source text (programs, config documents,
includes, MLIR) and every other file a tool reads whole.

`regular_file` and `read_file_bytes` are the one test and the one reader
of every path a tool or loader reads whole (D-FILE-PATHS): only regular
files, refused with what they are (a directory, a FIFO, a device) before
they are opened, and at most the limit of what they are.  Sources
(D-LIMITS) are at most `max_source_bytes()` (8 MiB unless raised, from
standard input too, `read_source_stream`) and UTF-8 only; a file that is
not valid UTF-8 is an error located at the first bad byte (`file:line:col`,
with its byte offset).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import BinaryIO

from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc, fail
from nem.dialect.limits import MAX_INPUT_FILE_BYTES, max_source_bytes


def read_source(
    path: str | Path, what: str = "input", loc: SourceLoc | None = None, rule: str | None = None
) -> str:
    """The text of the regular file `path` (`what` names it in diagnostics;
    `loc`/`rule` locate errors at the include or directive that named it)."""
    return decode_source(read_source_bytes(path, what, loc, rule), str(path))


def read_source_bytes(
    path: str | Path,
    what: str = "input",
    loc: SourceLoc | None = None,
    rule: str | None = None,
    bytecode_magic: bytes | None = None,
) -> bytes:
    """The bytes of the regular file `path`, at most `max_source_bytes()`
    (text or NEM bytecode).  A file starting with `bytecode_magic` may be
    `MAX_INPUT_FILE_BYTES` larger: a `.nemb`'s Data section holds the
    program's initial contents (a model's weights), bounded as the `--input`
    files that would carry them are; its reader bounds the rest of the file
    by `max_source_bytes()` (D-LIMITS)."""
    limit = max_source_bytes()
    if bytecode_magic is not None and _starts_with(path, bytecode_magic):
        limit += MAX_INPUT_FILE_BYTES
    try:
        return read_file_bytes(path, limit, what)
    except FileTooLarge as e:
        raise too_large(str(path), what, e.size, loc, rule, e.exact) from None
    except FileRefused as e:
        raise fail(str(e), loc, rule, e.fix) from None


def _starts_with(path: str | Path, magic: bytes) -> bool:
    """Does the regular file `path` start with `magic`?  (False for anything
    the reader will refuse with its own message.)"""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    except (OSError, ValueError):
        return False


def read_stream_bytes(stream: BinaryIO, bytecode_magic: bytes | None = None) -> bytes | None:
    """At most `max_source_bytes()` bytes of `stream` (standard input), or
    `MAX_INPUT_FILE_BYTES` more when they start with `bytecode_magic` (as
    `read_source_bytes`); None when the stream holds more than that."""
    limit = max_source_bytes()
    data = stream.read(limit + 1)
    if bytecode_magic is not None and data.startswith(bytecode_magic) and len(data) > limit:
        limit += MAX_INPUT_FILE_BYTES
        data += stream.read(limit + 1 - len(data))
    return None if len(data) > limit else data


class FileRefused(Exception):
    """A path a tool will not read: missing, unreadable, or not a regular
    file (a directory, a FIFO, a device, a socket), or larger than the limit
    of what it is (`FileTooLarge`).  The message names the path and says why;
    `fix` says what to give instead."""

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.fix = fix


class FileTooLarge(FileRefused):
    """`size`: the file's size (`exact`), or what was read before the limit
    stopped the read."""

    def __init__(self, message: str, size: int, limit: int, exact: bool = True):
        super().__init__(message, "give a smaller file, or raise the limit (D-LIMITS)")
        self.size, self.limit, self.exact = size, limit, exact


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def regular_file(path: str | Path, what: str = "input") -> os.stat_result:
    """The status of `path` if it is a regular file (after symbolic links),
    else `FileRefused` naming what it is: the one test every tool makes
    before it reads a file whole (D-FILE-PATHS).  A FIFO or a device is
    refused before it is opened (opening a FIFO waits for a writer,
    `/dev/zero` never ends)."""
    name = str(path)
    it = f"{what} '{name}'" if what else f"'{name}'"
    try:
        st = os.stat(name)
    except OSError as e:
        raise FileRefused(f"cannot read {it}: {e.strerror}") from None
    except ValueError as e:  # an embedded NUL byte
        raise FileRefused(f"cannot read {what} {name!r}: {e}".replace("  ", " ")) from None
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused(
            f"cannot read {it}: it is {_kind(st.st_mode)}",
            "give a regular file (or '-' for standard input where the tool reads one)",
        )
    return st


def read_file_bytes(path: str | Path, limit: int, what: str = "input") -> bytes:
    """The bytes of the regular file `path`, refused (`FileTooLarge`) when
    it has more than `limit` bytes: checked on its size before it is read,
    and again on what is read (a file that grows meanwhile)."""
    name = str(path)
    st = regular_file(name, what)
    if st.st_size > limit:
        raise FileTooLarge(
            f"{what} '{name}' has {st.st_size} bytes, above the limit of {limit}", st.st_size, limit
        )
    try:
        with open(name, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise FileRefused(f"cannot read {what} '{name}': {e.strerror}") from None
    reads = _READS.get()
    if reads is not None:
        reads.setdefault((st.st_dev, st.st_ino), name)
    if len(data) > limit:
        raise FileTooLarge(
            f"{what} '{name}' has more than {limit} bytes, above the limit",
            len(data),
            limit,
            exact=False,
        )
    return data


_READS: ContextVar[dict[tuple[int, int], str] | None] = ContextVar("tracked_reads", default=None)
"""The files read whole inside the innermost `tracking_reads` block: file
identity (device, inode) -> the path it was read by (a context variable,
scoped to the block: D-MODULE-STATE)."""


@contextmanager
def tracking_reads() -> Iterator[None]:
    """Inside the block, every file `read_file_bytes` reads is recorded, so
    that a command refuses to write any of them (`read_here`): the files a
    command reads are known only as it reads them (a program's includes, its
    device file), after the up-front check of the paths it was given
    (D-FILE-PATHS).  Scoped to one command: a long-lived process (a test run)
    does not accumulate identities that a later file could reuse."""
    token = _READS.set({})
    try:
        yield
    finally:
        _READS.reset(token)


def read_here(path: str | Path) -> str | None:
    """The path by which the current `tracking_reads` block read the file
    `path` names (through any link), or None."""
    reads = _READS.get()
    if reads is None:
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return reads.get((st.st_dev, st.st_ino))


def read_source_stream(stream: BinaryIO, name: str = "<stdin>", what: str = "input") -> str:
    """The text of a byte stream (standard input), with the same cap."""
    limit = max_source_bytes()
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise too_large(name, what, len(data), None, None, False)
    return decode_source(data, name)


def too_large(
    name: str, what: str, size: int, loc: SourceLoc | None, rule: str | None, exact: bool
) -> NemDiagnosticError:
    """`exact`: `size` is the file's size, else the bytes read before the
    limit stopped the read (the input has at least that many)."""
    limit = max_source_bytes()
    more = "" if exact else "more than "
    return fail(
        f"{what} '{name}' has {more}{size} bytes, above the limit of {limit} (D-LIMITS)",
        loc,
        rule,
        "split the input, or raise the limit: --max-source-bytes N "
        "(nem.dialect.limits.source_limit from Python)",
    )


def decode_source(data: bytes, name: str) -> str:
    """`data` as UTF-8; an invalid byte is an error at its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        prefix = data[: e.start].decode("utf-8", errors="replace")
        line = prefix.count("\n") + 1
        col = len(prefix) - (prefix.rfind("\n") + 1) + 1
        raise fail(
            f"not valid UTF-8: byte 0x{data[e.start]:02x} at byte offset {e.start} ({e.reason})",
            SourceLoc(name, line, col),
            None,
            "save the file as UTF-8",
        ) from None


__all__ = [
    "read_source",
    "read_source_bytes",
    "read_stream_bytes",
    "read_source_stream",
    "decode_source",
    "FileRefused",
    "FileTooLarge",
    "regular_file",
    "read_file_bytes",
]
