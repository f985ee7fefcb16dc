"""Reading NumPy array files (`.npy`, `.npz`) that a user names: the one
safe reader for every tool that takes arrays (`nem-run --input`, `nem-opt
--embed`, `nem-compile --bisect --input`, `python -m nem.compile.check`).

The files are untrusted (D-FILE-PATHS, D-LIMITS): only regular files
(`source_files.regular_file`), and nothing is allocated or decompressed for
what a header merely declares.  A `.npy` header's shape and dtype, and a
`.npz` member's declared size and header, are checked against the target
(the bytes of the buffer it fills, a caller's `HeaderCheck`) before the
data is read; pickled objects are refused.

Problems are `ArrayFileRefused` (a `FileRefused`) whose message names the
file (and archive member) and, where it helps, the byte offset; callers
prefix their own context (the command-line flag, the tool).
"""

from __future__ import annotations

import functools
import io
import struct
import zipfile
from collections.abc import Callable
from typing import IO

import numpy as np

from nem.dialect.limits import MAX_INPUT_FILE_BYTES
from nem.dialect.source_files import FileRefused, regular_file


class ArrayFileRefused(FileRefused):
    """An array file that cannot be used: not a `.npy`/`.npz` file numpy
    wrote, pickled objects, truncated, or declaring more than its target
    holds."""


HeaderCheck = Callable[[tuple[int, ...], np.dtype], None]
"""Raises (KeyError, ValueError) what writing an array of this shape and
dtype into its target would raise (`NemInterpreter.check_tensor`)."""

NPY_MAGIC = b"\x93NUMPY"
NPY_MAX_HEADER = 65536
"""Largest `.npy` header read (numpy writes a few hundred bytes; its own
reader refuses more than 10,000 unless told otherwise)."""


def _size(path: str) -> int:
    return regular_file(path, "").st_size


