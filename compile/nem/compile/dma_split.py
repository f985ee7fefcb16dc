"""Large tile copies spread over an engine's DMAs (decision D-COMPILE-DMA-SPLIT).

`structured.promote` stages each operand of a tile with one `linalg.copy`,
which the lowering makes one `transfer`, run by one DMA of its engine while
the others idle: a 3x3 convolution's 144 KiB weight slice takes 4,608 cycles
on one of npm_pro_x1's four DMAs, and the next convolution waits for it.
Here a copy between L1 and a slower memory inside a tile loop, spanning at
least `MIN_BYTES`, becomes up to one copy per DMA, each a slice of the box
along its outermost dimension larger than 1 (copies made once, outside
loops, stay whole: each slice is one more task for the lowering's analyses):

    linalg.copy ins(%w : memref<3x3x128x32xf32, strided<...>>)
                outs(%v : memref<3x3x128x32xf32, 2>)
  ==>
    %w0 = memref.subview %w[0, 0, 0, 0] [1, 3, 128, 32] [1, 1, 1, 1]
    %v0 = memref.subview %v[0, 0, 0, 0] [1, 3, 128, 32] [1, 1, 1, 1]
    linalg.copy ins(%w0) outs(%v0)                    (and rows 1, 2 alike)

The slices are disjoint and together the box, so every element is moved
once, as before: the results are bit-identical.  A slice along the
outermost dimension of a row-major box spans bytes no other slice spans,
so the slices of one copy do not conflict with one another (the hazard
analysis orders nothing between them) and the timed model puts them on
different DMAs.  Each slice is at least `MIN_PIECE` bytes (a transfer's
fixed latency stays small beside its bytes).  Runs after the hoist
(D-COMPILE-HOIST), whose pattern is one copy per buffer, and only with
`--split-units` (D-COMPILE-SPLIT-OPT): each slice is one more task for the
lowering's analyses, ResNet-50's compile +61% with the NMU split.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import memref

from nem.compile.target import FAST_SPACE
from nem.passes.split_rule import MIN_BYTES, MIN_PIECE, even_parts

# MIN_BYTES: copies in a tile loop spanning fewer bytes stay whole; MIN_PIECE:
# no slice smaller (bytes) -- `nem-split-transfers`' thresholds (one home).
MIN_BYTES_ONCE = 1 << 62
"""The same as `MIN_BYTES` for copies outside loops, made once: each slice
is one more task for the lowering's analyses to order (the compile's time)."""


def in_loop(op: ir.Operation) -> bool:
    """Whether `op` is inside a tile loop (its tasks run once per iteration)."""
    p = op.parent
    while p is not None:
        if p.name in ("scf.for", "affine.for"):
            return True
        p = p.parent
    return False


def _space(t: ir.MemRefType) -> int:
    s = t.memory_space
    space: int = 0 if s is None else ir.IntegerAttr(s).value
    return space


def _extent(t: ir.MemRefType) -> int:
    """The bytes a box of type `t` spans (its first to its last element): what
    a transfer into it is charged (D-RT-COST)."""
    strides, _ = t.get_strides_and_offset()
    last: int = sum((n - 1) * s for n, s in zip(t.shape, strides))
    width: int = t.element_type.width
    return (last + 1) * max(1, width // 8)


def _strided(t: ir.MemRefType) -> bool:
    """A static box with static, non-negative strides."""
    if not t.has_static_shape or t.rank == 0:
        return False
    try:
        strides, _ = t.get_strides_and_offset()
    except (ValueError, ir.MLIRError):  # a layout without strides: keep it whole
        return False
    return all(t.is_static_stride_or_offset(s) and s >= 0 for s in strides) and hasattr(
        t.element_type, "width"
    )


def _splittable(op: ir.Operation, dmas: int) -> tuple[int, list[tuple[int, int]]] | None:
    """(dimension, [(offset, size), ...]) of the slices a copy becomes, or None."""
    if op.name != "linalg.copy" or len(op.operands) != 2:
        return None
    src, dst = op.operands[0].type, op.operands[1].type
    if not (isinstance(src, ir.MemRefType) and isinstance(dst, ir.MemRefType)):
        return None
    if (_space(src) >= FAST_SPACE) == (_space(dst) >= FAST_SPACE):
        return None  # not a DMA between L1 and a slower memory
    if not (_strided(src) and _strided(dst)):
        return None
    size = max(_extent(src), _extent(dst))
    dim = next((d for d, n in enumerate(src.shape) if n > 1), None)
    if size < (MIN_BYTES if in_loop(op) else MIN_BYTES_ONCE) or dim is None:
        return None
    n = src.shape[dim]
    k = min(dmas, n, size // MIN_PIECE)
    if k < 2:
        return None
    return dim, even_parts(n, k)


def split_copies(fn: ir.Operation, dmas: int) -> int:
    """Split every large L1 staging copy of `fn` into up to `dmas` copies of
    slices (the module doc); returns how many copies were split."""
    if dmas < 2:
        return 0
    todo: list[tuple[ir.Operation, tuple[int, list[tuple[int, int]]]]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        plan = _splittable(op, dmas)
        if plan is not None:
            todo.append((op, plan))
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    for op, (dim, pieces) in todo:
        shape = list(ir.MemRefType(op.operands[0].type).shape)
        with op.location:
            for at, m in pieces:
                offsets = [0] * len(shape)
                offsets[dim] = at
                sizes = list(shape)
                sizes[dim] = m
                ones = [1] * len(shape)
                ip = ir.InsertionPoint(op)
                src = memref.subview(op.operands[0], offsets, sizes, ones, ip=ip)
                dst = memref.subview(op.operands[1], offsets, sizes, ones, ip=ip)
                new = op.clone(ip)
                new.operands[0] = src
                new.operands[1] = dst
        op.erase()
    return len(todo)
