"""The strides of the DMAs upstream's copy generation emits (D-COMPILE-DMA-STRIDES).

`affine-data-copy-generate{generate-dma}` stages a region of a memref (its
constant bounding box, the fast buffer's shape) with one `affine.dma_start`
of `prod(box)` elements, and decides in `getMultiLevelStrides`
(mlir/lib/Dialect/Affine/Utils/LoopUtils.cpp) where the region needs a
stride: at dimension d when the box is shorter than the memref along d
*and* the box's next-major dimension d - 1 has more than one index.  What
matters is whether the box's part inside d - 1 (dimensions d, d + 1, ...)
fills the memref's: when d is a unit dimension of the memref (the box is
not shorter there) and a dimension further in is partial, the region is
not contiguous, yet upstream emits a contiguous DMA (or a
stride at an inner level only, which steps over the wrong rows).  Examples
(`docs/upstream-reports.md`):

    region [5,1,1,1] of memref<5x1x1x3>     (a 4-way split of a 4-D transpose)
      upstream: 5 contiguous elements        needed: 5 rows of 1, stride 3
    region [3,1,11,12] of memref<3x1x12x12>  (a strided pooling window, NHWC)
      upstream: 396 contiguous elements      needed: 3 rows of 132, stride 144
    region [3,1,2,5] of memref<3x1x4x6>
      upstream: rows of 5, stride 6          needed: two levels (6 and 24)

The program reads (or writes back) the wrong elements, verifies clean and
runs race-free: a silent wrong result (issue 31).

`repair` runs right after the copy generation, on what it produced (before
`affine-pipeline-data-transfer` double-buffers the DMAs) and checks every
DMA between a fast buffer and a memref against the rule that looks at all
inner dimensions (`stride_levels`).  A DMA that needs one level and lacks
it (or has another) gets that level's stride operands; one that needs more levels
than `affine.dma_start` has (upstream would have refused such a region, had
it seen it) becomes a point-wise copy nest over the box, which the lowering
takes as one transfer of the whole box (D-LOW-COPYNEST), with its wait and
tag removed.  Every DMA left is exact for what it stages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import affine, arith

from nem.compile.engines import perfect_nest
from nem.compile.nest_ir import ops_named


def stride_levels(shape: Sequence[int], box: Sequence[int]) -> list[tuple[int, int]]:
    """The (stride, elements per stride) levels, innermost first, that a DMA
    of the row-major `box` of a row-major memref of `shape` needs.  The
    box's dimensions with more than one index, outermost first, each step
    `prod(shape[e+1:])` elements; neighbours where the outer step is the
    inner one's whole extent merge into one run.  A last run of step 1 is
    the contiguous chunk; every other run is a level whose chunk is all the
    runs inside it.  (Upstream decides per dimension from the next one
    only, and misses a partial dimension behind a unit dimension.)"""
    runs: list[tuple[int, int]] = []  # (count, step), outermost first
    for e, n in enumerate(box):
        step = math.prod(shape[e + 1 :])
        if n == 1:
            continue
        if runs and runs[-1][1] == n * step:
            runs[-1] = (runs[-1][0] * n, step)
        else:
            runs.append((n, step))
    per = runs.pop()[0] if runs and runs[-1][1] == 1 else 1
    levels = []
    for count, step in reversed(runs):
        levels.append((step, per))
        per *= count
    return levels


@dataclass(frozen=True)
class _Dma:
    """An `affine.dma_start` taken apart (operands: src, its map operands,
    dst, its map operands, tag, its map operands, count[, stride, per])."""

    op: ir.Operation
    src: ir.Value
    src_ops: list[ir.Value]
    dst: ir.Value
    dst_ops: list[ir.Value]
    tag: ir.Value
    rest: list[ir.Value]
    """The tag's map operands, the element count, the stride operands."""

    @staticmethod
    def of(op: ir.Operation) -> _Dma:
        ops = list(op.operands)
        n_src = _map(op, "src_map").n_inputs
        n_dst = _map(op, "dst_map").n_inputs
        d = 1 + n_src
        return _Dma(
            op,
            ops[0],
            ops[1:d],
            ops[d],
            ops[d + 1 : d + 1 + n_dst],
            ops[d + 1 + n_dst],
            ops[d + 2 + n_dst :],
        )

    @property
    def stride(self) -> list[tuple[int, int]] | None:
        """The stride level the op has ([] none; None: not constants)."""
        n_tag = _map(self.op, "tag_map").n_inputs
        extra = self.rest[n_tag + 1 :]
        if not extra:
            return []
        vals = [_const(v) for v in extra]
        if vals[0] is None or vals[1] is None:
            return None
        return [(vals[0], vals[1])]


