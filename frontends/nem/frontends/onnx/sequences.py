"""ONNX sequences of known length, resolved at compile time (D-COMPILE-SEQ).

A sequence whose every position is known when the model is compiled (built
by SequenceEmpty/SequenceConstruct/SplitToSequence, changed by
SequenceInsert/SequenceErase at constant positions) is a list of tensor
names (`Importer.seqs`); SequenceAt at a constant position is that tensor,
ConcatFromSequence a Concat (or a stack, `new_axis=1`) of them, and
SequenceLength a compile-time integer.  No sequence reaches the program:
one used at a position computed at run time, or a model output that is a
sequence, is a located `not supported`.
"""

from __future__ import annotations

import numpy as np

from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Importer, Node, TensorVal
from nem.frontends.onnx.shapes import add_unit_dims, drop_unit_dims, slice_of


def _seq(imp: Importer, node: Node, k: int = 0) -> list[str]:
    name = node.input(k)
    if name not in imp.seqs:
        raise imp.error(f"not supported: sequence '{name}' is not known at compile time")
    return imp.seqs[name]


def _position(imp: Importer, node: Node, k: int, length: int, insert: bool = False) -> int | None:
    """Constant position input `k` (None when absent), negative counted from
    the end, checked against the sequence's length (`insert`: up to it)."""
    if not node.input(k):
        return None
    given = imp.const_ints(node, k, "position")
    assert given is not None
    p = given[0] + length if given[0] < 0 else given[0]
    if not 0 <= p < (length + 1 if insert else length):
        raise imp.error(f"sequence position {given[0]} out of range for length {length}")
    return p


def sequence_empty(imp: Importer, node: Node) -> None:
    imp.seqs[node.outputs[0]] = []


def sequence_construct(imp: Importer, node: Node) -> None:
    imp.seqs[node.outputs[0]] = [n for n in node.inputs if n]


def sequence_insert(imp: Importer, node: Node) -> None:
    seq = list(_seq(imp, node))
    p = _position(imp, node, 2, len(seq), insert=True)
    seq.insert(len(seq) if p is None else p, node.input(1))
    imp.seqs[node.outputs[0]] = seq


def sequence_erase(imp: Importer, node: Node) -> None:
    seq = list(_seq(imp, node))
    if not seq:
        raise imp.error("SequenceErase of an empty sequence")
    p = _position(imp, node, 1, len(seq))
    del seq[len(seq) - 1 if p is None else p]
    imp.seqs[node.outputs[0]] = seq


def sequence_at(imp: Importer, node: Node) -> None:
    seq = _seq(imp, node)
    p = _position(imp, node, 1, len(seq))
    assert p is not None  # the schema requires the position
    src = seq[p]
    if imp.const(src) is not None:
        imp.set_const(node.outputs[0], imp.consts[src])
    else:
        imp.vals[node.outputs[0]] = imp.tensor(src)


def sequence_length(imp: Importer, node: Node) -> None:
    imp.set_const(node.outputs[0], np.array(len(_seq(imp, node)), np.int64))


def concat_from_sequence(imp: Importer, node: Node) -> None:
    seq = _seq(imp, node)
    if not seq:
        raise imp.error("ConcatFromSequence of an empty sequence")
    xs = [imp.tensor(n) for n in seq]
    new_axis = int(node.attrs.get("new_axis", 0))
    rank = xs[0].rank + new_axis
    axis = imp.axis(int(node.attrs["axis"]), rank)
    if new_axis:
        xs = [add_unit_dims(x, [axis]) for x in xs]
    perm = xs[0].perm
    vals = [imp.in_perm(x, perm) for x in xs]
    imp.define(node.outputs[0], emit.concat(vals, perm.index(axis)), perm)


def split_to_sequence(imp: Importer, node: Node) -> None:
    x = imp.tensor(node.input(0))
    axis = imp.axis(int(node.attrs.get("axis", 0)), x.rank)
    dim = x.shape[axis]
    keepdims = int(node.attrs.get("keepdims", 1))
    split = imp.const(node.input(1)) if node.input(1) else None
    if node.input(1) and split is None:
        imp.const_ints(node, 1, "split")  # the located "computed at run time" error
    if split is None:
        sizes, squeeze = [1] * dim, not keepdims
    elif split.ndim == 0:
        n = int(split)
        sizes, squeeze = [min(n, dim - k) for k in range(0, dim, n)], False
    else:
        sizes, squeeze = [int(v) for v in split], False
    if sum(sizes) != dim or min(sizes, default=0) <= 0:
        raise imp.error(f"SplitToSequence sizes {sizes} do not cut axis {axis} ({dim})")
    names, offset = [], 0
    for k, n in enumerate(sizes):
        part: TensorVal = slice_of(x, axis, offset, n, 1)
        name = f"{node.outputs[0]}#{k}"
        if squeeze:
            part = drop_unit_dims(part, [axis])
        imp.vals[name] = part
        names.append(name)
        offset += n
    imp.seqs[node.outputs[0]] = names
