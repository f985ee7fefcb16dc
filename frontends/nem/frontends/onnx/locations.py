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

from nem.frontends.onnx.diagnostics import NodeRef, node_text

_STR = r'"((?:[^"\\]|\\.)*)"'
NODE_LOC = re.compile(_STR + r"\(" + _STR + r"\(" + _STR + r":(\d+):\d+\)\)")
"""The importer's location inside a location's text (also inside `fused[...]`)."""

_INDUCTION_LOC = re.compile(r"(affine\.for %[\w$.-]+) loc\(.*?\) =")


def node_of(location: str) -> tuple[str, NodeRef] | None:
    """(model file, (index or None, name, op type)) of the first ONNX node
    named in a location's text, or None."""
    m = NODE_LOC.search(location)
    if m is None:
        return None
    name, op_type, file, line = (_unescape(m.group(k)) for k in range(1, 5))
    index = int(line) - 1 if int(line) > 0 else None
    return file, (index, name, op_type)


def _unescape(text: str) -> str:
    return text.replace('\\"', '"').replace("\\\\", "\\")


def describe(location: str) -> str | None:
    """`model.onnx: node 3 'conv1' (Conv)`, as the importer's diagnostics
    name a node, for a location holding one; else None."""
    found = node_of(location)
    return node_text(*found) if found is not None else None


def without_induction_locs(text: str) -> str:
    """`text` (printed with debug info) without the locations of affine.for
    induction variables, which xDSL 0.74 does not parse."""
    return _INDUCTION_LOC.sub(r"\1 =", text)
