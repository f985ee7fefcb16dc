"""The ONNX importer's diagnostics (D-COMPILE-DIAG).

An error names the model file and, when it belongs to a node, the node as
the user's file has it: its index in the model's node list, its name and
its op type; then what is wrong and, when one can help, a fix line:

    m.onnx: node 3 'lrn1' (LRN): error: not supported: op type LRN
    fix: ...

The importer converts every node it can and collects the errors of the
others (`OnnxImportErrors`), like a linker listing every undefined
symbol: one run lists every node the model needs changed, then a summary
line.  A node the graph simplifier made (D-COMPILE-SIMPLIFY) has no index
in the user's file and is named without one.
"""

from __future__ import annotations

from collections.abc import Sequence

NodeRef = tuple[int | None, str, str]
"""(index in the user's model or None, node name, op type)."""


def node_text(file: str, node: NodeRef) -> str:
    """`m.onnx: node 3 'lrn1' (LRN)` (no index for a node the simplifier made)."""
    return f"{file}: {node_name(node)}"


def node_name(node: NodeRef) -> str:
    """`node 3 'lrn1' (LRN)`, the node as `node_text` names it."""
    index, name, op_type = node
    at = f"node {index} " if index is not None else "node "
    return f"{at}'{shown(name)}' ({shown(op_type) or 'no op type'})"


def shown(name: str | bytes) -> str:
    """A name of the model as a diagnostic shows it: a line break or another
    unprintable character escaped (`'a\\nb'`), so that one diagnostic stays
    one headline; one that is not UTF-8 (protobuf gives it as bytes) as
    Python writes bytes."""
    if isinstance(name, bytes):
        return repr(name)
    return name if name.isprintable() else name.encode("unicode_escape").decode("ascii")


class OnnxImportError(Exception):
    """A model the importer cannot convert: where (file, node), what, and
    how to fix it (None: no fix would help)."""

    def __init__(
        self, message: str, file: str, node: NodeRef | None = None, fix: str | None = None
    ):
        self.message, self.file, self.node, self.fix = message, file, node, fix
        self.notes: list[str] = []
        """Lines rendered after the errors as `note: ...` (what else is known
        about the model)."""
        super().__init__(message)

    def where(self) -> str:
        return self.file if self.node is None else node_text(self.file, self.node)

    def render(self) -> str:
        text = f"{self.where()}: error: {self.message}"
        text += f"\nfix: {self.fix}" if self.fix else ""
        return "\n".join([text, *(f"note: {n}" for n in self.notes)])

    def __str__(self) -> str:
        return self.render()


class OnnxImportErrors(OnnxImportError):
    """Every error of one import, in node order, and a summary line."""

    def __init__(self, errors: Sequence[OnnxImportError], file: str):
        self.errors = list(errors)
        count = len({e.node for e in self.errors if e.node is not None})
        tail = f"{len(self.errors)} error{'s' if len(self.errors) != 1 else ''} above"
        summary = (
            f"{count} node{'s' if count != 1 else ''} cannot be imported, {tail}"
            if count
            else f"the model cannot be imported, {tail}"
        )
        super().__init__(summary, file)

    def render(self) -> str:
        if len(self.errors) == 1:
            lines = [self.errors[0].render()]
        else:
            lines = [*(e.render() for e in self.errors), f"{self.file}: error: {self.message}"]
        return "\n".join([*lines, *(f"note: {n}" for n in self.notes)])
