"""`nem-rewrite-views` (D-LOW-VIEW-OP): the memref ops that only re-read
their source's bytes with another layout (`memref.cast`,
`memref.collapse_shape`, `memref.expand_shape`, a static
`memref.reinterpret_cast` of a whole buffer, `memref.subview`) become one op,
`nem_lowering.view %source {shape, strides}`, before the conversion, which
then has one handler for them (issue 36 item 1: "convert memrefs to buffers
and regions" as rewrite patterns, one pattern per view op):

    %v = memref.collapse_shape %x [[0], [1, 2]] : memref<2x3x4xf32> into memref<2x12xf32>
    -> %v = "nem_lowering.view"(%x) <{shape = array<i64: 2, 12>,
                                       strides = array<i64: 12, 1>}> : ... -> memref<2x12xf32>
    %c = memref.cast %x : memref<4x8xf32> to memref<?x8xf32>
    -> %c = "nem_lowering.view"(%x) : (memref<4x8xf32>) -> memref<?x8xf32>
    %s = memref.subview %b[0, %j] [48, %0] [1, 1] : memref<48x40xf32> to memref<48x?xf32, ..>
    -> %s = "nem_lowering.view"(%b, %j, %0) <{shape = [48, ?], strides = [40, 1],
                                               base = (d0) -> (d0)}> : ...
    %v = memref.view %a[%c0][%c16] : memref<3072xi8, 2> to memref<?x48xf32, 2>
    -> %v = "nem_lowering.view"(%a, %c0, %c16) <{base = (d0) -> (d0), bytes,
                                                 shape = [?, 48]}> : ...
(each also naming the op it replaced, `replaces`, which messages give).

A cast is its source's view (no layout: the conversion keeps the source's,
also where its sizes are known per lowered copy only, a peeled tile); a
reshape's layout is its source's static layout with dimensions merged or
split (`reshape.collapsed`/`expanded`), so a reshape of a source whose type
has dynamic sizes or strides is rejected at the op (no input of the suites
has one).  A subview's base is an affine map of its dynamic offsets with
its source type's strides (behind casts) as coefficients, and its dynamic
sizes are operands the conversion resolves per lowered copy (a peeled
tile); a source whose strides are unknown is rejected.  A `memref.view`
is a byte view (session 29): its byte shift the base, its result's sizes the
shape, row-major; whether the shift is a whole number of elements from the
source's base, and the source a byte buffer, is known where the conversion
lowers it (a pipelined slot's base), so the conversion checks it.  The checks the conversion made (contiguous collapsed groups,
static expanded shapes) are the patterns' diagnostics; the result type is
the op's own, so users read the types they read.

Only the ops the conversion lowers one by one are rewritten: those of a
pure loop nest (a non-structural `affine.for`, one compute task whose
escape-hatch kernel prints the nest as MLIR wrote it) and of outlined
kernels (`nem_lowering.kernel`) are kept; a tile loop holds no such op
(`tile_loops._tiles_of_point_nests`).  The pass runs last of the
preparation, after `nem-drop-token-awaits`, whose structural marks it reads.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    StridedLayoutAttr,
)
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from nem.dialect.kernel_op import KernelOp
from nem.dialect.view_op import ViewOp
from nem.passes.lowering.affine_algebra import is_identity
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.prepare import entry_function, rewrite_once
from nem.passes.lowering.reshape import Layout, collapsed, expanded
from nem.passes.lowering.structure import TILE_LOOP, is_structural
from nem.passes.lowering.views import last_offset, memref_strides, row_major


@dataclass
class LoweredOneByOne:
    """Whether the conversion lowers an op by its handler: no outlined
    kernel and no pure loop nest around it, each loop around it structural
    or a tile loop `nem-mark-tile-loops` marked (none is before that pass).
    Each loop's structure is asked once (`is_structural` walks the loop)."""

    kept: dict[affine.ForOp, bool] = field(default_factory=dict[affine.ForOp, bool])

    def __call__(self, op: Operation) -> bool:
        parent = op.parent_op()
        while parent is not None:
            if isinstance(parent, KernelOp):
                return False
            if isinstance(parent, affine.ForOp):
                known = self.kept.get(parent)
                if known is None:
                    known = self.kept[parent] = TILE_LOOP in parent.attributes or is_structural(
                        parent
                    )
                if not known:
                    return False
            parent = parent.parent_op()
        return True


def source_layout(op: Operation, source: SSAValue) -> Layout:
    """The static (shape, element strides) of `source`'s type, else rejected at `op`."""
    t = source.type
    assert isinstance(t, MemRefType)
    shape = tuple(t.get_shape())
    if DYNAMIC_INDEX in shape:
        raise reject(
            op,
            f"not supported: {op.name} of a memref with dynamic sizes ({t}) (D-LOW-VIEW-OP: "
            "a view's layout is static)",
            "take the dynamic-size subview of the reshaped (or cast) memref instead",
        )
    layout = t.layout
    if isinstance(layout, StridedLayoutAttr):
        strides = layout.get_strides()
        if any(s is None for s in strides):
            raise reject(op, f"dynamic strides in {t} are not supported")
        return shape, tuple(s for s in strides if s is not None)
    return shape, memref_strides(op, t)[0]


