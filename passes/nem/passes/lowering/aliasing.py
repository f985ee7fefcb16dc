"""Whether a raised computation keeps MLIR's order of reads and writes
(D-LOW-ALIAS): a pure analysis.

MLIR's loops, and linalg ops on buffers, read and write one point of the
iteration space after the other.  The NEM tasks a computation is raised
to read all of their inputs before they write: a matmul into a scratch
buffer then an `add` into the output, one elementwise task per op of a
tree.  The two agree when nothing the computation writes is read at
another point: every read either shares no byte with any write, or reads
at every point exactly the element written at that point (an elementwise
op in place, an accumulator: the same buffer, element type and element
offset as a function of the iteration space).  Otherwise raising would
read values MLIR's loops read only after they were overwritten
(`B[i,j] += A[i,k] * B[k,j]`, `A[i+1] = A[i] + A[i]`), and the
computation stays an escape-hatch task, which runs in MLIR's order.

A computation is a list of `Touch`es; `nest_touches` and `linalg_touches`
make them from a loop nest or a linalg op, `alias_reason` compares them
(`linalg_alias_reason`: a linalg op's, without its touches when no buffer
is passed to it twice).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import AffineMapAttr, MemRefType
from xdsl.dialects.linalg.ops import GenericOp  # (not the deprecated lazy attribute)
from xdsl.ir import Operation, SSAValue

from nem.passes.lowering.affine_algebra import Aff, Dim, eval_map
from nem.passes.lowering.escape import linalg_operands, location_text, memref_label
from nem.passes.lowering.nest_analysis import LINALG_ELTWISE, Nest, NotRaisable, access_indices
from nem.passes.lowering.views import View, last_offset

ViewOf = Callable[[SSAValue, Operation], View]
"""The lowering's view of a memref operand (`LoweringContext.view`)."""


@dataclass(frozen=True)
class Touch:
    """One memref access of a computation."""

    view: View
    point: Aff | None
    """The element offset accessed at a point of the iteration space: an
    `Aff` of its dimensions (`Dim`) and the enclosing loop variables; None
    when it is not known (then no read is the same element as a write)."""
    start: Aff
    """The element offset of the lowest element accessed, at one iteration
    of the enclosing loops (their variables, no `Dim`)."""
    last: int
    """The highest element accessed, in elements from `start`."""
    write: bool
    label: str
    """How the remark names it: `the load of %B at 6:14`."""


def alias_reason(touches: Sequence[Touch]) -> str | None:
    """None when raising keeps MLIR's order (module docstring), else why not."""
    writes = [t for t in touches if t.write]
    for k, w in enumerate(writes):
        for r in [*writes[k + 1 :], *(t for t in touches if not t.write)]:
            if r.view.buffer is not w.view.buffer or _same_element(r, w) or _disjoint(r, w):
                continue
            if r.write:
                return (
                    f"{r.label} and {w.label} write the same elements at different "
                    "points: raised tasks would write them in another order (D-LOW-ALIAS)"
                )
            return (
                f"{r.label} reads elements that {w.label} writes at another point: raised "
                "tasks would read them all before writing any, MLIR point by point "
                "(D-LOW-ALIAS)"
            )
    return None


def _same_element(a: Touch, b: Touch) -> bool:
    return (
        a.point is not None
        and b.point is not None
        and a.point == b.point
        and a.view.elem == b.view.elem
    )


def _disjoint(a: Touch, b: Touch) -> bool:
    """Whether the bytes of `a` and `b` are apart at every iteration of the
    enclosing loops (interval bounds of the difference of their starts)."""
    ab, bb = a.view.elem_bytes, b.view.elem_bytes
    diff = (a.start.scale(ab) - b.start.scale(bb)).bounds()
    if diff is None:
        return False
    lo, hi = diff
    return hi + (a.last + 1) * ab <= 0 or (b.last + 1) * bb <= lo


def _touch(
    view: View, point: Aff | None, extents: Mapping[int, int] | None, write: bool, label: str
) -> Touch:
    """A touch at `point` over the dimensions of `extents`, or the whole
    view (no `extents`, or a dimension inside a mod/floordiv)."""
    if point is not None and extents is not None:
        dims, rest = point.split_dims()
        if not rest.has_dims():
            lo = sum(min(0, c * (extents[d.k] - 1)) for d, c in dims)
            hi = sum(max(0, c * (extents[d.k] - 1)) for d, c in dims)
            return Touch(view, point, rest + Aff.c(lo), hi - lo, write, label)
    return Touch(view, point, view.base, last_offset(view.shape, view.strides), write, label)


def nest_touches(nest: Nest, outer: Mapping[SSAValue, Aff], view_of: ViewOf) -> list[Touch]:
    """The loads and stores of a perfect nest's body (`nest_analysis.analyze`)."""
    out = []
    for op in nest.body:
        if not isinstance(op, affine.LoadOp | affine.StoreOp | memref.LoadOp | memref.StoreOp):
            continue
        view = view_of(op.memref, op)
        try:
            point: Aff | None = view.start(access_indices(nest, outer, op))
        except (NotRaisable, ValueError):
            point = None
        write = isinstance(op, affine.StoreOp | memref.StoreOp)
        what = "the store to" if write else "the load of"
        out.append(
            _touch(
                view,
                point,
                nest.extents,
                write,
                f"{what} {memref_label(op.memref)} at {location_text(op)}",
            )
        )
    return out


ELEMENTWISE_NAMED = (*LINALG_ELTWISE, "linalg.copy")
"""Named linalg ops whose operands all use the identity map."""


def linalg_alias_reason(
    op: Operation,
    view_of: ViewOf,
    operands: tuple[Sequence[SSAValue], Sequence[SSAValue]] | None = None,
) -> str | None:
    """`alias_reason(linalg_touches(op, view_of))`, without the touches when
    every memref operand views a buffer of its own: `alias_reason` compares
    touches of one buffer only, so then none (issue 30: the touches of
    every linalg op of a CNN were a tenth of the conversion).  `operands`:
    `linalg_operands(op)`, when the caller has them."""
    ins, outs = linalg_operands(op) if operands is None else operands
    buffers = {id(view_of(v, op).buffer) for v in (*ins, *outs) if isinstance(v.type, MemRefType)}
    if len(buffers) == sum(isinstance(v.type, MemRefType) for v in (*ins, *outs)):
        return None
    return alias_reason(linalg_touches(op, view_of))


def linalg_touches(op: Operation, view_of: ViewOf) -> list[Touch]:
    """The memref operands of a linalg op, each as the whole view it
    passes; the element of a point is known for a `linalg.generic` (its
    indexing maps) and the named elementwise ops (identity maps)."""
    ins, outs = linalg_operands(op)
    maps = (
        [m.data for m in op.indexing_maps.data if isinstance(m, AffineMapAttr)]
        if isinstance(op, GenericOp)
        else None
    )
    out = []
    for k, v in enumerate([*ins, *outs]):
        if not isinstance(v.type, MemRefType):
            continue
        view = view_of(v, op)
        point: Aff | None = None
        if maps is not None and k < len(maps):
            try:
                point = view.start(
                    eval_map(maps[k], [Aff.atom(Dim(d)) for d in range(maps[k].num_dims)])
                )
            except ValueError:
                point = None
        elif op.name in ELEMENTWISE_NAMED:
            point = view.start([Aff.atom(Dim(d)) for d in range(len(view.shape))])
        write = k >= len(ins)
        role = f"output #{k - len(ins)}" if write else f"input #{k}"
        out.append(_touch(view, point, None, write, f"{role} {memref_label(v)}"))
    return out
