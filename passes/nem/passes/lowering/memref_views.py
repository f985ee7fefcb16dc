"""What `transform.structured.promote` and non-dividing tiles leave
(D-LOW-VIEW): `memref.view` of a byte buffer and `memref.subview` with
dynamic sizes, lowered by the one handler of the view op (D-LOW-VIEW-OP),
which they, casts and reshapes are before the conversion
(`nem-rewrite-views`, `view_ops.py`).  All are views of existing bytes (no
task, no copy):

    %alloc = memref.alloc() : memref<3072xi8, 2>
    %v = memref.view %alloc[%c0][] : memref<3072xi8, 2> to memref<16x48xf32, 2>
    -> "nem_lowering.view"(%alloc, %c0) <{base = (d0) -> (d0), bytes, shape = [16, 48]}>
                                                                     (nem-rewrite-views)
    -> View(buffer of %alloc, elem f32, shape (16, 48), strides (48, 1), base 0)

    %0 = affine.min affine_map<(d0) -> (-d0 + 40, 32)>(%j)
    %s = memref.subview %b[0, %j] [48, %0] [1, 1] : ... to memref<48x?xf32, ...>
    -> "nem_lowering.view"(%b, %j, %0) <{base = (d0) -> (d0), shape = [48, ?],
                                         strides = [40, 1]}>      (nem-rewrite-views)
    -> View(buffer of %b, base: that of %b + the value of %j, shape (48, 32),
            strides (40, 1)): the size is the value `%0` has where the view is
       lowered, 32 in the full tiles and 8 in the peeled last tile (D-LOW-PEEL),
       else rejected

A `memref.view` needs a static result shape and a byte offset that is a
whole number of result elements (symbolic offsets included: every term a
multiple of the element size); a dynamic subview size must be a constant
where the view is lowered.  Everything else is a located
`not supported` diagnostic naming the fix.  The analysis is `byte_view`
and `const_sizes`; the handler only records views.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import DYNAMIC_INDEX, MemRefType
from xdsl.ir import Attribute, Operation, SSAValue

from nem.dialect.view_op import ViewOp, written_name
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.views import View, check_elem, elem_size, row_major

if TYPE_CHECKING:
    from nem.passes.lowering.context import LoweringContext
    from nem.passes.lowering.state import BlockState, Handler, Lowering


def byte_view(
    op: Operation, src: View, byte_offset: Aff, elem: Attribute, shape: list[int]
) -> View:
    """The view `memref.view` makes of `src` (a 1-D `i8` memref) at
    `byte_offset` with element type `elem` and `shape`, row-major."""
    if len(src.shape) != 1 or src.elem_bytes != 1:
        raise reject(op, "memref.view of a memref that is not 1-D with 1-byte elements")
    check_elem(op, elem)
    eb = elem_size(elem)
    start = src.base + byte_offset
    if start.const % eb or any(c % eb for _, c in start.terms.values()):
        raise reject(
            op,
            f"not supported: memref.view at byte offset {start} that is not a "
            f"multiple of the element size ({eb} bytes) (D-LOW-VIEW)",
            "align the view's offset to its element type",
        )
    base = Aff.c(start.const // eb)
    for atom, c in start.terms.values():
        base = base + Aff.atom(atom).scale(c // eb)
    strides = row_major(shape)
    needed = (sum((d - 1) * s for d, s in zip(shape, strides)) + 1) * eb if shape else eb
    hi = byte_offset.upper()
    if hi is not None and hi + needed > src.shape[0]:
        raise reject(
            op,
            f"memref.view of {needed} bytes at byte offset {byte_offset} runs past "
            f"the end of {src.name} ({src.shape[0]} bytes)",
        )
    return View(src.buffer, src.level, elem, tuple(shape), strides, base, src.name)


def const_sizes(
    ctx: LoweringContext, op: Operation, static: Sequence[int], dynamic: Sequence[SSAValue]
) -> list[int]:
    """The sizes of a subview or view: `static`, a dynamic one being the
    constant its operand of `dynamic` has here (an `arith.constant`, the
    `affine.min` of a peeled last tile), else rejected."""
    operands = list(dynamic)
    sizes: list[int] = []
    for s in static:
        if s != DYNAMIC_INDEX:
            sizes.append(s)
            continue
        v = operands.pop(0)
        a = ctx.index(v, op)
        if not a.is_const():
            raise reject(
                op,
                f"not supported: a {written_name(op)} size "
                f"({'%' + v.name_hint if v.name_hint else 'an operand'}) that is not constant here (D-LOW-VIEW: NEM regions have "
                "static sizes)",
                "peel the partial tile (transform.loop.peel, or an "
                "affine.min over a loop whose last tile the lowering peels) or choose "
                "tile sizes that divide the iteration space",
            )
        if a.const <= 0:
            raise reject(op, f"{written_name(op)} size {a.const} is not positive")
        sizes.append(a.const)
    return sizes


def lower_view_op(lw: Lowering, op: ViewOp, st: BlockState) -> None:
    """The view of `source`'s buffer with the op's layout, moved by its
    base's value here and sized by its dynamic sizes' (constants here:
    `const_sizes`), or `source`'s view itself (D-LOW-VIEW-OP); a byte view's
    is `byte_view`'s."""
    ctx = lw.ctx
    if op.bytes is not None:
        _lower_byte_view(ctx, op)
        return
    src = ctx.view(op.source, op)
    layout = op.layout
    if layout is None:
        ctx.views[op.result] = src
        return
    base = src.base
    if op.base is not None:
        base = base + ctx.affine(op, op.base.data, tuple(op.base_operands))[0]
    shape = const_sizes(ctx, op, layout[0], op.size_operands)
    ctx.views[op.result] = replace(src, shape=tuple(shape), strides=layout[1], base=base)


def _lower_byte_view(ctx: LoweringContext, op: ViewOp) -> None:
    """A `memref.view` of a byte buffer (`ByteViewToView`); its dynamic
    sizes must be constants here (`transform.structured.promote` passes
    `arith.constant`s until a canonicalization folds them into the type).
    The order of the checks is the old `memref.view` handler's."""
    rt = op.result.type
    assert isinstance(rt, MemRefType) and op.shape is not None and op.base is not None
    shape = const_sizes(ctx, op, op.shape.get_values(), op.size_operands)
    src = ctx.view(op.source, op)
    shift = ctx.affine(op, op.base.data, tuple(op.base_operands))[0]
    ctx.views[op.result] = byte_view(op, src, shift, rt.element_type, shape)


HANDLERS: dict[type[Operation], Handler] = {ViewOp: lower_view_op}
