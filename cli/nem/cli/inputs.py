"""Files the NEM command-line tools read and write, checked before any work
(D-FILE-PATHS).

Every file is read through `nem.dialect.source_files` (regular files only,
a FIFO or a device refused with what it is, capped).  Both `nem-opt` and
`nem-run` read their program through `read_program` (regular files or `-`,
size-capped, UTF-8 with a located error: D-LIMITS).  `nem-run --input` and
`nem-opt --embed` read arrays through `read_input` (capped by the buffer
they fill: a `.npy` header's shape and dtype, a `.npz` member's, are
checked before any data is read or decompressed), `--profile` through
`read_json`.  Every output path (`-o`, `--output`, `--trace`, `--timeline`,
`nem-compile`'s weights and temps) is checked with `check_output_path`
before the work starts, so that a typo does not cost a whole simulation
and no output overwrites a file the same command reads.

Problems are raised as `InputError(flag, message)`; the tools print them as
`<tool>: error: <flag>: <message>`.

numpy and the source reader are imported when a file is read, not with the
module: `nem-run --version` and `--help` must not wait for them.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nem.cli.common import is_stdio
from nem.dialect.limits import MAX_INPUT_FILE_BYTES

if TYPE_CHECKING:
    import numpy as np

    from nem.dialect.array_files import HeaderCheck


class InputError(Exception):
    """A file named on the command line that cannot be used."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"{flag}: {message}" if flag else message)
        self.flag = flag


def read_program(path: str | None, what: str = "program") -> tuple[str, str]:
    """(display name, text) of the program `path` (`-` or None: standard input)."""
    if path is None or path == "-":
        from nem.dialect.source_files import read_source_stream

        return "<stdin>", read_source_stream(sys.stdin.buffer, "<stdin>", what)
    from nem.dialect.source_files import read_source

    return path, read_source(path, what)


def _regular_file(path: str, flag: str) -> int:
    """The size of the regular file `path` (devices, FIFOs, directories
    refused before they are opened: `nem.dialect.source_files.regular_file`,
    D-FILE-PATHS)."""
    from nem.dialect.source_files import FileRefused, regular_file

    try:
        return regular_file(path, "").st_size
    except FileRefused as e:
        raise InputError(flag, str(e)) from None


def _too_big(path: str, size: int) -> str | None:
    if size > MAX_INPUT_FILE_BYTES:
        return (
            f"'{path}' has {size} bytes, above the limit of {MAX_INPUT_FILE_BYTES} bytes "
            "for an input file (D-LIMITS)"
        )
    return None


def read_input(
    path: str, flag: str, limit: int, name: str = "the buffer", check: HeaderCheck | None = None
) -> np.ndarray:
    """The bytes (raw file) or array (`.npy`) of an input file for buffer or
    region `name` of `limit` bytes.  A raw file must have exactly `limit` bytes; a `.npy`
    holding a 0-d array gives a 1-element array; `.npz` archives, pickled
    objects and empty or truncated `.npy` files are refused.  Sizes are
    checked before anything is read: the file's, and a `.npy` header's
    shape and dtype against the target (`check`) and `limit` (D-LIMITS)."""
    size = _regular_file(path, flag)
    if path.endswith(".npz"):
        raise InputError(
            flag,
            f"'{path}' is a .npz archive; give one array as .npy (numpy.save) or the raw bytes",
        )
    if not path.endswith(".npy"):
        if size != limit:
            raise InputError(
                flag,
                f"'{path}' has {size} bytes but {name} has {limit}: "
                f"a raw input fills all of {name}",
            )
        if why := _too_big(path, size):
            raise InputError(flag, why)
        import numpy as np

        with open(path, "rb") as f:
            return np.frombuffer(f.read(limit), np.uint8)
    return load_npy(path, flag, limit, name, check)