def reassociation(op: memref.CollapseShapeOp | memref.ExpandShapeOp) -> list[list[int]]:
    """The groups of a reshape: the source (collapse) or result (expand)
    dimensions of each dimension on the other side."""
    return [[int(i.value.data) for i in g.data] for g in op.reassociation.data]


def _replace(
    rewriter: PatternRewriter,
    op: Operation,
    source: SSAValue,
    layout: Layout | None,
    base: tuple[AffineMap, Sequence[SSAValue]] | None = None,
    sizes: Sequence[SSAValue] = (),
    row_major: bool = False,
) -> None:
    view = ViewOp(source, layout, op.results[0].type, op.name, base, sizes, row_major)
    view.location = op.location
    rewriter.replace_op(op, view)


@dataclass
class CastToView(RewritePattern):
    """`memref.cast %x` -> `%x`'s view (no layout: the source's own)."""

    lowered: LoweredOneByOne

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.CastOp, rewriter: PatternRewriter) -> None:
        if self.lowered(op):
            _replace(rewriter, op, op.source, None)


@dataclass
class CollapseToView(RewritePattern):
    """`memref.collapse_shape %x` -> a view of `%x` with its groups merged."""

    lowered: LoweredOneByOne

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.CollapseShapeOp, rewriter: PatternRewriter) -> None:
        if self.lowered(op):
            src = source_layout(op, op.src)
            _replace(rewriter, op, op.src, collapsed(op, src, reassociation(op), str(op.src.type)))


@dataclass
class ExpandToView(RewritePattern):
    """`memref.expand_shape %x` -> a view of `%x` with its dimensions split."""

    lowered: LoweredOneByOne

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.ExpandShapeOp, rewriter: PatternRewriter) -> None:
        if not self.lowered(op):
            return
        rt = op.result.type
        assert isinstance(rt, MemRefType)
        shape = rt.get_shape()
        if list(op.output_shape) or DYNAMIC_INDEX in shape:
            raise reject(
                op,
                "memref.expand_shape with a dynamic output shape is not supported: "
                "NEM regions have static sizes",
                "tile with static sizes",
            )
        src = source_layout(op, op.src)
        _replace(rewriter, op, op.src, expanded(src, reassociation(op), shape))


@dataclass
class ReinterpretToView(RewritePattern):
    """A static `memref.reinterpret_cast` of a whole buffer, from its first
    element (nem-compile's transposed reads of an NCHW graph input,
    D-COMPILE-LAYOUT) -> a view of it with the cast's sizes and strides,
    every element it reaches in the buffer; any other is rejected here."""

    lowered: LoweredOneByOne

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.ReinterpretCastOp, rewriter: PatternRewriter) -> None:
        if not self.lowered(op):
            return
        values = [
            op.static_offsets.get_values(),
            op.static_sizes.get_values(),
            op.static_strides.get_values(),
        ]
        if list(op.offsets) + list(op.sizes) + list(op.strides) or any(
            DYNAMIC_INDEX in v for v in values
        ):
            raise reject(
                op, "not supported: a memref.reinterpret_cast that is not static (D-LOW-VIEW)"
            )
        (offset,), sizes, strides = ([int(x) for x in v] for v in values)
        t = op.source.type
        assert isinstance(t, MemRefType)
        if memref_strides(op, t) != (row_major(t.get_shape()), 0):
            raise reject(op, "not supported: a memref.reinterpret_cast of a view (D-LOW-VIEW)")
        span = math.prod(t.get_shape())
        reach = offset + last_offset(sizes, strides) + 1
        if min(sizes, default=1) <= 0 or min(strides, default=1) < 0 or reach > span:
            raise reject(
                op,
                f"memref.reinterpret_cast reaches element {reach - 1} of a {span}-element memref",
            )
        if offset:
            raise reject(
                op,
                "not supported: a memref.reinterpret_cast with an offset (D-LOW-VIEW-OP: a "
                "view starts at its source's first element)",
                "take a subview at the offset first",
            )
        _replace(rewriter, op, op.source, (tuple(sizes), tuple(strides)))


def type_strides(op: Operation, source: SSAValue) -> tuple[int, ...]:
    """The element strides of `source`'s type (static sizes or not: a
    subview of a peeled tile), through casts (a view without a layout is its
    source's view: its source's type has the strides where the cast's type
    has `?`), else rejected at `op`."""
    strides, src = _strides(source), source
    while None in strides and isinstance(src.owner, ViewOp) and src.owner.is_cast:
        src = src.owner.source
        strides = _strides(src)
    if None in strides:
        raise reject(
            op,
            f"not supported: {op.name} of a memref with dynamic strides ({source.type}) "
            "(D-LOW-VIEW-OP: a view's strides are static)",
            "take the subview of a memref with static strides (before its cast), or give "
            "the memref.view it takes constant sizes",
        )
    return tuple(s for s in strides if s is not None)


