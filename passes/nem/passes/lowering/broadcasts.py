"""Copies that transpose or broadcast (D-LOW-BCAST): layout changes and bias
broadcasts as transfers.

A point nest `Y[i0, ..., in] = X[perm of a subset of i0..in]` (what
`convert-linalg-to-affine-loops` makes of a transpose or of a bias
`linalg.broadcast` / broadcasting `linalg.generic`) becomes:

1. one `transfer` of X into the corner of Y where every broadcast index is
   0, the source region's axes in Y's order (a transpose is only strides);
2. per broadcast dimension of extent E, innermost first, ceil(log2 E)
   transfers that double the filled part of Y along it (`[0, m)` ->
   `[f, f + m)`, disjoint).

Where a `concat` can (D-LOW-BCAST-CONCAT), the innermost broadcast
dimension starts with a concat of copies of X instead of 1, and every
dimension grows by concats of the block filled so far (index 0 along it)
instead of doublings: up to 16 copies in one concat, more in two levels
(`_first_level`; a conv bias over a 7x112 tile: 3 tasks, not 11).

A broadcast dimension stored inside a copied one (`Y[i, j, k] = X[j]`: k
inside j) cannot be doubled in place: source and destination interleave, so
their byte extents overlap (HAZ-02).  The innermost such dimension is one
`concat` of E copies of X instead (D-LOW-BCAST-CONCAT); with two of them,
or more copies than a concat takes, X is broadcast into a scratch that
stores the broadcast dimensions outermost, then moved into Y by one
transfer.

Every element of Y ends as the value MLIR stores there (copies are exact),
with O(log) tasks instead of a zero-stride region (BUF-02 rejects those).
A constant fill (`Y[...] = cst`) is `fills.py`'s (D-LOW-FILL).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.dialects import affine, arith, memref
from xdsl.ir import Operation, SSAValue

from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.emit import log_region, region
from nem.passes.lowering.fills import Box, byte_region
from nem.passes.lowering.nest_analysis import Access, Nest, NotRaisable, access
from nem.passes.lowering.staging import Staging, copy_kind, illegal, name_task, scratch
from nem.passes.lowering.state import BlockState, Lowering
from nem.passes.lowering.views import View

if TYPE_CHECKING:
    from nem.dialect.builder import NemBuilder


@dataclass(frozen=True)
class BroadcastPlan:
    src: Access
    dst: Access
    extents: dict[int, int]

    @property
    def broadcast_dims(self) -> list[int]:
        """Store dims the load does not use, innermost store dimension first."""
        used = set(self.src.dims)
        return [k for k in reversed(self.dst.dims) if k not in used and self.extents[k] > 1]


def match_broadcast(nest: Nest, outer: dict[SSAValue, Aff], why: str) -> BroadcastPlan:
    """The plan of a transposing/broadcasting copy nest (`why`: match_nest's reason)."""
    stores = [o for o in nest.body if isinstance(o, affine.StoreOp | memref.StoreOp)]
    if len(stores) != 1:
        raise NotRaisable(f"{len(stores)} stores in the nest body")
    st = stores[0]
    val = st.value.owner
    if isinstance(val, Operation) and any(
        isinstance(v.owner, arith.ConstantOp) for v in val.operands
    ):
        raise NotRaisable(
            f"'{val.name}' with a constant operand (NEM elementwise opcodes "
            "take regions, no scalars)"
        )
    if not isinstance(val, affine.LoadOp | memref.LoadOp) or val not in nest.body:
        raise NotRaisable(why)
    dst, src = access(nest, outer, st), access(nest, outer, val)
    n = len(nest.loops)
    if (
        sorted(dst.dims) != list(range(n))
        or len(set(src.dims)) != len(src.dims)
        or not set(src.dims) <= set(dst.dims)
    ):
        raise NotRaisable("a copy that transposes or broadcasts in a way transfers do not express")
    if dst.memref == src.memref:
        raise NotRaisable("a copy within one buffer")
    return BroadcastPlan(src, dst, dict(nest.extents))


def emit_broadcast(
    lw: Lowering, plan: BroadcastPlan, anchor: Operation, st: BlockState, what: str
) -> None:
    ctx = lw.ctx
    stg = Staging(anchor.location)
    dv = ctx.view(plan.dst.memref, anchor)
    dst_start = dv.base
    for (_, rest), s in zip(plan.dst.index, dv.strides):
        dst_start = dst_start + rest.scale(s)
    axes = [(k, s) for (k, _), s in zip(plan.dst.index, dv.strides) if k is not None]
    with stg.builder.located(anchor.location):
        try:
            toks = broadcast_into(
                lw, stg.builder, plan.src, dv, dst_start, axes, plan.extents, anchor
            )
        except Overlap:  # doublings in place would overlap: through a scratch
            toks = _through_scratch(lw, stg.builder, st, plan, dv, dst_start, axes, anchor)
    stg.commit(st)
    for t in toks:
        name_task(ctx, t, copy_kind(t))
    kind = "broadcast" if plan.broadcast_dims else "transpose"
    tasks = [copy_kind(t).replace("copy", "transfer") for t in toks]
    counts = " + ".join(f"{tasks.count(t)} {t}" for t in dict.fromkeys(tasks))
    ctx.summary.raised.append(f"{what} -> {counts} ({kind} copy)")


def _through_scratch(
    lw: Lowering,
    b: NemBuilder,
    st: BlockState,
    plan: BroadcastPlan,
    dv: View,
    dst_start: Aff,
    axes: list[tuple[int, int]],
    anchor: Operation,
) -> list[SSAValue]:
    """The transfers of a broadcast whose doublings in Y would overlap
    (`_overlapping`): X broadcast into a scratch of Y's shape in Y's memory
    that stores the broadcast dimensions outermost, as a broadcast operand
    is (D-LOW-BCAST-OPERAND: every doubling copies one contiguous block to
    the next), then one transfer of it, read in Y's order, into Y."""
    toks: list[SSAValue] = []
    frm, _ = broadcast_leaf(lw, b, st, plan.src, plan.dst, dv, plan.extents, anchor, toks)
    to = region(
        lw.ctx, b, dv, dst_start, [plan.extents[k] for k, _ in axes], [s for _, s in axes], anchor
    )
    toks.append(b.transfer(to, frm))
    return toks


def broadcast_into(
    lw: Lowering,
    b: NemBuilder,
    src: Access,
    dv: View,
    dst_start: Aff,
    axes: list[tuple[int, int]],
    extents: dict[int, int],
    anchor: Operation,
) -> list[SSAValue]:
    """The transfers (uncommitted, unnamed) that copy the nest access `src`
    into the box of `dv` at `dst_start` whose axes are the nest dimensions
    `axes` ((dim, element stride), in the box's order; `extents` their
    sizes): the seed transfer, then the doublings along every dimension
    `src` does not use (module docstring); raises `Overlap` (before
    building anything) where doublings in place would overlap.  Also how an
    elementwise nest's broadcast operand is materialized into a scratch that
    stores the broadcast dimensions outermost (D-LOW-BCAST-OPERAND), where
    they never do."""
    ctx = lw.ctx
    sv = ctx.view(src.memref, anchor)
    src_stride = {k: s for (k, _), s in zip(src.index, sv.strides) if k is not None}
    src_start = sv.base
    for (_, rest), s in zip(src.index, sv.strides):
        src_start = src_start + rest.scale(s)
    used = set(src.dims)
    size = {k: (extents[k] if k in used else 1) for k, _ in axes}
    strides = [s for _, s in axes]
    seed_shape = [size[k] for k, _ in axes]
    seed = Box(sv, src_start, tuple(seed_shape), tuple(src_stride.get(k, 1) for k, _ in axes))
    bdims = [i for i, (k, _) in enumerate(axes) if k not in used and extents[k] > 1]
    inner = _overlapping(axes, size, extents, bdims)
    if inner and inner != bdims[-1:]:
        raise Overlap()
    toks: list[SSAValue] = []
    if bdims:  # the innermost broadcast dimension by a concat
        k = axes[bdims[-1]][0]
        # in place (inner) it cannot grow by blocks after: all E copies at once
        first = extents[k] if inner else _first_level(extents[k])
        tok = _concat_broadcast(
            lw,
            b,
            seed,
            dv,
            dst_start,
            axes,
            [first if kk == k else size[kk] for kk, _ in axes],
            bdims[-1],
            anchor,
        )
        if tok is None and inner:
            raise Overlap()
        if tok is not None:
            toks.append(tok)
            size[k] = first
    if not toks:
        frm = region(ctx, b, sv, src_start, seed_shape, list(seed.strides), anchor)
        toks.append(b.transfer(region(ctx, b, dv, dst_start, seed_shape, strides, anchor), frm))
    for i in reversed(range(len(axes))):  # innermost box dimension first
        d, stride = axes[i]
        total = extents[d]
        while size[d] < total:
            filled = size[d]
            # the block filled so far, repeated along d by one concat (D-LOW-BCAST-CONCAT)
            reps = _first_level(total) - 1 if filled == 1 else (total - filled) // filled
            if 2 <= reps <= MAX_CONCAT_COPIES:
                shape = [size[k] for k, _ in axes]
                block = Box(dv, dst_start, tuple(shape), tuple(strides))
                shape[i] = reps * filled
                tok = _concat_broadcast(
                    lw,
                    b,
                    block,
                    dv,
                    dst_start + Aff.c(filled * stride),
                    axes,
                    shape,
                    i,
                    anchor,
                    reps,
                )
                if tok is not None:
                    toks.append(tok)
                    size[d] = filled + reps * filled
                    continue
            m = min(filled, total - filled)  # a doubling transfer (or the remainder)
            shape = [m if k == d else size[k] for k, _ in axes]
            frm = region(ctx, b, dv, dst_start, shape, strides, anchor)
            to = region(ctx, b, dv, dst_start + Aff.c(filled * stride), shape, strides, anchor)
            toks.append(b.transfer(to, frm))
            size[d] = filled + m
    return toks


class Overlap(Exception):
    """`broadcast_into`: a doubling in place would copy between overlapping
    byte extents (HAZ-02) and no concat replaces it; nothing was built."""


def _overlapping(
    axes: list[tuple[int, int]], size: dict[int, int], extents: dict[int, int], bdims: list[int]
) -> list[int]:
    """The box positions of the broadcast dimensions `bdims` whose doublings,
    done innermost first from the seed of sizes `size`, would copy between
    overlapping byte extents (HAZ-02): a dimension of stride s is doubled
    disjointly iff the filled box without it spans at most s elements (every
    later doubling then starts at least s past its source's end)."""
    cur = dict(size)
    out = []
    for i in reversed(bdims):
        k, s = axes[i]
        span = 1 + sum((cur[kk] - 1) * abs(ss) for kk, ss in axes if kk != k)
        if s < span:
            out.append(i)
        cur[k] = extents[k]
    return out


SINGLE_CONCAT_COPIES = 16
"""A broadcast dimension of at most this many copies is one `concat`; a longer
one is two levels (`_first_level`): every copy is an operand region that
printing, parsing and each later analysis pay for, so a concat of 112
copies cost more than the 8 transfers it replaced (nem-verify 1.85 s
against 1.22 s on 40 conv-bias broadcasts over 7x112 tiles)."""


def _first_level(extent: int) -> int:
    """How many copies the first concat along a broadcast dimension of
    `extent` makes: all of them up to SINGLE_CONCAT_COPIES, else a divisor
    of `extent` near its square root (the second concat repeats that block
    extent / a - 1 times: 8 + 13 operands for 112, not 112), else the
    square root rounded up (a doubling or remainder transfer completes it)."""
    if extent <= SINGLE_CONCAT_COPIES:
        return extent
    root = math.isqrt(extent)
    for a in range(root, max(root // 2, 1), -1):
        if extent % a == 0:
            return a
    return root if root * root == extent else root + 1


MAX_CONCAT_COPIES = 1024
"""A broadcast of more copies than this is not one `concat` (D-LOW-BCAST-CONCAT):
its operand list would grow with the extent (a fuzzed loop of 2^63 - 1
iterations exhausted memory building it)."""


def _concat_broadcast(
    lw: Lowering,
    b: NemBuilder,
    seed: Box,
    dv: View,
    dst_start: Aff,
    axes: list[tuple[int, int]],
    shape: list[int],
    axis: int,
    anchor: Operation,
    copies: int | None = None,
) -> SSAValue | None:
    """One `concat` of E copies of the source box `seed` along the broadcast
    box position `axis` into the box of `shape` (D-LOW-BCAST-CONCAT), when
    the target has a legal variant for the element type, else for its bytes
    (`i8`, every region one more innermost axis: f32 on npm_pro_x1); else
    None (the candidates are erased)."""
    ctx = lw.ctx
    strides = [s for _, s in axes]
    copies = shape[axis] if copies is None else copies
    if copies > MAX_CONCAT_COPIES:
        return None  # the doubling transfers: log2(E) tasks, not E operands
    # the typed candidate's legality depends only on its regions' element
    # types (`TaskLegality`): it is built only when legal
    if ctx.legality.why_not("concat", [seed.view.elem] * copies, [dv.elem]) is None:
        frm = region(ctx, b, seed.view, seed.start, seed.shape, seed.strides, anchor)
        to = region(ctx, b, dv, dst_start, shape, strides, anchor)
        return b.compute("concat", [frm] * copies, [to], axis=axis)
    # what building its regions would log for the partial-tile checks
    log_region(ctx, seed.view, seed.start, seed.shape, seed.strides, anchor)
    log_region(ctx, dv, dst_start, shape, strides, anchor)
    src8 = byte_region(ctx, b, seed, anchor, keep_axes=True)
    to8 = byte_region(
        ctx, b, Box(dv, dst_start, tuple(shape), tuple(strides)), anchor, keep_axes=True
    )
    tok = b.compute("concat", [src8] * copies, [to8], axis=axis)
    if illegal(ctx, tok) is None:
        return tok
    _erase(tok, to8, src8)
    return None


def _erase(*values: SSAValue) -> None:
    for v in values:
        op = v.owner
        assert isinstance(op, Operation)
        op.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
        op.erase()


def broadcast_leaf(
    lw: Lowering,
    b: NemBuilder,
    st: BlockState,
    acc: Access,
    out: Access,
    like: View,
    exts: dict[int, int],
    anchor: Operation,
    copies: list[SSAValue],
) -> tuple[SSAValue, View]:
    """A broadcast operand of an elementwise nest, copied into a scratch
    region of the output's shape by D-LOW-BCAST's transfers
    (D-LOW-BCAST-OPERAND); the transfers join `copies`.  The scratch stores
    the broadcast dimensions outermost, so that every doubling copies one
    contiguous block to the next (an inner broadcast dimension stored in
    place would give transfers whose byte extents overlap, HAZ-02); the
    region reads it back in the output's order (strides)."""
    ctx = lw.ctx
    used = set(acc.dims)
    order = [k for k in out.dims if k not in used] + [k for k in out.dims if k in used]
    sv = scratch(
        ctx,
        st,
        like,
        [exts[k] for k in order],
        anchor,
        ident=-(len(copies) + 1),
        elem=ctx.view(acc.memref, anchor).elem,
    )
    stride = dict(zip(order, sv.strides))
    axes = [(k, stride[k]) for k in out.dims]
    copies += broadcast_into(lw, b, acc, sv, sv.base, axes, exts, anchor)
    return region(
        ctx, b, sv, sv.base, [exts[k] for k in out.dims], [s for _, s in axes], anchor
    ), sv
