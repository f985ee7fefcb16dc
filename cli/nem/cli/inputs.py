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

import functools
import json
import os
import stat
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from nem.cli.common import is_stdio
from nem.dialect.limits import MAX_INPUT_FILE_BYTES

if TYPE_CHECKING:
    import numpy as np



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
        return (f"'{path}' has {size} bytes, above the limit of {MAX_INPUT_FILE_BYTES} bytes "
                "for an input file (D-LIMITS)")
    return None


HeaderCheck = Callable[[tuple[int, ...], "np.dtype"], None]
"""Raises (KeyError, ValueError) what writing an array of this shape and
dtype into its target would raise (`NemInterpreter.check_tensor`)."""


def _check_header(check: HeaderCheck | None, shape: tuple[int, ...], dtype: np.dtype,
                  flag: str, prefix: str = "") -> None:
    if check is None:
        return
    try:
        check(shape or (1,), dtype)   # a 0-d array is read as 1 element
    except (KeyError, ValueError) as e:
        raise InputError(flag, f"{prefix}{e.args[0] if isinstance(e, KeyError) else e} (the "
                         f"file's header declares {dtype}, shape {list(shape)})") from None


def read_input(path: str, flag: str, limit: int, name: str = "the buffer",
               check: HeaderCheck | None = None) -> np.ndarray:
    """The bytes (raw file) or array (`.npy`) of an input file for buffer or
    region `name` of `limit` bytes.  A raw file must have exactly `limit` bytes; a `.npy`
    holding a 0-d array gives a 1-element array; `.npz` archives, pickled
    objects and empty or truncated `.npy` files are refused.  Sizes are
    checked before anything is read: the file's, and a `.npy` header's
    shape and dtype against the target (`check`) and `limit` (D-LIMITS)."""
    size = _regular_file(path, flag)
    if path.endswith(".npz"):
        raise InputError(flag, f"'{path}' is a .npz archive; give one array as .npy "
                         "(numpy.save) or the raw bytes")
    if not path.endswith(".npy"):
        if size != limit:
            raise InputError(flag, f"'{path}' has {size} bytes but {name} has {limit}: "
                             f"a raw input fills all of {name}")
        if why := _too_big(path, size):
            raise InputError(flag, why)
        import numpy as np

        with open(path, "rb") as f:
            return np.frombuffer(f.read(limit), np.uint8)
    return load_npy(path, flag, limit, name, check)


NPY_MAGIC = b"\x93NUMPY"
NPY_MAX_HEADER = 65536
"""Largest `.npy` header read (numpy writes a few hundred bytes; its own
reader refuses more than 10,000 unless told otherwise)."""


