"""The ONNX node an op was built for, read back from its MLIR location
(D-COMPILE-LOC).

Every op the importer builds for ONNX node N carries

    loc("<node name>"("<op type>"("<model file>":<line>:1)))

(a NameLoc of the node's name around a NameLoc of its op type around a
FileLineColLoc; line = the node's 1-based position in the user's model, 0
for a node the graph simplifier made without a user's node to stand for).
Upstream's passes keep it through bufferization, tiling
(`convert-linalg-to-affine-loops`, `affine-loop-tile`, copy generation,
the transform route's `tile_using_for` and `promote`) onto the loops,
loads, stores, DMAs and allocations they make from the op; constants that
`canonicalize` hoists and merges become `loc(unknown)`.

To see them in text, print with
`op.get_asm(enable_debug_info=True, use_local_scope=True)` (inline
locations, no `#loc` aliases).  xDSL 0.74 then parses the locations into
`op.location` (`NameLoc`), except the one MLIR prints on an `affine.for`'s
induction variable (`affine.for %i loc(...) = 0 to 4`), which it refuses:
`without_induction_locs` removes those (an induction variable's location
says nothing the loop's does not).  `node_of(str(location))` gives the
node.
"""

from __future__ import annotations

import re

from nem.dialect.diagnostics import NODE_LOC, located_nodes
from nem.frontends.onnx.diagnostics import NodeRef, node_text
from nem.frontends.upstream_dialects.mlir_input import closing

_INDUCTION_LOC = re.compile(r"(affine\.for %[\w$.-]+) loc\(.*?\) =")


def node_of(location: str) -> tuple[str, NodeRef] | None:
    """(model file, (index or None, name, op type)) of the first ONNX node
    named in a location's text, or None."""
    found = located_nodes(location)
    if not found:
        return None
    name, op_type, file, line = found[0]
    return file, (line - 1 if line > 0 else None, name, op_type)


def describe(location: str) -> str | None:
    """`model.onnx: node 3 'conv1' (Conv)`, as the importer's diagnostics
    name a node, for a location holding one; else None."""
    found = node_of(location)
    return node_text(*found) if found is not None else None


def without_induction_locs(text: str) -> str:
    """`text` (printed with debug info) without the locations of affine.for
    induction variables, which xDSL 0.74 does not parse."""
    return _INDUCTION_LOC.sub(r"\1 =", text)


_HEADLINE = re.compile(
    r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|remark): ", re.MULTILINE
)


def name_nodes(
    message: str,
    tile_file: str,
    plain: str,
    debug: str,
    source: str | None = None,
    model: str | None = None,
) -> str:
    """`message` (rendered diagnostics of the lower stage, located in
    `tile_file`, the tile stage's text `plain`, which is written only with
    --save-temps) with each diagnostic led by the ONNX node(s) of the op it
    is located at, and its tiled-program position kept as a note:

        m.onnx: node 0 'e' (Expand): error: lowered NEM program fails ...
        m.tile.mlir:11:5: note: in the tiled program (nem-compile --save-temps writes it)

    `debug` is the same module printed with its locations
    (`get_asm(enable_debug_info=True, use_local_scope=True)`): the op's own
    locations are read there (D-COMPILE-LOC).  `source`: the user's `.mlir`
    file, which upstream's parse of its text names "-": an op located there
    leads the diagnostic at that line and column, the line quoted
    (D-COMPILE-MLIR-LOC).  A diagnostic whose op has neither is led by
    `model` (the ONNX file: a function's remark), as is one about the whole
    tiled program (`TILE_FILE: remark: ...`), or left as it is without one.  Errors, warnings and remarks alike (issue 34: every location
    printed names a file that exists or an ONNX node)."""
    from nem.dialect.diagnostics import Diagnostic, SourceLoc

    finder = _OpLocations(plain, debug)
    out = []
    for line in message.split("\n"):
        if model is not None and line.startswith(f"{tile_file}: "):  # the whole program's
            out.append(model + line[len(tile_file) :])
            continue
        m = _HEADLINE.match(line)
        nodes, places = (
            finder.origins(int(m["line"]), int(m["col"]))
            if m is not None and m["file"] == tile_file
            else ([], [])
        )
        if m is None or m["file"] != tile_file or not (nodes or (places and source) or model):
            out.append(line)
            continue
        if nodes or not (places and source):
            head = " and ".join(nodes) if nodes else model
            out.append(f"{head}: {m['sev']}: {line[m.end() :]}")
        else:
            assert source is not None
            at = SourceLoc(source, *places[0])
            out.append(Diagnostic(m["sev"], line[m.end() :], at).render())
        out.append(
            f"{m['file']}:{m['line']}:{m['col']}: note: in the tiled program "
            "(nem-compile --save-temps writes it)"
        )
    return "\n".join(out)


_PARSED_LOC = re.compile(r'"-":(\d+):(\d+)')
"""A position in text upstream parsed (`ir.Module.parse` names it "-")."""