def _strides(v: SSAValue) -> list[int | None]:
    """The strides of `v`'s layout, None where unknown: dynamic, or row-major
    outside a size `_known_shape` does not know, or not strided at all."""
    t = v.type
    assert isinstance(t, MemRefType)
    layout = t.layout
    if isinstance(layout, StridedLayoutAttr):
        return list(layout.get_strides())
    shape = _known_shape(v, t)
    if not (
        isinstance(layout, NoneAttr)
        or (isinstance(layout, AffineMapAttr) and is_identity(layout.data))
    ):
        return [None] * len(shape)
    strides: list[int | None] = []
    for k in range(len(shape)):
        inner = [d for d in shape[k + 1 :] if d is not None]
        strides.append(math.prod(inner) if len(inner) == len(shape) - k - 1 else None)
    return strides


def _known_shape(v: SSAValue, t: MemRefType) -> list[int | None]:
    """`v`'s sizes, None where dynamic; a dynamic size of a `memref.view` an
    `arith.constant` gives is that constant (`transform.structured.promote`'s
    output before canonicalization, which the conversion's `memref.view`
    handler lays out row-major on the same constants: D-LOW-VIEW)."""
    shape: list[int | None] = [None if d == DYNAMIC_INDEX else d for d in t.get_shape()]
    view = v.owner
    if isinstance(view, ViewOp) and view.bytes is not None:  # a memref.view (ByteViewToView)
        sizes = iter(view.size_operands)
        shape = [_constant(next(sizes)) if d is None else d for d in shape]
    return shape


def _constant(v: SSAValue) -> int | None:
    c = v.owner
    if isinstance(c, arith.ConstantOp) and isinstance(c.value, IntegerAttr):
        return c.value.value.data
    return None


@dataclass
class SubviewToView(RewritePattern):
    """`memref.subview %x[offsets] [sizes] [steps]` -> a view of `%x` moved
    by the offsets (an affine map of the dynamic ones, the source type's
    strides as coefficients) with the kept sizes (a dynamic one an operand)
    and strides `source stride * step`; the unit dimensions the result type
    drops are dropped (D-LOW-VIEW)."""

    lowered: LoweredOneByOne

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.SubviewOp, rewriter: PatternRewriter) -> None:
        if not self.lowered(op):
            return
        steps = op.static_strides.get_values()
        if list(op.strides) or DYNAMIC_INDEX in steps:
            raise reject(op, "not supported: dynamic strides in memref.subview (D-LOW-VIEW)")
        src = type_strides(op, op.source)
        dims = iter(range(len(op.offsets)))
        terms = [
            (AffineExpr.dimension(next(dims)) if o == DYNAMIC_INDEX else AffineExpr.constant(o)) * s
            for o, s in zip(op.static_offsets.get_values(), src)
        ]
        shift = functools.reduce(operator.add, terms, AffineExpr.constant(0))
        rt = op.result.type
        assert isinstance(rt, MemRefType)
        kept = rt.get_shape()
        full = [(sz, src[k] * steps[k]) for k, sz in enumerate(op.static_sizes.get_values())]
        if len(kept) != len(full):  # rank reduction: drop the unit sizes the type drops
            dropped, full, i = full, [], 0
            for sz, st in dropped:
                if i < len(kept) and sz == kept[i]:
                    full.append((sz, st))
                    i += 1
                elif sz != 1:
                    raise reject(op, "unsupported rank-reducing subview")
        layout = tuple(sz for sz, _ in full), tuple(st for _, st in full)
        base = AffineMap(len(op.offsets), 0, (shift,)), list(op.offsets)
        moved = op.offsets or shift != AffineExpr.constant(0)
        _replace(rewriter, op, op.source, layout, base if moved else None, list(op.sizes))


@dataclass
class ByteViewToView(RewritePattern):
    """`memref.view %a[%shift][sizes]` -> a byte view of `%a` at byte `%shift`
    with the result's sizes (a dynamic one an operand), row-major in the
    result's element type, which the conversion checks (D-LOW-VIEW)."""

    lowered: LoweredOneByOne

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.ViewOp, rewriter: PatternRewriter) -> None:
        if not self.lowered(op):
            return
        rt = op.result.type
        assert isinstance(rt, MemRefType)
        shape = tuple(rt.get_shape())
        shift = AffineMap(1, 0, (AffineExpr.dimension(0),)), [op.byte_shift]
        _replace(rewriter, op, op.source, (shape, ()), shift, list(op.sizes), row_major=True)


@dataclass(frozen=True)
class RewriteViewsPass(ModulePass):
    """Rewrite the entry function's casts, reshapes, subviews and byte views of memrefs to
    `nem_lowering.view`s, outside pure nests and outlined kernels
    (D-LOW-VIEW-OP).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-rewrite-views"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lowered = LoweredOneByOne()
        patterns = [
            CastToView(lowered),
            CollapseToView(lowered),
            ExpandToView(lowered),
            ReinterpretToView(lowered),
            SubviewToView(lowered),
            ByteViewToView(lowered),
        ]
        # in program order: a view's source is rewritten first, so errors
        # come in program order
        rewrite_once(entry_function(op, self.entry).body, *patterns)
