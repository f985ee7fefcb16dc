"""The debug section of a `.nemb` (docs/bytecode.md): one source location
per op, and the origin (an ONNX node's or MLIR location) fused onto it where
the file records one (format 1.2, D-BC-NODES).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, LocationAttr, StringAttr

from nem.dialect.diagnostics import fuse_origin
from nem.frontends.bytecode import nem_bytecode_generated as fb
from nem.frontends.bytecode.container import BytecodeError, decode_varints
from nem.frontends.bytecode.tables import TableReader


def _location(text: str, at: int) -> LocationAttr:
    from nem.frontends.upstream_dialects.mlir_input import parse_location

    loc = parse_location(text)
    if loc is None:
        raise BytecodeError(at, f"origin {text!r} is not an MLIR location")
    return loc


# Source locations (one per op) are made as `FileLineColLoc(file, line, col)`
# without xDSL's parameter verification, which only checks the parameter
# types given by construction (a StringAttr and two IntAttrs) and cost most
# of the time spent on debug locations: the frozen dataclass's fields are
# set as ParametrizedAttribute.new sets them.
_NEW_LOC = FileLineColLoc.__new__
_SET = object.__setattr__
assert [f for f, _ in FileLineColLoc.get_irdl_definition().parameters] == [
    "filename",
    "line",
    "column",
], "xDSL changed FileLineColLoc's parameters"


def read_locs(r: TableReader, debug: fb.Debug, count: int) -> list[LocationAttr | None]:
    """The source location of each of the `count` ops (docs/bytecode.md,
    the debug section): a zigzag line delta, a file index when it changes and
    a column per op; None where the file index is 0 (no location).  The
    empty file name is the file being read, `r.file` (`WriteOptions.self_file`)."""
    stream = debug.LocsAsNumpy() if debug.LocsLength() else np.zeros(0, np.uint8)
    base = r._vec_pos(debug, 4)
    vals, offs = decode_varints(stream, base)
    locs: list[LocationAttr | None] = []
    append = locs.append
    ints: dict[int, IntAttr] = {}
    files: dict[int, StringAttr] = {}
    i, line, f = 0, 0, 0
    try:
        for _ in range(count):
            h = vals[i]
            i += 1
            d = h >> 1
            line += (d >> 1) if not d & 1 else -((d + 1) >> 1)  # unzigzag, inline
            if h & 1:
                f = vals[i]
                i += 1
                if f and f not in files:
                    files[f] = StringAttr(r.string(f, offs[i - 1], "source file") or r.file)
            col = vals[i]
            i += 1
            if f == 0:
                append(None)
                continue
            if line < 1 or col < 1:
                raise BytecodeError(offs[i - 1], f"source location line {line} column {col}")
            li = ints.get(line)
            if li is None:
                li = ints[line] = IntAttr(line)
            ci = ints.get(col)
            if ci is None:
                ci = ints[col] = IntAttr(col)
            loc = _NEW_LOC(FileLineColLoc)
            _SET(loc, "filename", files[f])
            _SET(loc, "line", li)
            _SET(loc, "column", ci)
            append(loc)
    except IndexError:
        raise BytecodeError(
            base + stream.size, f"debug section has {len(locs)} locations, the code {count}"
        ) from None
    if i != len(vals):
        raise BytecodeError(offs[i], "debug section has more locations than instructions")
    if debug.NodesLength():
        _with_origins(r, debug, locs)
    return locs


def _with_origins(r: TableReader, debug: fb.Debug, locs: list[LocationAttr | None]) -> None:
    """Each location of `locs` with an origin in `Debug.nodes` (format
    1.2, D-BC-NODES) becomes `fused[FILE:LINE:COL, ORIGIN]`, ORIGIN parsed
    once per distinct string."""
    base = r._vec_pos(debug, 6)
    vals, offs = decode_varints(debug.NodesAsNumpy(), base)
    if len(vals) != len(locs):
        raise BytecodeError(
            base, f"debug section has {len(vals)} origins for {len(locs)} locations"
        )
    parsed: dict[int, LocationAttr] = {}
    for k, idx in enumerate(vals):
        if not idx:
            continue
        origin = parsed.get(idx)
        if origin is None:
            origin = parsed[idx] = _location(r.string(idx, offs[k], "origin"), offs[k])
        locs[k] = fuse_origin(locs[k], origin)
