"""What `nem-opt` and `nem-run` share: the version text and output files
that appear only when the tool succeeds."""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import sys
import tempfile
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any

from nem.dialect.source_files import read_here

DISTRIBUTION = "nem-toolchain"


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def version_text(tool: str) -> str:
    """`TOOL (nem-toolchain) X.Y.Z` and the versions of what it runs on,
    from the installed package metadata."""
    lines = [f"{tool} ({DISTRIBUTION}) {_version(DISTRIBUTION) or 'unknown'}"]
    parts = [
        f"xDSL {_version('xdsl') or 'unknown'}",
        f"numpy {_version('numpy') or 'unknown'}",
        f"Python {platform.python_version()}",
    ]
    mlir = _version("xtc-mlir-python-bindings")
    if mlir:
        parts.append(f"MLIR Python bindings {mlir}")
    lines.append("  " + ", ".join(parts))
    return "\n".join(lines)


def is_stdio(path: str | None) -> bool:
    """`-` (or no path) names standard input / output, as in mlir-opt."""
    return path is None or path == "-"


def command_line(words: Sequence[str]) -> str:
    """`words` as a command a user pastes into a POSIX shell (the `run:`
    line of `nem-compile -v`): each word `shlex.quote`d, so that a file name
    with a space stays one argument.  A path word is given as it is meant;
    `path_word` keeps one that starts with `-` from reading as an option."""
    import shlex

    return " ".join(shlex.quote(w) for w in words)


def path_word(path: str) -> str:
    """`path` as a command-line argument: `./-x.nem` for `-x.nem`, which
    argparse would read as an option (an outside user, session 66: `nem-run
    -dash.nem --input -dash.weights.npz`, printed by `nem-compile -v`, failed
    with 'expected one argument'); `-` (standard input) stays."""
    return "./" + path if path.startswith("-") and path != "-" else path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def output_file(path: str | None, mode: str = "w") -> Iterator[IO[Any]]:
    """Standard output for `None` or `-`; else a temporary file next to
    `path`, renamed to `path` when the `with` block ends normally and deleted
    when it raises (`SystemExit` included), so a failed run leaves no output
    file and does not clobber an existing one (D-OPT-OUTPUT).  A path that
    exists and is not a regular file (`/dev/null`, a FIFO) is written in
    place: renaming onto it would replace the device.  A path that
    cannot be written fails here, before any work, naming `path`; a file the
    command has read meanwhile (`tracking_reads`: an include, a device file)
    is refused at the end, and left as it was (D-FILE-PATHS)."""
    if is_stdio(path):
        if "b" not in mode:
            yield sys.stdout
            return
        binary = getattr(sys.stdout, "buffer", None)
        if binary is None:  # a text stream (a notebook's, a harness's)
            raise OSError(
                errno.EBADF,
                "it takes text only; write the bytecode with -o FILE",
                "standard output",
            )
        yield binary
        return
    assert path is not None
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(21, "Is a directory", path)
    if target.exists() and not target.is_file():
        # /dev/null, a FIFO, a terminal: written in place, never replaced
        with open(target, mode, encoding=None if "b" in mode else "utf-8") as out:
            yield out
        return
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.",
            suffix=".tmp",
            dir=target.parent if str(target.parent) else ".",
        )
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None
    ok = False
    try:
        with open(fd, mode, encoding=None if "b" in mode else "utf-8") as out:
            yield out
        ok = True
    finally:
        read = read_here(target) if ok else None
        if read is not None:
            ok = False  # a file this command read (an include, a device file)
        if ok:
            # mkstemp creates 0600; the output gets an existing file's mode,
            # else what open() would give (0666 minus the umask)
            os.chmod(tmp, target.stat().st_mode & 0o7777 if target.exists() else 0o666 & ~_umask())
            os.replace(tmp, target)
        else:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    if read is not None:
        raise OSError(errno.EEXIST, written_input(path, read), path)


def written_input(path: str, read: str) -> str:
    """Why an output `path` that names the file the command read as `read` is refused."""
    also = "" if read == path else f" (as '{read}')"
    return (
        f"'{path}' was read by this command{also}: writing it would destroy it; "
        "write the output to another file"
    )