def npy_header(f: IO[bytes], where: str, flag: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of the `.npy` stream `f`, positioned at its start; the
    header is parsed, never the data (`where` names the file, or the file and
    the archive member, in errors)."""
    import numpy as np
    from numpy.lib import format as npy_format

    if f.read(len(NPY_MAGIC)) != NPY_MAGIC:
        raise InputError(flag, f"{where} is not a .npy file (no NumPy header): save the "
                         "array with numpy.save, or give raw bytes in a file whose name "
                         "does not end in .npy")
    import io
    import struct

    version = tuple(f.read(2))
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise InputError(flag, f"{where} is not a readable .npy file: unknown format version "
                         f"{version} at byte offset 6")
    width = 2 if version == (1, 0) else 4
    raw_len = f.read(width)
    if len(raw_len) < width:
        raise InputError(flag, f"{where} is truncated in its header (byte offset 8)")
    length = struct.unpack("<H" if width == 2 else "<I", raw_len)[0]
    if length > NPY_MAX_HEADER:
        raise InputError(flag, f"{where} declares a header of {length} bytes at byte offset 8, "
                         f"more than {NPY_MAX_HEADER}: not a file numpy.save wrote")
    header = f.read(length)
    try:
        # numpy parses the header it has been given whole: it can no longer
        # be asked to read gigabytes
        copy = io.BytesIO(raw_len + header)
        read = npy_format.read_array_header_1_0 if width == 2 else \
            npy_format.read_array_header_2_0
        shape, fortran, dtype = read(copy, max_header_size=NPY_MAX_HEADER)
    except Exception as e:  # noqa: BLE001 - numpy's parser of untrusted text (ast,
        # tokenize, dtype construction) raises ValueError, SyntaxError, TokenError, ...
        raise InputError(flag, f"{where} is not a readable .npy file: "
                         f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    if dtype.hasobject:
        raise InputError(flag, f"{where} holds Python objects (a pickled array): save an "
                         "array of numbers")
    return tuple(shape), np.dtype(dtype)


def check_npy_size(shape: tuple[int, ...], dtype: np.dtype, where: str, flag: str,
                   limit: int, name: str) -> int:
    """The data bytes of an array of `shape` and `dtype`, refused when they
    exceed `limit`, the bytes of `name` (computed on Python ints: a header
    declaring (2^40, 2^40) cannot overflow)."""
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if nbytes > limit or nbytes > MAX_INPUT_FILE_BYTES:
        raise InputError(flag, f"{where} declares a {dtype} array of shape {list(shape)} "
                         f"({nbytes} bytes), more than the {limit} bytes of {name}")
    return nbytes


def load_npy(path: str, flag: str, limit: int, name: str = "the buffer",
             check: HeaderCheck | None = None) -> np.ndarray:
    """The array of a `.npy` file for `name` of `limit` bytes (a 0-d array
    as 1 element); an archive, a file without NumPy's header (numpy's own
    message for one is about pickles), pickled objects, a header that
    `check` refuses or declaring more than `limit` bytes, empty or truncated
    files are InputErrors, found before the data is read."""
    import numpy as np

    size = _regular_file(path, flag)
    if zipfile.is_zipfile(path):
        raise InputError(flag, f"'{path}' is a .npz archive; save one array with numpy.save")
    with open(path, "rb") as f:
        shape, dtype = npy_header(f, f"'{path}'", flag)
        _check_header(check, shape, dtype, flag)
        nbytes = check_npy_size(shape, dtype, f"'{path}'", flag, limit, name)
        if size - f.tell() < nbytes:
            raise InputError(flag, f"'{path}' is truncated: its header declares {nbytes} "
                             f"bytes of data, the file has {size - f.tell()} after the header "
                             f"(at byte offset {f.tell()})")
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, OSError) as e:
        raise InputError(flag, f"'{path}' is not a readable .npy file: {e}") from None
    if not isinstance(arr, np.ndarray):
        raise InputError(flag, f"'{path}' does not hold a single array")
    return np.atleast_1d(arr)


def read_archive(path: str, flag: str, buffer_size: Callable[[str], int],
                 check: Callable[[str, tuple[int, ...], np.dtype], None] | None = None
                 ) -> dict[str, np.ndarray]:
    """The arrays of a `.npz` archive, each for the buffer of its name:
    `buffer_size(name)` gives that buffer's size (KeyError for an unknown
    one), `check(name, shape, dtype)` refuses what its buffer cannot take.  Every member's declared uncompressed size and its `.npy` header
    (shape, dtype) are checked against its buffer before its data is
    decompressed, so a small archive cannot expand into gigabytes."""
    import numpy as np

    _regular_file(path, flag)
    if not zipfile.is_zipfile(path):
        raise InputError(flag, f"'{path}' is not a .npz archive")
    out = {}
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            for info in infos:
                name = info.filename.removesuffix(".npy")
                try:
                    size = buffer_size(name)
                except KeyError as e:
                    raise InputError(flag, e.args[0]) from None
                where = f"'{path}' member '{info.filename}'"
                if info.file_size > min(size, MAX_INPUT_FILE_BYTES) + NPY_MAX_HEADER:
                    raise InputError(flag, f"{where} has {info.file_size} bytes, more "
                                     f"than the {size} bytes of buffer '{name}'")
                with z.open(info) as f:
                    shape, dtype = npy_header(f, where, flag)
                if check is not None:
                    _check_header(functools.partial(check, name), shape, dtype, flag,
                                  f"member '{info.filename}': ")
                check_npy_size(shape, dtype, where, flag, size, f"buffer '{name}'")
            with np.load(path, allow_pickle=False) as npz:
                for info in infos:
                    name = info.filename.removesuffix(".npy")
                    out[name] = np.atleast_1d(npz[name])
    except (ValueError, EOFError, OSError, zipfile.BadZipFile, NotImplementedError) as e:
        raise InputError(flag, f"'{path}' is not a readable .npz archive: {e}") from None
    return out


def read_json(path: str, flag: str) -> object:
    """A small JSON document (a cost profile)."""
    size = _regular_file(path, flag)
    if size > 2**20:
        raise InputError(flag, f"'{path}' has {size} bytes; a profile is a small JSON object")
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(flag, f"'{path}' is not valid JSON: {e}") from None


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
        for given in inputs:
            if given and not is_stdio(given) and stat.S_ISREG(st.st_mode) and \
                    same_file(path, given):
                also = "" if given == path else f" ('{given}')"
                raise InputError(flag, f"'{path}' is an input of this command{also}: writing "
                                 "it would destroy it; write the output to another file")
        if not os.access(path, os.W_OK):
            raise InputError(flag, f"cannot write '{path}': permission denied")
        return
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(flag, f"cannot write '{path}': directory '{parent}' does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(flag, f"cannot write '{path}': directory '{parent}' is not writable")


__all__ = ["InputError", "read_program", "read_input", "read_archive",
           "read_json", "check_output_path", "same_file", "load_npy", "npy_header"]
