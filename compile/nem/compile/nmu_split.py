"""A tile's convolution spread over its engine's NMUs (decision D-COMPILE-NMU-SPLIT).

After tiling, each tile is one `linalg.conv_2d_nhwc_hwcf` on L1 buffers,
which the lowering makes one `conv2d` task (and an `add` into the output
tile, D-LOW-ACCUM): one of npm_pro_x1's two NMUs per engine computes it
while the other idles, since the next tile's convolution waits for this
tile's copies.  Here a tile's convolution of at least `MIN_MACS` becomes one
convolution per NMU, each over a band of its output rows:

    linalg.conv_2d_nhwc_hwcf ins(%x, %w : memref<1x9x16x128xf32, 2>, ...)
                             outs(%y : memref<1x7x14x32xf32, 2>)
  ==>
    %x0 = memref.subview %x[0, 0, 0, 0] [1, 6, 16, 128] [1, 1, 1, 1]
    %y0 = memref.subview %y[0, 0, 0, 0] [1, 4, 14, 32] [1, 1, 1, 1]
    linalg.conv_2d_nhwc_hwcf {nem_part = 0} ins(%x0, %w) outs(%y0)
    %x1 = memref.subview %x[0, 4, 0, 0] [1, 5, 16, 128] [1, 1, 1, 1]
    %y1 = memref.subview %y[0, 4, 0, 0] [1, 3, 14, 32] [1, 1, 1, 1]
    linalg.conv_2d_nhwc_hwcf {nem_part = 1} ins(%x1, %w) outs(%y1)

Each output element is the same sum over the same window and channels as
before, so the results are bit-identical; a band of whole rows of a batch
of one is contiguous in L1, so the parts write disjoint bytes and run at
once.  `nem_part` numbers the parts and `nem_band = [r0, rows]` places
each band in the whole output: the lowering gives the parts one scratch of
the whole output's shape (D-LOW-ACCUM), each part accumulating in its own
band of it, so the scratch is live across all the parts and `nem-share-
buffers` cannot put one part's accumulator on another's bytes (it did with
a scratch per part, whose lifetimes were disjoint in statement order: the
second part then waited for the first one's add, and the parts ran in
turn).  Convolutions in tile loops are split only with `--split-units`
(D-COMPILE-SPLIT-OPT), after the DMA split; straight-line ones always
(`looped=False`: a few tasks per convolution, not per iteration).

A grouped convolution's engine part (`conv_2d_nhwgc_gfhwc`, which the tile
stage generalizes: a `linalg.generic` with its maps, X `N x H x W x G x C`,
W `G x F x KH x KW x C`, Y `N x OH x OW x G x F`) splits the same way, on
dimension 1 of X and Y (session 34: ShuffleNet's grouped 1x1s at 7x7 ran
one group per engine, one tile, on one NMU of two).  The maps alone make
it exact: each output element reduces over its own window and channels
only, whatever the body, so a band computes the same sums in the same
order; the lowering's window raising gives its bands the same one scratch
(`raise_windows`).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import memref

from nem.compile.conv_forms import DENSE, GROUPED
from nem.compile.dma_split import in_loop
from nem.compile.target import FAST_SPACE
from nem.passes.split_rule import even_parts

MIN_MACS = 1 << 18
"""Convolutions with fewer multiply-accumulates stay whole (a task's fixed
latency and the extra add would outweigh the halved compute)."""
PART = "nem_part"
BAND = "nem_band"
"""`[first output row, output rows of the whole convolution]` of a part."""


def _fast(t: ir.Type) -> bool:
    if not isinstance(t, ir.MemRefType) or not t.has_static_shape:
        return False
    s = t.memory_space
    return s is not None and ir.IntegerAttr(s).value >= FAST_SPACE


def _pair(op: ir.Operation, name: str) -> tuple[int, int]:
    if name not in op.attributes:
        return 1, 1
    vals = list(ir.DenseIntElementsAttr(op.attributes[name]))
    return int(vals[0]), int(vals[1])


def _rows(op: ir.Operation) -> tuple[int, int, int] | None:
    """(window rows, row stride, row dilation) of a convolution the split
    takes: the named dense one, or a generic with the grouped one's maps
    (the module doc, `conv_forms.GROUPED.window`); None for any other op."""
    if op.name == DENSE.name:
        return (
            op.operands[1].type.shape[DENSE.weight_reduction[0]],
            _pair(op, "strides")[0],
            _pair(op, "dilations")[0],
        )
    window = GROUPED.window(op)
    if window is None:
        return None
    strides, dilations = window
    return op.operands[1].type.shape[GROUPED.weight_reduction[0]], strides[0], dilations[0]


def _bands(
    op: ir.Operation, nmus: int, looped: bool, native: frozenset[str]
) -> list[tuple[int, int]] | None:
    """The (first row, rows) of each part's output band, or None (kept whole,
    not in a tile loop as `looped` asks, or of an element type not in
    `native`)."""
    if len(op.operands) != 3 or PART in op.attributes or _rows(op) is None:
        return None
    if str(ir.ShapedType(op.operands[0].type).element_type) not in native:
        return None
    if in_loop(op) != looped:
        return None
    x, w, y = (v.type for v in op.operands)
    if not (_fast(x) and _fast(w) and _fast(y)):
        return None
    n, oh = y.shape[0], y.shape[1]
    window = 1  # the multiply-accumulates per output element: W's size over its output channels
    for d in w.shape:
        window *= d
    macs = window // (w.shape[3] if op.name == DENSE.name else w.shape[0] * w.shape[1])
    for d in y.shape:
        macs *= d
    if n != 1 or oh < 2 or macs < MIN_MACS:
        return None
    k = min(nmus, oh)
    if k < 2:
        return None
    return even_parts(oh, k)


def split_convs(fn: ir.Operation, nmus: int, native: frozenset[str], looped: bool = True) -> int:
    """Split every large L1 convolution of `fn` inside tile loops (`looped`)
    or outside them into up to `nmus` bands of output rows (the module
    doc); returns how many were split.  Only convolutions of the element
    types `native` (the target's `conv2d` variants, `target.variant_types`):
    one of another type runs as an escape-hatch kernel, which its bands
    would only multiply (session 48: 11.7-13.6% more timed cycles on
    npm_pro's f32 convolutions)."""
    if nmus < 2:
        return 0
    todo: list[tuple[ir.Operation, list[tuple[int, int]]]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        bands = _bands(op, nmus, looped, native)
        if bands is not None:
            todo.append((op, bands))
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    i64 = ir.IntegerType.get_signless(64)
    for op, bands in todo:
        x, w, y = op.operands
        xs, ys = list(x.type.shape), list(y.type.shape)
        rows_of = _rows(op)
        assert rows_of is not None
        kh, sh, dh = rows_of
        with op.location:
            for j, (r0, m) in enumerate(bands):
                ip = ir.InsertionPoint(op)
                rows = (m - 1) * sh + (kh - 1) * dh + 1
                xv = _band(x, xs, r0 * sh, rows, ip)
                yv = _band(y, ys, r0, m, ip)
                new = op.clone(ip)
                new.operands[0] = xv
                new.operands[2] = yv
                new.attributes[PART] = ir.IntegerAttr.get(i64, j)
                new.attributes[BAND] = ir.DenseI64ArrayAttr.get([r0, ys[1]])
        op.erase()
    return len(todo)


def _band(v: ir.Value, shape: list[int], first: int, rows: int, ip: ir.InsertionPoint) -> ir.Value:
    """`rows` rows of `v` (dimension 1) from row `first`, all of the rest."""
    ones = [1] * len(shape)
    offsets = [0] * len(shape)
    offsets[1] = first
    return memref.subview(v, offsets, [shape[0], rows, *shape[2:]], ones, ip=ip)
