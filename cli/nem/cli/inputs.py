"""Files the NEM command-line tools read and write, checked before any work.

Both `nem-opt` and `nem-run` read their program through `read_program`
(regular files or `-`, size-capped, UTF-8 with a located error: D-LIMITS).
`nem-run` reads `--input` files through `read_input` (capped by the buffer it
fills), `--profile` through `read_json`, and checks every output path
(`--output`, `--trace`, `--timeline`) with `check_output_path` before the
run starts, so that a typo does not cost a whole simulation.

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
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from nem.dialect.limits import MAX_INPUT_FILE_BYTES

if TYPE_CHECKING:
    import numpy as np


class InputError(Exception):
    """A file named on the command line that cannot be used."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"{flag}: {message}" if flag else message)
        self.flag = flag


def print_diagnostics(tool: str, diagnostics) -> None:
    """Print diagnostics to stderr; one without a source location is about the
    command line (a file it names, a --device), so it is prefixed with the
    tool's name like the tool's other command-line errors."""
    for d in diagnostics:
        text = d.render()
        print(text if d.loc is not None else f"{tool}: {text}", file=sys.stderr)


def read_program(path: str | None, what: str = "program") -> tuple[str, str]:
    """(display name, text) of the program `path` (`-` or None: standard input)."""
    if path is None or path == "-":
        from nem.dialect.source_files import read_source_stream

        return "<stdin>", read_source_stream(sys.stdin.buffer, "<stdin>", what)
    from nem.dialect.source_files import read_source

    return path, read_source(path, what)


def _regular_file(path: str, flag: str) -> int:
    """The size of the regular file `path` (devices, FIFOs, directories refused)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise InputError(flag, f"cannot read '{path}': {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise InputError(flag, f"cannot read '{path}': it is {kind}")
    return st.st_size


def read_input(path: str, flag: str, limit: int, name: str = "the buffer") -> np.ndarray:
    """The bytes (raw file) or array (`.npy`) of an input file for buffer or
    region `name` of `limit` bytes.  A raw file must have exactly `limit` bytes; a `.npy`
    holding a 0-d array gives a 1-element array; `.npz` archives, pickled
    objects and empty or truncated `.npy` files are refused."""
    size = _regular_file(path, flag)
    cap = min(limit, MAX_INPUT_FILE_BYTES)
    if path.endswith(".npz"):
        raise InputError(flag, f"'{path}' is a .npz archive; give one array as .npy "
                         "(numpy.save) or the raw bytes")
    if not path.endswith(".npy"):
        if size != limit or size > cap:
            raise InputError(flag, f"'{path}' has {size} bytes but {name} has {limit}: "
                             f"a raw input fills all of {name}")
        import numpy as np

        return np.frombuffer(Path(path).read_bytes(), np.uint8)
    if size > cap + 65536:  # a .npy header is at most a few KB
        raise InputError(flag, f"'{path}' has {size} bytes, more than the {limit} bytes "
                         f"of {name}")
    return load_npy(path, flag)


NPY_MAGIC = b"\x93NUMPY"


def load_npy(path: str, flag: str) -> np.ndarray:
    """The array of a `.npy` file (a 0-d array as 1 element); an archive, a
    file without NumPy's header (numpy's own message for one is about
    pickles), pickled objects, empty or truncated files are InputErrors."""
    import numpy as np

    _regular_file(path, flag)
    if zipfile.is_zipfile(path):
        raise InputError(flag, f"'{path}' is a .npz archive; save one array with numpy.save")
    with open(path, "rb") as f:
        if f.read(len(NPY_MAGIC)) != NPY_MAGIC:
            raise InputError(flag, f"'{path}' is not a .npy file (no NumPy header): save the "
                             "array with numpy.save, or give raw bytes in a file whose name "
                             "does not end in .npy")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, OSError) as e:
        raise InputError(flag, f"'{path}' is not a readable .npy file: {e}") from None
    if not isinstance(arr, np.ndarray):
        raise InputError(flag, f"'{path}' does not hold a single array")
    return np.atleast_1d(arr)


def read_archive(path: str, flag: str, buffer_size) -> dict[str, np.ndarray]:
    """The arrays of a `.npz` archive, each for the buffer of its name:
    `buffer_size(name)` gives that buffer's size (KeyError for an unknown
    one).  Every member's uncompressed size is checked against its buffer
    before anything is decompressed, so a small archive cannot expand into
    gigabytes."""
    import numpy as np

    _regular_file(path, flag)
    if not zipfile.is_zipfile(path):
        raise InputError(flag, f"'{path}' is not a .npz archive")
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                name = info.filename.removesuffix(".npy")
                try:
                    size = buffer_size(name)
                except KeyError as e:
                    raise InputError(flag, e.args[0]) from None
                if info.file_size > min(size, MAX_INPUT_FILE_BYTES) + 65536:
                    raise InputError(flag, f"array '{name}' has {info.file_size} bytes, more "
                                     f"than the {size} bytes of its buffer")
        with np.load(path, allow_pickle=False) as npz:
            return {name: np.atleast_1d(npz[name]) for name in npz.files}
    except (ValueError, EOFError, OSError, zipfile.BadZipFile) as e:
        raise InputError(flag, f"'{path}' is not a readable .npz archive: {e}") from None


def read_json(path: str, flag: str) -> object:
    """A small JSON document (a cost profile)."""
    size = _regular_file(path, flag)
    if size > 2**20:
        raise InputError(flag, f"'{path}' has {size} bytes; a profile is a small JSON object")
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(flag, f"'{path}' is not valid JSON: {e}") from None


def check_output_path(path: str, flag: str) -> None:
    """Refuse, before any work, an output path that cannot be written: a
    missing directory, a directory, an unwritable place, or an existing
    non-regular file other than the null device (e.g. /dev/full)."""
    p = Path(path)
    if path == "" or path.endswith(("/", os.sep)):
        raise InputError(flag, f"'{path}' names a directory, not a file")
    if p.exists() or p.is_symlink():
        try:
            st = os.stat(path)
        except OSError as e:
            raise InputError(flag, f"cannot write '{path}': {e.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            raise InputError(flag, f"'{path}' is a directory, not a file")
        if not stat.S_ISREG(st.st_mode) and os.path.realpath(path) != os.devnull:
            raise InputError(flag, f"'{path}' is not a regular file")
        if not os.access(path, os.W_OK):
            raise InputError(flag, f"cannot write '{path}': permission denied")
        return
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(flag, f"cannot write '{path}': directory '{parent}' does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(flag, f"cannot write '{path}': directory '{parent}' is not writable")


__all__ = ["InputError", "print_diagnostics", "read_program", "read_input", "read_archive",
           "read_json", "check_output_path"]