def load_npy(
    path: str, flag: str, limit: int, name: str = "the buffer", check: HeaderCheck | None = None
) -> np.ndarray:
    """The array of a `.npy` file for `name` of `limit` bytes (a 0-d array
    as 1 element), read by `nem.dialect.array_files.load_npy`: what it
    refuses is an InputError of `flag`, found before the data is read."""
    import numpy as np

    from nem.dialect.array_files import load_npy as load
    from nem.dialect.source_files import FileRefused

    try:
        return np.atleast_1d(load(path, limit, name, check))
    except FileRefused as e:
        raise InputError(flag, str(e)) from None


def partial_fill(what: str, name: str, written: int, size: int) -> str | None:
    """The warning, without its tool's prefix, for an array of `written`
    bytes given to buffer or region `name` of `size` (`what`: the flag and
    its value), or None when it fills `name`.  A smaller array is allowed
    (it fills the start) but is more often a mistake (a wrong shape saved)
    than an intent.  One text for `nem-run --input` and `nem-opt --embed`
    (the latter gave none, an outside user, session 66)."""
    if written >= size:
        return None
    return (
        f"{what}: the array fills {written} of the {size} bytes of '{name}'; the other "
        f"{size - written} keep their previous contents (zeros, or the program's initial data)"
    )


def read_binding(text: str) -> tuple[str, np.ndarray]:
    """`nem-compile --bind NAME=VALUES`: the graph input's name and its
    value, a comma-separated list of numbers (`axes=0,2`, `k=3`: shaped
    as the input is declared, D-COMPILE-BIND) or a `.npy` file (`read_input`'s
    checks, at most MAX_INPUT_FILE_BYTES)."""
    import numpy as np

    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise InputError("--bind", f"expected NAME=VALUES or NAME=FILE.npy, got {text!r}")
    if value.endswith(".npy"):
        return name, load_npy(value, "--bind", MAX_INPUT_FILE_BYTES, f"input '{name}'")
    try:
        numbers = [float(v) if any(c in v for c in ".eEn") else int(v) for v in value.split(",")]
    except ValueError:
        raise InputError(
            "--bind", f"{name}: expected numbers separated by commas or a .npy file, got {value!r}"
        ) from None
    return name, np.array(numbers)


def read_archive(
    path: str,
    flag: str,
    buffer_size: Callable[[str], int],
    check: Callable[[str, tuple[int, ...], np.dtype], None] | None = None,
) -> dict[str, np.ndarray]:
    """The arrays of a `.npz` archive by buffer name, read by
    `nem.dialect.array_files.read_archive` (sizes and headers checked
    before anything is decompressed); what it refuses is an InputError of
    `flag`."""
    from nem.dialect.array_files import read_archive as read
    from nem.dialect.source_files import FileRefused

    try:
        return read(path, buffer_size, check)
    except FileRefused as e:
        raise InputError(flag, str(e)) from None


def read_json(path: str, flag: str) -> object:
    """A small JSON document (a cost profile).  Python's json parser
    recurses once per nested array or object: a megabyte of `[` (an
    outside user, session 66) ended in RecursionError, reported as an
    internal error; a profile is two levels deep, so any nesting the
    parser cannot take is refused as such."""
    size = _regular_file(path, flag)
    if size > 2**20:
        raise InputError(flag, f"'{path}' has {size} bytes; a profile is a small JSON object")
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(flag, f"'{path}' is not valid JSON: {e}") from None
    except RecursionError:
        raise InputError(
            flag,
            f"'{path}' nests arrays or objects too deeply to read; a profile is an "
            'object of units holding objects of parameters, e.g. {"DMA": {"bandwidth": 64}}',
        ) from None


