"""Handlers of memref and data-movement ops: allocations (D-LOW-BUF, declared
and named by `nem-declare-allocations`, D-LOW-DECLARE; subviews, casts
and reshapes are `nem_lowering.view`s by then, `memref_views.lower_view_op`),
`memref.copy` and one-element copies (`nem_lowering.element_copy`,
D-LOW-SCALAR-COPY), DMA starts and waits
(D-LOW-DMA).  Each task is emitted without dependencies:
`nem-synthesize-deps` orders the conflicting ones afterwards."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from xdsl.dialects import affine, func, memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Block, Operation, SSAValue

from nem.dialect.attributes import MemLevelAttr
from nem.dialect.buffer_op import BufferOp as DeclaredBuffer
from nem.dialect.element_copy_op import ElementCopyOp
from nem.dialect.ops import BufferOp
from nem.frontends.upstream_dialects.dma import (
    AffineDmaStartOp,
    AffineDmaWaitOp,
)
from nem.frontends.upstream_dialects.memref_copy import MemRefCopyOp
from nem.passes.lowering.access_bounds import check_access_bounds
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.dma_tags import TagSlot
from nem.passes.lowering.emit import region
from nem.passes.lowering.escape import (
    SCALAR,
    emit_escape,
    loaded_by_kernels,
    location_text,
    scalar_statement,
)
from nem.passes.lowering.memref_roots import only_dma_tags
from nem.passes.lowering.partial_tiles import DmaSide, plan_dma
from nem.passes.lowering.views import (
    View,
    buffer_bytes,
    check_bounds,
    check_elem,
    contiguous_box,
    memory_space,
    memref_strides,
)

if TYPE_CHECKING:
    from nem.passes.lowering.context import LoweringContext
    from nem.passes.lowering.state import BlockState, Handler, Lowering


# ---------------------------------------------------------------------------
# Allocations
# ---------------------------------------------------------------------------


def lower_alloc(lw: Lowering, op: DeclaredBuffer, st: BlockState) -> None:
    """An allocation, which `nem-declare-allocations` made a
    `nem_lowering.buffer` and named (D-LOW-DECLARE): a buffer at program
    scope (hoisted), with 2 slots `(v mod 2) * bytes` inside a re-rolled
    pipelined loop; a `memref<..xi32>` used only as DMA tags is no buffer
    (D-LOW-BUF)."""
    ctx = lw.ctx
    assert op.is_allocation  # a global's is declared by the driver, not lowered here
    result = op.result
    t = result.type
    assert isinstance(t, MemRefType)
    if op.sizes:
        raise reject(
            op,
            f"dynamic shape {t} is not supported: NEM buffers have static sizes",
            "tile with static sizes",
        )
    seen = ctx.views.get(result)
    if seen is not None and seen.base.is_const():
        return  # lowered before: a peeled iteration reuses its loop's buffers (D-LOW-PEEL)
    if only_dma_tags(result):
        return
    elem = t.element_type
    strides = allocation_strides(op, t)
    level = ctx.level(op, t)
    nbytes = buffer_bytes(t.get_shape(), elem)
    if seen is not None:
        # a buffer in two slots (D-LOW-PIPE-BODY) lowered again, for a peeled
        # iteration: in the slots of the loop lowering it now, else in slot 0
        # (nem-synthesize-deps orders either after the earlier uses)
        n_el = nbytes // View(seen.buffer, seen.level, elem, (), (), Aff.c(0), "").elem_bytes
        ctx.views[result] = replace(seen, base=ctx.slot_base(st.block, op, n_el))
        return
    if op.buffer is None:
        raise reject(
            op,
            "not supported: an allocation nem-declare-allocations did not name "
            "(it ran with other memory-spaces than the conversion)",
            "give both passes the same memory-spaces",
        )
    slots = ctx.slots(st.block)
    name = op.buffer_name
    buf = ctx.declare_buffer(name, level, nbytes * slots, op.location)
    base = Aff.c(0)
    if slots >= 2:
        n_el = nbytes // View(buf, MemLevelAttr(level), elem, (), (), Aff.c(0), "").elem_bytes
        base = ctx.slot_base(st.block, op, n_el)
        ctx.summary.slotted.append(name)
    ctx.views[result] = View(
        buf, MemLevelAttr(level), elem, tuple(t.get_shape()), strides, base, name
    )


def allocation_strides(op: Operation, t: MemRefType) -> tuple[int, ...]:
    """The element strides of allocation `op` of type `t`, its element type
    and layout checked (D-LOW-BUF): what the conversion rejects before it
    names the buffer, so `nem-declare-allocations` names none it rejects."""
    check_elem(op, t.element_type)
    strides, off = memref_strides(op, t)
    if off:
        raise reject(op, "an allocation with a layout offset")
    return strides


def allocation_buffers(fn: func.FuncOp, decls: Block) -> list[BufferOp]:
    """The declarations among `decls` of the buffers the allocations of `fn`
    name (`nem-declare-allocations`, D-LOW-DECLARE), in their order: those
    `lower_alloc` declared, read from the IR (D-LOW-WALK).  No other
    declaration has such a name: the conversion's generator resumes the
    one that named them (`Names.resumed`)."""
    names = {
        op.buffer_name
        for op in fn.walk()
        if isinstance(op, DeclaredBuffer) and op.is_allocation and op.buffer is not None
    }
    return [op for op in decls.ops if isinstance(op, BufferOp) and op.buffer_name.data in names]


def drop_unused_allocations(ctx: LoweringContext, fn: func.FuncOp) -> None:
    """Erase the buffers of the allocations of `fn` that no statement of the
    program uses (a pooling window's `3x3` shape operand, which the compute
    reads nothing of): with no use they have no lifetime, so
    `nem-share-buffers` cannot share their bytes, and they would hold L1 for
    the whole program (D-LOW-BUF; Inception v2 exceeded its L1 by the 1 KB
    of sixteen of them and was tiled twice)."""
    for op in allocation_buffers(fn, ctx.decl_block):
        name = op.buffer_name.data
        if ctx.drop_if_unused(op.result) and name in ctx.summary.slotted:
            ctx.summary.slotted.remove(name)


# ---------------------------------------------------------------------------
# Copies
# ---------------------------------------------------------------------------


def lower_copy(lw: Lowering, op: memref.CopyOp | MemRefCopyOp, st: BlockState) -> None:
    """`memref.copy` -> `transfer.sync` of the whole views."""
    ctx = lw.ctx
    sv, dv = ctx.view(op.source, op), ctx.view(op.destination, op)
    if sv.elem != dv.elem or sv.shape != dv.shape:
        raise reject(op, "memref.copy between different shapes or element types")
    b = st.builder
    with b.located(op.location):
        src = region(ctx, b, sv, sv.base, sv.shape, sv.strides, op)
        dst = region(ctx, b, dv, dv.base, dv.shape, dv.strides, op)
        b.transfer(dst, src, sync=True, name=ctx.names.token("copy"))


def lower_element_copy(lw: Lowering, op: ElementCopyOp, st: BlockState) -> None:
    """A one-element copy `nem-raise-scalar-copies` raised (D-LOW-SCALAR-COPY):
    the load's then the store's bounds checked (D-LOW-BOUNDS), and a
    transfer of one element, its source region at the load, its destination
    at the store (D-LOW-COPYNEST)."""
    load, store = op.load, op.store
    for acc in (load, store):
        check_access_bounds(acc, lw.ctx.env)
    element_transfer(lw, load, store, st)


def element_transfer(lw: Lowering, load: Operation, store: Operation, st: BlockState) -> None:
    """A transfer `copy` of the one element `load` reads to where `store`
    writes it, each region located at its access (D-LOW-COPYNEST)."""
    ctx = lw.ctx
    b = st.builder
    regs = []
    for acc in (load, store):
        assert isinstance(acc, affine.LoadOp | affine.StoreOp | memref.LoadOp | memref.StoreOp)
        vw = ctx.view(acc.memref, acc)
        if isinstance(acc, affine.LoadOp | affine.StoreOp):
            assert acc.map is not None
            idx = ctx.affine(acc, acc.map.data, tuple(acc.indices))
        else:
            idx = [ctx.index(v, acc) for v in acc.indices]
        start = vw.start(idx)  # within its memref: checked per dimension (D-LOW-BOUNDS)
        with b.located(acc.location):
            regs.append(region(ctx, b, vw, start, [1], [1], acc))
    with b.located(store.location):
        b.transfer(regs[1], regs[0], name=ctx.names.token("copy"))


def lower_scalar_access(lw: Lowering, op: Operation, st: BlockState) -> None:
    """A scalar load/store outside a loop nest: a load whose value only loop
    nests use (each kernel loads it, D-LOW-ESCAPE), or a scalar statement
    (D-LOW-SCALAR); anything else has no NEM equivalent (a one-element copy
    is a `nem_lowering.element_copy` by now, D-LOW-SCALAR-COPY)."""
    check_access_bounds(op, lw.ctx.env)
    is_load = isinstance(op, affine.LoadOp | memref.LoadOp)
    if loaded_by_kernels(op):  # its kernels load it (D-LOW-ESCAPE)
        return
    group = scalar_statement(op) if is_load else None
    if group is not None:  # loads, arithmetic and stores of scalars (D-LOW-SCALAR)
        for o in group[1:]:
            check_access_bounds(o, lw.ctx.env)
        emit_escape(lw, op, st, SCALAR, f"scalar statement at {location_text(op)}", group[1:])
        return
    raise reject(
        op,
        "a scalar access outside a loop nest has no NEM equivalent",
        "wrap it in a loop nest (it becomes a compute task)",
    )


# ---------------------------------------------------------------------------
# DMA (D-LOW-DMA)
# ---------------------------------------------------------------------------


def tag_slot(lw: Lowering, op: AffineDmaStartOp | AffineDmaWaitOp) -> TagSlot:
    """A DMA's tag memref and the slot its map gives (a `memref.dma_*` is
    one with identity maps by now: `nem-raise-memref-dmas`)."""
    idx = lw.ctx.affine(op, op.tag_map.data, tuple(op.tag_operands))
    return TagSlot(op.tag, tuple(idx))


def lower_dma_start(lw: Lowering, op: AffineDmaStartOp, st: BlockState) -> None:
    """`dma_start` -> `transfer.async` of typed regions (D-LOW-REGION),
    clipped or narrowed for partial tiles (D-LOW-PEEL)."""
    st.tags.start(op, tag_slot(lw, op))
    src, dst = dma_regions(lw, op, st)
    with st.builder.located(op.location):
        st.builder.transfer(dst, src, name=lw.ctx.names.token("dma"))


def lower_dma_wait(lw: Lowering, op: AffineDmaWaitOp, st: BlockState) -> None:
    """Checks the pairing; the ordering it stood for is synthesized."""
    st.tags.wait(op, tag_slot(lw, op))


def dma_regions(lw: Lowering, op: AffineDmaStartOp, st: BlockState) -> tuple[SSAValue, SSAValue]:
    """(src region, dst region) of a DMA start."""
    ctx = lw.ctx
    sidx = ctx.affine(op, op.src_map.data, tuple(op.src_operands))
    didx = ctx.affine(op, op.dst_map.data, tuple(op.dst_operands))
    sv, dv = ctx.view(op.src, op), ctx.view(op.dst, op)
    if sv.elem != dv.elem:
        raise reject(op, f"DMA from {sv.elem} to {dv.elem} would convert element types")
    count = ctx.index(op.num_elements, op)
    if not count.is_const():
        raise reject(op, "the element count of a DMA must be a constant")
    n = count.const
    stride: tuple[int, int] | None = None
    if op.stride_info is not None:
        s, p = (ctx.index(v, op) for v in op.stride_info)
        if not (s.is_const() and p.is_const()) or p.const <= 0 or n % p.const:
            raise reject(
                op,
                "DMA stride and elements-per-stride must be constants dividing the element count",
            )
        stride = (s.const, p.const)
    # the strided side is the one in memory space 0 (upstream's definition),
    # else the source (D-LOW-DMA)
    strided_is_src = memory_space(op.src) == 0 or memory_space(op.dst) != 0
    sides = (DmaSide(sv, tuple(sidx)), DmaSide(dv, tuple(didx)))
    plan = plan_dma(op, n, stride, strided_is_src, *sides, ctx.scope, ctx.peeled)
    ctx.summary.notes.extend(plan.notes)
    if plan.narrowed is not None:
        ctx.scope.narrowed.append(plan.narrowed)
    n, cols, stride = plan.n, plan.cols, plan.stride
    regs = []
    b = st.builder
    for k, side in enumerate(sides):
        start, vw = side.start, side.view
        is_strided = stride is not None and (k == 0) == strided_is_src
        if cols is not None:  # narrowed rows of a partial innermost tile (D-LOW-PEEL)
            assert stride is not None
            shape = [n // stride[1], cols]
            strides = [stride[0], 1] if is_strided else [stride[1], 1]
        elif is_strided and stride is not None and stride[0] != stride[1]:
            shape, strides = [n // stride[1], stride[1]], [stride[0], 1]
        else:
            shape, strides = contiguous_box(vw, side.idx, n)
        check_bounds(op, vw, start, shape, strides)
        with b.located(op.location):
            regs.append(region(ctx, b, vw, start, shape, strides, op))
    return regs[0], regs[1]


HANDLERS: dict[type[Operation], Handler] = {
    DeclaredBuffer: lower_alloc,
    memref.CopyOp: lower_copy,
    MemRefCopyOp: lower_copy,
    ElementCopyOp: lower_element_copy,  # D-LOW-SCALAR-COPY
    AffineDmaStartOp: lower_dma_start,
    AffineDmaWaitOp: lower_dma_wait,
    **{
        cls: lower_scalar_access
        for cls in (
            affine.LoadOp,
            affine.StoreOp,
            memref.LoadOp,
            memref.StoreOp,
        )
    },
    # no terminator: each is its parent's (`Lowerer.block_ops`, D-LOW-WALK);
    # deallocations and alignment hints are gone (`nem-drop-memref-hints`)
}