def npy_header(f: IO[bytes], where: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of the `.npy` stream `f`, positioned at its start; the
    header is parsed, never the data (`where` names the file, or the file and
    the archive member, in errors)."""
    from numpy.lib import format as npy_format

    if f.read(len(NPY_MAGIC)) != NPY_MAGIC:
        raise ArrayFileRefused(
            f"{where} is not a .npy file (no NumPy header): save the "
            "array with numpy.save, or give raw bytes in a file whose "
            "name does not end in .npy"
        )
    version = tuple(f.read(2))
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise ArrayFileRefused(
            f"{where} is not a readable .npy file: unknown format "
            f"version {version} at byte offset 6"
        )
    width = 2 if version == (1, 0) else 4
    raw_len = f.read(width)
    if len(raw_len) < width:
        raise ArrayFileRefused(f"{where} is truncated in its header (byte offset 8)")
    length = struct.unpack("<H" if width == 2 else "<I", raw_len)[0]
    if length > NPY_MAX_HEADER:
        raise ArrayFileRefused(
            f"{where} declares a header of {length} bytes at byte offset "
            f"8, more than {NPY_MAX_HEADER}: not a file numpy.save wrote"
        )
    header = f.read(length)
    try:
        # numpy parses the header it has been given whole: it can no longer
        # be asked to read gigabytes
        copy = io.BytesIO(raw_len + header)
        read = npy_format.read_array_header_1_0 if width == 2 else npy_format.read_array_header_2_0
        shape, _fortran, dtype = read(copy, max_header_size=NPY_MAX_HEADER)
    except Exception as e:  # noqa: BLE001 - numpy's parser of untrusted text (ast,
        # tokenize, dtype construction) raises ValueError, SyntaxError, TokenError, ...
        raise ArrayFileRefused(
            f"{where} is not a readable .npy file: "
            f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from None
    if dtype.hasobject:
        raise ArrayFileRefused(
            f"{where} holds Python objects (a pickled array): save an array of numbers"
        )
    return tuple(shape), np.dtype(dtype)


def check_npy_size(
    shape: tuple[int, ...], dtype: np.dtype, where: str, limit: int, name: str
) -> int:
    """The data bytes of an array of `shape` and `dtype`, refused when they
    exceed `limit`, the bytes of `name` (computed on Python ints: a header
    declaring (2^40, 2^40) cannot overflow)."""
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if nbytes > limit or nbytes > MAX_INPUT_FILE_BYTES:
        raise ArrayFileRefused(
            f"{where} declares a {dtype} array of shape {list(shape)} "
            f"({nbytes} bytes), more than the {limit} bytes of {name}"
        )
    return nbytes


def _check_header(
    check: HeaderCheck | None, shape: tuple[int, ...], dtype: np.dtype, prefix: str = ""
) -> None:
    if check is None:
        return
    try:
        check(shape or (1,), dtype)  # a 0-d array is read as 1 element
    except (KeyError, ValueError) as e:
        raise ArrayFileRefused(
            f"{prefix}{e.args[0] if isinstance(e, KeyError) else e} "
            f"(the file's header declares {dtype}, shape {list(shape)})"
        ) from None


def load_npy(
    path: str,
    limit: int = MAX_INPUT_FILE_BYTES,
    name: str = "the buffer",
    check: HeaderCheck | None = None,
) -> np.ndarray:
    """The array of a `.npy` file for `name` of `limit` bytes (as saved: a
    0-d array stays 0-d); an archive, a file without NumPy's header (numpy's
    own message for one is about pickles), pickled objects, a header that
    `check` refuses or declaring more than `limit` bytes, empty or truncated
    files, and bytes after the declared data (an outside tester's appended
    junk was read silently, session 66) are refused before the data is read."""
    size = _size(path)
    if zipfile.is_zipfile(path):
        raise ArrayFileRefused(f"'{path}' is a .npz archive; save one array with numpy.save")
    with open(path, "rb") as f:
        shape, dtype = npy_header(f, f"'{path}'")
        _check_header(check, shape, dtype)
        nbytes = check_npy_size(shape, dtype, f"'{path}'", limit, name)
        if size - f.tell() < nbytes:
            raise ArrayFileRefused(
                f"'{path}' is truncated: its header declares {nbytes} "
                f"bytes of data, the file has {size - f.tell()} after the "
                f"header (at byte offset {f.tell()})"
            )
        if size - f.tell() > nbytes:  # (numpy reads the declared bytes and ignores the rest)
            raise ArrayFileRefused(
                f"'{path}' has {size - f.tell() - nbytes} bytes after its data (at byte "
                f"offset {f.tell() + nbytes}): its header declares {nbytes} bytes of data; "
                "a file numpy.save wrote ends there (an appended or corrupted file?)"
            )
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, OSError) as e:
        raise ArrayFileRefused(f"'{path}' is not a readable .npy file: {e}") from None
    if not isinstance(arr, np.ndarray):
        raise ArrayFileRefused(f"'{path}' does not hold a single array")
    return arr


def read_archive(
    path: str,
    buffer_size: Callable[[str], int],
    check: Callable[[str, tuple[int, ...], np.dtype], None] | None = None,
) -> dict[str, np.ndarray]:
    """The arrays of a `.npz` archive, each for the buffer of its name (a
    0-d member as 1 element): `buffer_size(name)` gives that buffer's size
    (KeyError, its message the reason, for an unknown one), `check(name,
    shape, dtype)` refuses what its buffer cannot take.  Every member's
    declared uncompressed size and its `.npy` header are checked against its
    buffer before its data is decompressed, so a small archive cannot expand
    into gigabytes."""
    _size(path)
    if not zipfile.is_zipfile(path):
        raise ArrayFileRefused(f"'{path}' is not a .npz archive")
    out = {}
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            for info in infos:
                name = info.filename.removesuffix(".npy")
                try:
                    size = buffer_size(name)
                except KeyError as e:
                    raise ArrayFileRefused(e.args[0]) from None
                where = f"'{path}' member '{info.filename}'"
                if info.file_size > min(size, MAX_INPUT_FILE_BYTES) + NPY_MAX_HEADER:
                    raise ArrayFileRefused(
                        f"{where} has {info.file_size} bytes, more "
                        f"than the {size} bytes of buffer '{name}'"
                    )
                with z.open(info) as f:
                    shape, dtype = npy_header(f, where)
                if check is not None:
                    _check_header(
                        functools.partial(check, name), shape, dtype, f"member '{info.filename}': "
                    )
                check_npy_size(shape, dtype, where, size, f"buffer '{name}'")
            with np.load(path, allow_pickle=False) as npz:
                for info in infos:
                    name = info.filename.removesuffix(".npy")
                    out[name] = np.atleast_1d(npz[name])
    except (ValueError, EOFError, OSError, zipfile.BadZipFile, NotImplementedError) as e:
        raise ArrayFileRefused(f"'{path}' is not a readable .npz archive: {e}") from None
    return out


__all__ = [
    "ArrayFileRefused",
    "HeaderCheck",
    "NPY_MAX_HEADER",
    "check_npy_size",
    "load_npy",
    "npy_header",
    "read_archive",
]
