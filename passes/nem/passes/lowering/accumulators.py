"""Where a convolution, or a band of one, accumulates its output
(D-LOW-ACCUM, D-COMPILE-NMU-SPLIT): apart from the lowerings that use it,
the named convolution's (`compute`) and the raised window's
(`raise_windows`, a grouped convolution's part), which must give the bands
of one split convolution the same one scratch."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import DenseArrayBase
from xdsl.ir import Operation

from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.context import Band, LoweringContext
from nem.passes.lowering.staging import scratch, task_scope
from nem.passes.lowering.state import BlockState
from nem.passes.lowering.views import View


@dataclass(frozen=True)
class Accumulator:
    """Where a convolution (or a band of one) accumulates (D-LOW-ACCUM):
    `view`, from element `start`; and the output rows `adds` = (from, to)
    relative to the band's first row that its `add` covers, None when a
    later band adds them."""

    view: View
    start: Aff
    adds: tuple[int, int] | None


def accumulator(
    ctx: LoweringContext, st: BlockState, op: Operation, yv: View, shape: list[int]
) -> Accumulator:
    """The scratch a convolution lowered into the NEM block of `st`
    accumulates its output of `shape` in, and which rows its `add` covers.  A band of a split convolution (`nem_part`
    j, `nem_band` = [first row, rows of the whole output]) gets its rows of
    one scratch shaped as the whole output, which the bands share
    (`ctx.bands`, kept across the top-level statements at which the driver
    clears `ctx.scratch`), and only the last band adds, all the bands' rows
    at once: the scratch is live over every band, so `nem-share-buffers`
    never puts two bands' rows on the same bytes (with a scratch per band
    it did, and the second band waited for the first one's add), and one
    `add` token is live after the bands, as after a whole convolution, not
    one per band (straight-line code holds them to the next loop, within
    the 32 tokens the weight slices need).  Every band takes the same path
    (conv2d + add: its legality is a function of the element types alone),
    so the pending rows run from row 0 to the last band's first."""
    band = op.attributes.get("nem_band")
    if not isinstance(band, DenseArrayBase) or "nem_part" not in op.attributes:
        tv = scratch(ctx, st, yv, shape, op)
        return Accumulator(tv, tv.base, (0, shape[1]))
    row0, rows = (int(v) for v in band.get_values())
    whole = [shape[0], rows, *shape[2:]]
    context = task_scope(op)
    key = (yv.buffer, yv.level.data, tuple(whole), yv.elem, context)
    found = ctx.bands.get(key)
    if row0 == 0 or found is None or not ctx.is_declared(found.view.buffer):
        found = ctx.bands[key] = Band(scratch(ctx, st, yv, whole, op, ident=1000), (0, 0))
    tv = found.view
    lo, hi = found.pending if found.pending[1] == row0 else (row0, row0)
    end = row0 + shape[1]
    start = tv.base + Aff.c(row0 * tv.strides[1])
    if end < rows:  # a later band adds these rows
        found.pending = (lo, end)
        return Accumulator(tv, start, None)
    found.pending = (0, 0)
    return Accumulator(tv, start, (lo - row0, end - row0))