def same_file(a: str, b: str) -> bool:
    """Whether paths `a` and `b` name one existing file (through symbolic or
    hard links alike: the same device and inode)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def check_output_path(path: str, flag: str, inputs: Sequence[str] = ()) -> None:
    """Refuse, before any work, an output path that cannot be written: a
    missing directory, a directory, an unwritable place, an existing
    non-regular file other than the null device (e.g. /dev/full), or a file
    the same command reads (`inputs`: the program, a model, an input array,
    through any link), which writing would destroy (D-FILE-PATHS)."""
    p = Path(path)
    if path == "":
        raise InputError(
            flag,
            "the file name is empty: give a file ('-' is standard output where the flag takes it)",
        )
    if path.endswith(("/", os.sep)):
        raise InputError(flag, f"'{path}' names a directory, not a file")
    try:  # (a name longer than the file system takes: ENAMETOOLONG, an outside user, session 63)
        present = p.exists() or p.is_symlink()
    except OSError as e:
        raise InputError(flag, f"cannot write '{path}': {e.strerror}") from None
    if present:
        try:
            st = os.stat(path)
        except OSError as e:
            raise InputError(flag, f"cannot write '{path}': {e.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            raise InputError(flag, f"'{path}' is a directory, not a file")
        if not stat.S_ISREG(st.st_mode) and os.path.realpath(path) != os.devnull:
            raise InputError(flag, f"'{path}' is not a regular file")
        for given in inputs:
            if not given or not stat.S_ISREG(st.st_mode):
                continue
            if is_stdio(given) and _stdin_is(st):
                raise InputError(
                    flag,
                    f"'{path}' is this command's standard input (read from it with '-'): "
                    "writing it would destroy it; write the output to another file",
                )
            if not is_stdio(given) and same_file(path, given):
                also = "" if given == path else f" ('{given}')"
                raise InputError(
                    flag,
                    f"'{path}' is an input of this command{also}: writing "
                    "it would destroy it; write the output to another file",
                )
        if not os.access(path, os.W_OK):
            raise InputError(flag, f"cannot write '{path}': permission denied")
        return
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(flag, f"cannot write '{path}': directory '{parent}' does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(flag, f"cannot write '{path}': directory '{parent}' is not writable")


def _stdin_is(st: os.stat_result) -> bool:
    """Whether standard input is redirected from the regular file `st`
    describes: `nem-opt - -o g.nem < g.nem` rewrote the file it read, its
    comments lost (an outside tester, session 66)."""
    try:
        fd = os.fstat(0)
    except OSError:
        return False
    return stat.S_ISREG(fd.st_mode) and (fd.st_dev, fd.st_ino) == (st.st_dev, st.st_ino)


def external_data_inputs(src: str, outputs: list[str]) -> list[str]:
    """The external-data files of the ONNX model `src`, inputs of the
    compile that `outputs` must not name (D-FILE-PATHS): a model
    whose weights were saved as `m.weights.npz` lost them to `nem-compile
    m.onnx -o m.nem`, which writes its own weights there (an outside
    tester, session 66).  The model is parsed (without its data) only where
    an output that exists is named in its bytes: a fresh compile, or a
    model that names none of them, pays nothing."""
    import mmap

    present = [p for p in outputs if os.path.isfile(p)]
    try:
        with open(src, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            named = any(m.find(os.path.basename(p).encode()) >= 0 for p in present)
    except (OSError, ValueError):  # (an empty file: the import reports it)
        return []
    if not named:
        return []
    from nem.frontends.onnx.validate import external_data_files

    return external_data_files(src)


def check_distinct_outputs(paths: Sequence[tuple[str, str]]) -> None:
    """Refuse two outputs of one command (`(path, flag)` pairs) that name
    the same file (spelled alike, through `..` or a link; the null device
    and `-` excepted): the later write would silently replace the earlier
    one (`nem-run --output Y=o.npy --output A=o.npy`, `--output Y=t.json
    --trace t.json` ended with exit 0 and one of the two lost, hostile10)."""
    seen: list[tuple[str, str, str]] = []
    for path, flag in paths:
        if not path or is_stdio(path) or os.path.realpath(path) == os.devnull:
            continue
        real = os.path.realpath(path)
        for other, other_flag, other_real in seen:
            if real == other_real or same_file(path, other):
                also = "" if other == path else f" ('{other}')"
                raise InputError(
                    flag,
                    f"'{path}' is also written by {other_flag}{also}: one "
                    "output would replace the other; give each its own file",
                )
        seen.append((path, flag, real))


__all__ = [
    "InputError",
    "read_program",
    "read_input",
    "read_archive",
    "read_json",
    "partial_fill",
    "check_output_path",
    "check_distinct_outputs",
    "same_file",
    "load_npy",
    "external_data_inputs",
]