class _OpLocations:
    """The ONNX nodes of the op that starts at a line and column of the
    plain text, read from the text printed with locations: both print the
    same ops on the same lines, after the attribute aliases (`#map = ...`)
    that only the plain text has."""

    def __init__(self, plain: str, debug: str):
        self.debug = debug.split("\n")
        self.shift = _first_op_line(self.debug) - _first_op_line(plain.split("\n"))

    def origins(self, line: int, col: int) -> tuple[list[str], list[tuple[int, int]]]:
        """`describe` of each node in the op's own locations (not its
        regions'), in order, without repeats; and the (line, col) of each
        position in parsed text there."""
        found: list[str] = []
        places: list[tuple[int, int]] = []
        for loc in self.own(line, col):
            for m in NODE_LOC.finditer(loc):
                text = describe(m[0])
                if text is not None and text not in found:
                    found.append(text)
            places += [(int(p[1]), int(p[2])) for p in _PARSED_LOC.finditer(loc)]
        return found, places

    def own(self, line: int, col: int) -> list[str]:
        """The `loc(...)` texts of the op at (line, col) of the plain text."""
        return self.scan(line, col)[0]

    def scan(self, line: int, col: int) -> tuple[list[str], list[str]]:
        """`_op_locations` of the op at (line, col) of the plain text."""
        start = line - 1 + self.shift
        if not 0 <= start < len(self.debug):
            return [], []
        return _op_locations(self.debug, start, col - 1)

    def node(self, line: int, col: int) -> str | None:
        """The origin of the op at (line, col) (D-BC-NODES): `loc(NODE)`
        for the first ONNX node in its own locations, `loc(fused[NODE,
        FUSED...])` when its body's ops are located at other nodes (a
        Sigmoid's math in the generic of the Mul it was fused into, a Relu's
        in the convolution's tile, D-COMPILE-FUSE-L1: the nodes whose work
        it does); None without a node."""
        own, body = self.scan(line, col)
        nodes = list(dict.fromkeys(m[0] for loc in own for m in NODE_LOC.finditer(loc)))
        if not nodes:
            return None
        fused = dict.fromkeys(m[0] for loc in body for m in NODE_LOC.finditer(loc))
        nodes += [n for n in fused if n not in nodes]
        return (
            f"loc({nodes[0]})"
            if len(nodes) == 1
            else f"loc(fused[{nodes[0]}, {', '.join(nodes[1:])}])"
        )


def statement_nodes(
    plain: str, debug: str, positions: list[tuple[int, int] | None]
) -> list[str | None]:
    """The ONNX node (`loc("conv1"("Conv"("m.onnx":3:1)))`) of the op at
    each (line, col) of `plain`, read in `debug`, the same module printed
    with its locations (D-BC-NODES); each position's op is scanned once."""
    finder = _OpLocations(plain, debug)
    seen: dict[tuple[int, int], str | None] = {}
    out: list[str | None] = []
    for at in positions:
        if at is not None and at not in seen:
            seen[at] = finder.node(*at)
        out.append(seen[at] if at is not None else None)
    return out


def with_fused(origins: list[str | None], fused: dict[str, list[NodeRef]]) -> list[str | None]:
    """`origins` (`statement_nodes`) with the user's nodes that preparing
    the model folded into a node named there (`ImportedModel.fused`: a
    BatchNormalization in its Conv, a GELU's parts) added to its
    `fused[...]`, so the report says where their work went (D-BC-NODES);
    each distinct origin is rewritten once."""
    done: dict[str, str] = {}

    def fuse(origin: str) -> str:
        found = located_nodes(origin)
        named = {name for name, *_ in found}
        extra = dict.fromkeys(
            f"{_quoted(n)}({_quoted(op)}({_quoted(file)}:{k + 1 if k is not None else 0}:1))"
            for name, _op, file, _line in found
            for k, n, op in fused.get(name, ())
            if n not in named
        )
        if not extra:
            return origin
        return f"loc(fused[{', '.join([m[0] for m in NODE_LOC.finditer(origin)] + list(extra))}])"

    return [
        None if o is None else done[o] if o in done else done.setdefault(o, fuse(o))
        for o in origins
    ]


def _quoted(text: str) -> str:
    """`text` as an MLIR string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _first_op_line(lines: list[str]) -> int:
    return next((i for i, ln in enumerate(lines) if ln and not ln.startswith("#")), 0)


_OWN = re.compile(r'"(?:[^"\\\n]|\\.)*"?|[{}]|loc\(')
"""What `_op_locations` looks for: string literals (skipped whole), braces
(the op's regions) and the start of a `loc(`."""


_LINALG = re.compile(r'(?:%[^=]*= )?"?linalg\.')
"""The start of a linalg op (`linalg.generic`, `%r = linalg.map`, generic form)."""


def _op_locations(lines: list[str], line: int, col: int) -> tuple[list[str], list[str]]:
    """The texts of the `loc(...)`s of the op that starts at (line, col)
    outside its regions (its trailing location, an affine.for induction
    variable's), scanning to the end of its last line; and, for a linalg op
    whose body holds no op with regions, those of its body's ops (its scalar
    math, not its block arguments, which take their producers' locations;
    [] for any other op: a loop's body is other statements)."""
    locs: list[str] = []
    inner: list[str] = []
    depth = deepest = 0
    for k in range(line, len(lines)):
        text = lines[k]
        m = _OWN.search(text, col if k == line else 0)
        while m is not None:
            pos, c = m.end(), m.group()
            if c == "{":
                depth += 1
                deepest = max(deepest, depth)
            elif c == "}":
                depth -= 1
            elif c == "loc(":
                pos = closing(text, pos - 1, "(") or len(text)
                if depth == 0:
                    locs.append(text[m.start() : pos])
                elif not text.lstrip().startswith("^"):  # not a block argument's
                    inner.append(text[m.start() : pos])
            m = _OWN.search(text, pos)
        if depth <= 0:
            break
    return locs, inner if deepest == 1 and _LINALG.match(lines[line], col) else []