def _map(op: ir.Operation, key: str) -> ir.AffineMap:
    return ir.AffineMapAttr(op.attributes[key]).value


def _const(v: ir.Value) -> int | None:
    from nem.compile.nest_ir import const_index

    return const_index(v)


def _space(v: ir.Value) -> int:
    ms = ir.MemRefType(v.type).memory_space
    return ir.IntegerAttr(ms).value if ms is not None else 0


def _row_major(t: ir.MemRefType) -> bool:
    """A static memref laid out row-major from offset 0 (what upstream stages)."""
    if not t.has_static_shape:
        return False
    strides, offset = t.get_strides_and_offset()
    row_major: bool = offset == 0 and strides == [
        math.prod(t.shape[d + 1 :]) for d in range(t.rank)
    ]
    return row_major


def repair(fn: ir.Operation) -> int:
    """Make every DMA of `fn` between a fast buffer (memory space != 0) and
    a memref (space 0, row-major) stage exactly the fast buffer's box:
    stride operands added or corrected, or a copy nest where one stride
    level is not enough.  Returns the number of DMAs changed."""
    changed = 0
    for op in ops_named(fn, "affine.dma_start"):
        dma = _Dma.of(op)
        read = _space(dma.src) == 0 and _space(dma.dst) != 0
        write = _space(dma.dst) == 0 and _space(dma.src) != 0
        if not (read or write):
            continue
        fast, slow = (dma.dst, dma.src) if read else (dma.src, dma.dst)
        ft, st = ir.MemRefType(fast.type), ir.MemRefType(slow.type)
        if not (_row_major(ft) and _row_major(st)) or ft.rank != st.rank:
            continue
        need = stride_levels(st.shape, ft.shape)
        have = dma.stride
        if have is None or have == need:
            continue
        if len(need) == 1:
            _set_stride(dma, need[0])
        else:
            _copy_nest(dma, ft.shape)
        changed += 1
    return changed


def _set_stride(dma: _Dma, level: tuple[int, int]) -> None:
    """Rebuild the DMA with the stride operands of `level`."""
    op = dma.op
    n_tag = _map(op, "tag_map").n_inputs
    ip = ir.InsertionPoint(op)
    with op.location:
        stride = arith.ConstantOp(ir.IndexType.get(), level[0], ip=ip).result
        per = arith.ConstantOp(ir.IndexType.get(), level[1], ip=ip).result
        operands = [
            dma.src,
            *dma.src_ops,
            dma.dst,
            *dma.dst_ops,
            dma.tag,
            *dma.rest[: n_tag + 1],
            stride,
            per,
        ]
        ir.Operation.create(
            "affine.dma_start",
            operands=operands,
            attributes={k: op.attributes[k] for k in op.attributes},
            ip=ip,
        )
    op.erase()


def _shifted(amap: ir.AffineMap, n_ivs: int) -> ir.AffineMap:
    """`amap` with `n_ivs` more dimensions after its own (symbols after
    them), each added to the result of the same position: the element at
    offset (iv_0, .., iv_r-1) from the map's start."""
    exprs = [e + ir.AffineDimExpr.get(amap.n_dims + k) for k, e in enumerate(amap.results)]
    return ir.AffineMap.get(amap.n_dims + n_ivs, amap.n_symbols, exprs)


def _copy_nest(dma: _Dma, box: Sequence[int]) -> None:
    """Replace the DMA by a point-wise copy of `box` (loads from its source,
    stores into its destination, each from the DMA's start indices); its
    wait and its tag go too."""
    op = dma.op
    with op.location:
        _, ip, ivs = perfect_nest(box, ir.InsertionPoint(op), op.location)

        def operands(key: str, ops: list[ir.Value]) -> tuple[ir.AffineMap, list[ir.Value]]:
            amap = _map(op, key)
            return _shifted(amap, len(ivs)), [*ops[: amap.n_dims], *ivs, *ops[amap.n_dims :]]

        smap, sops = operands("src_map", dma.src_ops)
        dmap, dops = operands("dst_map", dma.dst_ops)
        elem = ir.MemRefType(dma.src.type).element_type
        value = affine.AffineLoadOp(elem, dma.src, sops, smap, ip=ip).result
        affine.AffineStoreOp(value, dma.dst, dops, dmap, ip=ip)
    tag = dma.tag
    op.erase()
    for use in list(tag.uses):
        if use.owner.name in ("affine.dma_wait", "memref.dealloc"):
            use.owner.erase()
    owner = tag.owner
    if (
        not list(tag.uses)
        and isinstance(owner, ir.OpView | ir.Operation)
        and owner.name == "memref.alloc"
    ):
        owner.erase()
