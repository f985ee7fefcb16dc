"""Which bytes of a buffer static slices touch: the spans of
`tensor.insert_slice`/`extract_slice` and `memref.subview` ops of static
offsets, sizes and strides (a concatenation's inputs are disjoint ones,
D-COMPILE-CONCAT-IN-PLACE), and whether an epilogue's output, a view of a
buffer, can be written earlier than its op writes it (D-COMPILE-FUSE-L1:
`written_apart`)."""

from __future__ import annotations

from mlir import ir

from nem.compile.linalg_ir import users_of
from nem.compile.nest_ir import owner_op
from nem.compile.pads import static


def span(op: ir.Operation) -> list[tuple[int, int]]:
    """Per dimension, the first and one past the last index a slice op of
    static offsets, sizes and strides (`tensor.insert_slice`,
    `tensor.extract_slice`, `memref.subview`) touches in its source."""
    offsets, sizes, strides = (_static(op, what) for what in ("offsets", "sizes", "strides"))
    return [(o, o + (n - 1) * s + 1 if n else o) for o, n, s in zip(offsets, sizes, strides)]


def overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    """Two `span`s of one tensor or buffer share an index."""
    return all(lo < hi2 and lo2 < hi for (lo, hi), (lo2, hi2) in zip(a, b))


def whole_buffer(v: ir.Value, block: ir.Block) -> bool:
    """`v` is a whole buffer: allocated in `block`, or an argument of its function."""
    owner = owner_op(v)
    if owner is None:
        argument: bool = v.owner == block
        return argument
    allocated: bool = owner.name == "memref.alloc" and owner.block == block
    return allocated


def written_apart(v: ir.Value, op: ir.Operation, conv: ir.Operation) -> bool:
    """`v` is a static subview (or one of static subviews of unit strides
    and the same rank), defined before `conv` (where the fused op goes), of
    a whole buffer of `op`'s block whose bytes in `v` nothing else touches
    before `op`: the interior of a padded tensor that `op` writes in place
    (D-COMPILE-PAD-IN-PLACE), its border filled after it, or a
    concatenation's slice (D-COMPILE-CONCAT-IN-PLACE; a slice of a padded
    tensor's interior when the concatenation is padded), the other inputs'
    slices (static subviews apart from `v`) written at any time.  The fused
    op writes `v` at `conv`'s place, earlier than `op` did: a use of those
    bytes in between would see the other order."""
    chain: list[ir.Operation] = []  # the subviews from the buffer to `v`, outermost first
    at = v
    while (o := owner_op(at)) is not None and o.name == "memref.subview":
        if len(o.operands) != 1:
            return False  # (dynamic offsets, sizes or strides)
        chain.insert(0, o)
        at = o.operands[0]
    if not chain or not whole_buffer(at, op.block):
        return False
    owner = chain[-1]
    if owner.block != conv.block or not owner.is_before_in_block(conv):
        return False
    if len(chain) > 1 and not all(_plain(view) for view in chain):
        return False
    shifts = [[0] * ir.MemRefType(at.type).rank]  # each level's offsets in the buffer
    for view in chain[:-1]:
        shifts.append([a + b for a, b in zip(shifts[-1], _static(view, "offsets"))])
    mine = _shifted(span(owner), shifts[-1])

    def later(u: ir.Operation, shift: list[int]) -> bool:
        if u.name == "memref.subview":  # (a view counts by its own users)
            if len(u.operands) == 1 and not overlap(_shifted(span(u), shift), mine):
                return True  # another slice: none of `v`'s bytes
            return all(op.is_before_in_block(w) for w in users_of(u.results[0]))
        after: bool = op.is_before_in_block(u)
        return after

    levels = [at, *(view.results[0] for view in chain[:-1])]
    return all(
        u == down or later(u, shift)
        for level, down, shift in zip(levels, chain, shifts)
        for u in users_of(level)
    )


def _plain(view: ir.Operation) -> bool:
    """A subview of unit strides and its source's rank: its offsets add to
    its source's."""
    rank = len(ir.MemRefType(view.operands[0].type).shape)
    return (
        set(_static(view, "strides")) <= {1}
        and len(ir.MemRefType(view.results[0].type).shape) == rank
    )


def _static(view: ir.Operation, what: str) -> list[int]:
    return static(view.attributes[f"static_{what}"], ir)


def _shifted(box: list[tuple[int, int]], shift: list[int]) -> list[tuple[int, int]]:
    return [(lo + d, hi + d) for (lo, hi), d in zip(box, shift)]
