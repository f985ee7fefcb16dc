"""Partial tiles (D-LOW-PEEL): a pure analysis.

Tile sizes that do not divide a loop leave a last, smaller tile.  The
lowering peels it (a NEM loop over the full tiles, then the last iteration
with constant indices).  This module decides, without building IR:

* which `affine.min`/`affine.max` (op or loop bound) makes a loop's last tile
  partial (`partial_tile_op`, `nonuniform_minmax`);
* the shape of a DMA of a partial tile (`plan_dma`): upstream copies the full
  tile's constant bounding box, whose rest lies outside the memref (clipped
  to whole rows) or runs past the end of a dimension into the next row or
  slice (narrowed rows, clipped rows);
* whether each narrowing is exact (`check_narrowed`): nothing in the scope
  uses the elements left out, and a narrowed write-back skips only undefined
  elements or elements it read from the very same addresses.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineMap

from nem.dialect.diagnostics import SourceLoc
from nem.passes.lowering.affine_algebra import (
    Aff,
    Var,
    eval_map,
    pick_minmax,
    resolve_index,
)
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.structure import allocation
from nem.passes.lowering.views import View, contiguous_box, last_offset, row_major

MINMAX_OPS = ("affine.min", "affine.max")


def minmax_map(op: Operation) -> AffineMap:
    """The map of an `affine.min` (xDSL's) or `affine.max` (ours): a property."""
    attr = op.properties["map"]
    assert isinstance(attr, AffineMapAttr)
    return attr.data


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RegionAccess:
    """A region the lowering made, as the exactness checks see it."""

    view: View
    start: Aff
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    anchor: Operation | None
    """The MLIR op the region was made for."""


@dataclass(frozen=True)
class NarrowedDma:
    """A DMA narrowed to `rows` rows of `cols` of its `stride[1]`-element rows."""

    op: Operation
    read: bool
    """True when the DMA reads the memref (fills the fast buffer)."""
    fast: View
    fstart: Aff
    mem: SSAValue
    """The memref on the strided (slow) side."""
    mem_buffer: SSAValue
    start: Aff
    stride: tuple[int, int]
    cols: int
    rows: int
    n: int
    at: int
    """Position in the scope's region log when it was made."""


@dataclass
class PeelScope:
    """The scope of the exactness checks: a peeled iteration, or the
    function outside any (a DMA row leaving its memref where upstream
    unrolled a loop)."""

    loop: Operation
    owners: tuple[Operation, ...]
    """The loop and the ops that belong to it (a re-rolled pipelined loop's
    last iteration, `reroll.last_iteration`)."""
    log: list[RegionAccess] = field(default_factory=list)
    narrowed: list[NarrowedDma] = field(default_factory=list)


@dataclass(frozen=True)
class DmaSide:
    """One side of a DMA: its view and evaluated indices."""

    view: View
    idx: tuple[Aff, ...]

    @property
    def start(self) -> Aff:
        return self.view.start(self.idx)


@dataclass
class DmaPlan:
    """What a DMA of `n` elements becomes: `n` after clipping, the narrowed
    row length `cols` (None: whole rows), the stride pair used."""

    n: int
    cols: int | None
    stride: tuple[int, int] | None
    narrowed: NarrowedDma | None = None
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------
# Which loops have a partial last tile
# ---------------------------------------------------------------------------


class OutsideEnv(Mapping[SSAValue, Aff]):
    """The bindings of `env` for values defined outside `op`: those defined
    in its body may be stale, from an earlier lowering of the loop (a peeled
    outer iteration lowers it again)."""

    def __init__(self, env: Mapping[SSAValue, Aff], op: Operation) -> None:
        self.env, self.op = env, op

    def __contains__(self, v: object) -> bool:
        return isinstance(v, SSAValue) and v in self.env and not defined_in(v, self.op)

    def __getitem__(self, v: SSAValue) -> Aff:
        if v not in self:
            raise KeyError(v)
        return self.env[v]

    def __iter__(self) -> Iterator[SSAValue]:
        return (v for v in self.env if v in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def defined_in(v: SSAValue, op: Operation) -> bool:
    """Whether `v` is a result or block argument inside `op`."""
    owner = v.owner
    defining = owner.parent_op() if isinstance(owner, Block) else owner
    return defining is not None and op.is_ancestor(defining)


def nonuniform_minmax(
    op: affine.ForOp,
    lb: Aff,
    step: int,
    trip: int,
    env: Mapping[SSAValue, Aff],
) -> Operation | None:
    """The first affine.min/max (op or min/max loop bound) in the body of
    `op` whose winning candidate is not the same in every iteration: the
    last tile is partial and is peeled (D-LOW-PEEL).  Its operands are read
    through applies and `arith` index ops alike (`resolve_index` with
    `arith_ops`): the same value, the same peel, whether
    `nem-fold-index-arith` rewrote them or not (D-LOW-AFFINE, session 34)."""
    x = lb + Aff.atom(Var(None, "x", trip)).scale(step)
    outside = OutsideEnv(env, op)
    local: dict[SSAValue, Aff] = {op.body.block.args[0]: x}
    o: Operation  # (iterating a block's ops gives Any in xDSL 0.74)
    for top in op.body.block.ops:
        for o in top.walk():
            if o.name in MINMAX_OPS:
                bounds = [(minmax_map(o), tuple(o.operands), o.name == "affine.min")]
            elif isinstance(o, affine.ForOp):
                bounds = [
                    (o.lowerBoundMap.data, tuple(o.lowerBoundOperands), False),
                    (o.upperBoundMap.data, tuple(o.upperBoundOperands), True),
                ]
            else:
                continue
            for m, operands, is_min in bounds:
                vals = [resolve_index(v, local, outside, arith_ops=True) for v in operands]
                if len(m.results) < 2 or any(v is None for v in vals):
                    continue
                try:
                    if pick_minmax(eval_map(m, [v for v in vals if v is not None]), is_min) is None:
                        return o
                except ValueError:
                    continue
    return None


def partial_tile_op(
    op: affine.ForOp, lb: Aff, ub: Aff | None, step: int, trip: int, env: Mapping[SSAValue, Aff]
) -> Operation | None:
    """The affine.min/max (op or max/min loop bound) that makes the last
    tile of `op` partial: one whose winning candidate is not the same in
    every iteration (e.g. `min(32, 100 - 32 * i)` after
    -affine-loop-normalize), else the first one of the body when the loop's
    step does not divide its range (`ub`: the evaluated upper bound)."""
    found = nonuniform_minmax(op, lb, step, trip, env)
    if found is not None:
        return found
    if ub is None or not (ub - lb).is_const() or (ub - lb).const % step == 0:
        return None
    for o in op.walk():
        if o is not op and is_partial_bound(o):
            return o
    return None


def is_partial_bound(o: Operation) -> bool:
    """Whether `o` may make the last tile of a loop around it partial: an
    affine.min/max, or an affine.for with a min/max bound (`partial_tile_op`
    returns only such ops; `peeled_loops.PeeledLoops`)."""
    return o.name in MINMAX_OPS or (
        isinstance(o, affine.ForOp)
        and (len(o.lowerBoundMap.data.results) > 1 or len(o.upperBoundMap.data.results) > 1)
    )


# ---------------------------------------------------------------------------
# DMA shapes of partial tiles
# ---------------------------------------------------------------------------


def plan_dma(
    op: Operation,
    n: int,
    stride: tuple[int, int] | None,
    strided_is_src: bool,
    src: DmaSide,
    dst: DmaSide,
    scope: PeelScope,
    peeled: bool,
) -> DmaPlan:
    """The element count of a DMA clipped to the prefix that lies inside
    both memrefs: affine-data-copy-generate copies the full tile's
    constant bounding box, whose rest is out of bounds (undefined in MLIR)
    and never used by a partial tile (D-LOW-PEEL; also outside a peeled
    loop, where upstream unrolled a pipelined loop).  Strided rows that
    run past the end of the dimension they step along (into the next
    slice of an outer dimension) are clipped to those inside it
    (`_spilled_rows`).  Also the narrowed row length (`cols`, else None)
    when the DMA's rows run past the end of a dimension (`_narrow_run`),
    in a peeled partial tile or not (upstream's unrolled pipelined loops:
    a write-back would otherwise store the fast buffer's undefined rest
    over the next row or slice).  A contiguous DMA is narrowed as one
    strided row of `n` (the stride it returns).  Every narrowing is
    recorded for `check_narrowed` (`DmaPlan.narrowed`).  `peeled`: inside
    a peeled iteration."""
    plan = DmaPlan(n, None, stride)
    sides = (src, dst)
    keep = n
    cols: int | None = None
    rows: int | None = None
    if stride is None:
        strided = sides[0 if strided_is_src else 1]
        cols = _narrow_run(op, n, strided, (n, n), plan.notes)
        if cols is not None:
            plan.cols, plan.stride = cols, (n, n)
            plan.narrowed = _narrowed(op, n, None, cols, (n, n), strided_is_src, sides, scope)
            return plan
    for k, side in enumerate(sides):
        vw = side.view
        rng = (side.start - vw.base).bounds()
        if rng is None or not vw.shape:
            continue
        span = last_offset(vw.shape, vw.strides) + 1
        is_strided = stride is not None and stride[0] != stride[1] and (k == 0) == strided_is_src
        count = 0
        if is_strided:
            assert stride is not None
            st, per = stride
            rows = _spilled_rows(op, n, side, stride, plan.notes)
            count = n // per if rows is None else rows
            cols = _narrow_run(op, n, side, stride, plan.notes)
        oks = []
        for lo in rng:  # the count must not depend on the loop variables
            if is_strided:
                kept = 0
                width = per if cols is None else cols
                while kept < count and lo + kept * st + width <= span:
                    kept += 1
                if kept < count and lo + kept * st < span and not peeled:
                    # outside a peeled tile nothing proves the in-bounds part
                    # of that row unused: dropping it could be wrong
                    raise reject(
                        op,
                        f"the access runs outside {vw.name} ({span} "
                        "elements) in the middle of a strided row",
                        "choose tile sizes that divide the iteration space",
                    )
                oks.append(kept * per)
            else:
                _, box_strides = contiguous_box(vw, side.idx, n)
                step = box_strides[-1] if box_strides else 1
                if step == 0:  # the box reads one element n times (a broadcast)
                    oks.append(n if 0 <= lo < span else 0)
                else:
                    oks.append(min(n, max(0, -(-(span - lo) // step))))
        if oks[0] != oks[1]:
            raise reject(
                op,
                f"the part of this DMA of a partial tile inside {vw.name} "
                "depends on the loop variables; NEM shapes are static",
            )
        keep = min(keep, oks[0])
    if cols is not None or rows is not None:
        assert stride is not None
        plan.narrowed = _narrowed(op, n, rows, cols, stride, strided_is_src, sides, scope)
    plan.cols = cols
    if keep == n:
        return plan
    if keep <= 0 or (stride is not None and keep % stride[1]):
        raise reject(
            op,
            "this DMA of a partial tile lies outside its memref and cannot be "
            "clipped to whole rows",
        )
    if rows is None or stride is None or keep < rows * stride[1]:
        plan.notes.append(
            f"DMA at {SourceLoc.of(op)} of the partial tile clipped to {keep} "
            f"of {n} elements (the rest is outside the memref)"
        )
    plan.n = keep
    return plan


def _spilled_rows(
    op: Operation, n: int, side: DmaSide, stride: tuple[int, int], notes: list[str]
) -> int | None:
    """The number of rows of a strided DMA that lie inside the dimension
    they step along when they run past its end into the next slice of an
    outer dimension (a partial tile along a middle dimension, e.g. of a
    3-D tile copied one slice per DMA), else None.  The rows are
    `stride[0]` elements apart, the stride of dimension d of the view; rows
    that start at index 0 of d and cover whole slices of it continue in
    dimension d - 1 (a tile spanning all of d), where the same applies.
    Rows past the end of dimension 0 leave the memref: `plan_dma` clips
    those.  The rows dropped here are checked by `check_narrowed`."""
    vw, idx = side.view, side.idx
    st, per = stride
    count = n // per
    dims = [d for d in range(1, len(vw.shape)) if vw.strides[d] == st]
    unit = 1  # rows per index of dimension k
    for k in range(dims[0] if dims else 0, 0, -1):
        b = idx[k].bounds()
        if b is None or b[1] + -(-count // unit) <= vw.shape[k]:
            return None
        if (
            b == (0, 0)
            and count % (vw.shape[k] * unit) == 0
            and vw.strides[k - 1] == vw.shape[k] * vw.strides[k]
        ):
            unit *= vw.shape[k]  # whole slices of k: rows go on along k - 1
            continue
        # from a start that depends on the loop variables: the rows inside at
        # the last start, inside at every start (NEM shapes are static)
        rows = (vw.shape[k] - b[1]) * unit
        if rows <= 0:
            raise reject(
                op,
                f"the rows of this strided DMA run past the end of dimension "
                f"{k} of {vw.name} from a start that depends on the loop "
                f"variables, all of them at its last start ({b[1]}); NEM shapes "
                "are static",
                "choose tile sizes that divide the iteration space",
            )
        notes.append(
            f"DMA at {SourceLoc.of(op)} of the partial tile clipped to {rows} "
            f"of {count} rows (a partial tile along dimension {k} of {vw.name})"
        )
        return rows
    return None


def _narrow_run(
    op: Operation, n: int, side: DmaSide, stride: tuple[int, int], notes: list[str]
) -> int | None:
    """The in-range element count of each row (`stride[1]` elements) of a
    DMA of `n` elements whose rows pass the end of a dimension of the view
    from a constant position (`_overflowing_run`): the elements past the
    end belong to the next row or slice.  None when they stay inside it."""
    vw = side.view
    run = _overflowing_run(vw, side.idx, stride[1])
    if run is None:
        return None
    d, lo, inner = run
    cols = (vw.shape[d] - lo) * inner
    if vw.strides[-1] != 1 or cols <= 0:
        raise reject(
            op,
            f"the rows of this DMA run past the end of dimension {d} of "
            f"{vw.name} (a partial tile along it); NEM cannot narrow them exactly: "
            + (
                "the innermost dimension is not contiguous"
                if vw.strides[-1] != 1
                else "the rows start outside the memref"
            ),
            "choose tile sizes that divide the iteration space",
        )
    notes.append(
        f"DMA at {SourceLoc.of(op)} of the partial tile narrowed to rows of "
        f"{cols} of {stride[1]} elements (a partial tile along dimension {d} "
        f"of {vw.name})"
    )
    return cols


def _overflowing_run(vw: View, idx: Sequence[Aff], n: int) -> tuple[int, int, int] | None:
    """For a contiguous DMA of `n` elements from `idx` of `vw`: (d, start,
    inner) when the run covers whole trailing dimensions after dimension
    d > 0 (`inner` elements per index of d) and its n // inner indices of d,
    from the constant `start`, pass the end of dimension d (a partial tile
    along it whose run spills into the next slice), else None."""
    inner = 1
    for d in reversed(range(len(vw.shape))):
        if vw.strides[d] != inner:
            return None
        if (
            n % inner == 0
            and n // inner <= vw.shape[d]
            and all(a.is_const() and a.const == 0 for a in idx[d + 1 :])
        ):
            b = idx[d].bounds()
            if d == 0 or b is None or b[1] + n // inner <= vw.shape[d]:
                return None  # (past the end of the memref: clipped, not narrowed)
            return (d, b[0], inner) if b[0] == b[1] else None
        inner *= vw.shape[d]
    return None


def _narrowed(
    op: Operation,
    n: int,
    rows: int | None,
    cols: int | None,
    stride: tuple[int, int],
    strided_is_src: bool,
    sides: tuple[DmaSide, DmaSide],
    scope: PeelScope,
) -> NarrowedDma:
    """The record of a DMA narrowed to `rows` rows (None: all) of `cols`
    columns (None: all) for the exactness checks of its scope.  Its
    fast-side buffer must be private to that scope (a `memref.alloc` in the
    peeled loop, or used only by it), so no use outside the scope sees the
    elements left out."""
    assert hasattr(op, "src") and hasattr(op, "dst")
    fast_val: SSAValue = op.dst if strided_is_src else op.src
    fast = sides[1] if strided_is_src else sides[0]
    slow = sides[0] if strided_is_src else sides[1]

    def no(why: str) -> Exception:
        return reject(
            op,
            f"the rows of this DMA run past the end of a dimension of "
            f"{slow.view.name} (a partial tile along it); NEM cannot narrow them "
            f"exactly: {why}",
            "choose tile sizes that divide the iteration space",
        )

    if row_major(fast.view.shape) != tuple(fast.view.strides):
        raise no(f"{fast.view.name} is not a contiguous buffer")
    alloc = fast_val.owner
    if not (
        isinstance(alloc, Operation)
        and allocation(alloc) == "memref.alloc"
        and (
            scope.loop.is_ancestor(alloc)
            or all(
                isinstance(u.operation, memref.DeallocOp)
                or any(o.is_ancestor(u.operation) for o in scope.owners)
                for u in alloc.results[0].uses
            )
        )
    ):
        raise no(f"{fast.view.name} is used outside the peeled loop")
    return NarrowedDma(
        op=op,
        read=strided_is_src,
        fast=fast.view,
        fstart=fast.start,
        mem=op.src if strided_is_src else op.dst,
        mem_buffer=slow.view.buffer,
        start=slow.start,
        stride=stride,
        cols=stride[1] if cols is None else cols,
        rows=n // stride[1] if rows is None else rows,
        n=n,
        at=len(scope.log),
    )


# ---------------------------------------------------------------------------
# Exactness of the narrowings of one scope
# ---------------------------------------------------------------------------


def check_narrowed(scope: PeelScope) -> None:
    """Exactness of the narrowed DMAs of one peeled iteration (D-LOW-PEEL).
    (1) Every region on a narrowed fast buffer made in the iteration (the
    buffer is allocated in the loop body, so these are all its uses) lies in
    the first `cols` elements of its `per`-element rows, and in the first
    `rows` rows of the DMA: the elements the narrowing leaves out are never
    read, so a narrowed read changes nothing observable.  (2) A narrowed
    write-back skips elements that in MLIR hold either nothing defined (no
    DMA wrote the fresh buffer: a fresh `memref.alloc` is undefined, so
    storing them stores undefined values) or what a read DMA of the same
    memref at the same start brought in, with no region on that memref in
    between: storing them back is the identity."""
    log = scope.log
    for rec in scope.narrowed:
        op, fvw, per, cols = rec.op, rec.fast, rec.stride[1], rec.cols
        for acc in log:
            if acc.view.buffer is not fvw.buffer:
                continue
            rel = acc.start - rec.fstart
            span = last_offset(acc.shape, acc.strides)
            bounds = rel.bounds()
            if bounds is not None and (bounds[1] + span < 0 or bounds[0] >= rec.n):
                continue  # outside what the DMA fills (e.g. the other ping-pong slot)
            kept = rec.rows * per
            if not (
                acc.shape
                and _fits(rel, acc, rec.fstart, per, cols)
                and _fits(rel, acc, rec.fstart, rec.n, kept)
            ):
                raise reject(
                    op,
                    f"this strided DMA of a partial tile cannot be narrowed to "
                    f"{rec.rows} rows of {cols} of {per} elements: another "
                    f"access to {fvw.name} may use the elements left out",
                    "choose tile sizes that divide the iteration space",
                )
        if rec.read:
            continue
        fills = [r for r in scope.narrowed if r.read and r.fast.buffer is fvw.buffer]
        for r in fills:
            same = (
                r.mem is rec.mem
                and r.start == rec.start
                and r.stride == rec.stride
                and r.at < rec.at
            )
            between = [
                x
                for x in log[r.at : rec.at]
                if x.view.buffer is rec.mem_buffer and x.anchor is not r.op
            ]
            if not same or between:
                raise reject(
                    op,
                    "this write-back of a partial tile cannot be narrowed: "
                    f"the elements it would skip hold data of {fvw.name} that is "
                    "not what the same addresses held",
                    "choose tile sizes that divide the iteration space",
                )


def _col_bounds(a: Aff, per: int) -> tuple[int, int] | None:
    """The range of the column that the offset `a` falls in, in rows of `per`
    elements, when its terms that do not move it by whole rows keep it inside
    one row (else None): those terms plus the remainder of the constant."""
    b = Aff({k: v for k, v in a.terms.items() if v[1] % per}, a.const % per).bounds()
    return b if b is not None and b[0] >= 0 and b[1] < per else None


def _fits(rel: Aff, acc: RegionAccess, fstart: Aff, pitch: int, width: int) -> bool:
    """Whether an access of a buffer that a narrowed DMA fills from `fstart`
    (`rel` = its start - fstart) stays in the first `width` of each `pitch`
    elements: counted from the DMA's start, or on the buffer's own grid when
    the DMA starts on it (e.g. a ping-pong slot).  True when nothing is left
    out (`width == pitch`)."""
    starts = ([rel] if rel.nonneg() else []) + (
        [acc.start] if _col_bounds(fstart, pitch) == (0, 0) else []
    )
    return width == pitch or any(
        _offsets_within(x, pitch, width, acc.shape, acc.strides) for x in starts
    )


def _offsets_within(
    x: Aff, pitch: int, width: int, shape: Sequence[int], strides: Sequence[int]
) -> bool:
    """Whether every element `x + sum(i_d * strides[d])` of an access of
    `shape` provably lies in the first `width` elements of its `pitch`-element
    row: the column of `x` plus what the dimensions that do not step whole
    rows add stays below `width`."""
    col = _col_bounds(x, pitch)
    in_row = sum((d - 1) * s for d, s in zip(shape, strides) if s % pitch)
    return col is not None and col[1] + in_row < width
