"""Which loops the conversion keeps as NEM loops (D-LOW-LOOP): a loop that
moves data, allocates or holds async work; a pure load/compute/store nest
becomes one compute task.  Its own module so that both the conversion
(`loops`) and the preparation passes that erase such work
(`nem-drop-token-awaits`, D-LOW-ASYNC-AWAITS) read the one answer."""

from __future__ import annotations

from xdsl.dialects import affine, memref
from xdsl.ir import Operation

from nem.dialect.buffer_op import BufferOp
from nem.dialect.view_op import LOWERING_MARKS
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.frontends.upstream_dialects.dma import (
    AffineDmaStartOp,
    AffineDmaWaitOp,
)
from nem.frontends.upstream_dialects.memref_copy import COPY_OPS

STRUCTURAL = LOWERING_MARKS + "structural"
"""The unit attribute of an `affine.for` that held async work a preparation
pass erased or rewrote (`nem-drop-token-awaits`, `nem-inline-async-executes`):
structural whatever its body now holds."""

TILE_LOOP = LOWERING_MARKS + "tile_loop"
"""The unit attribute of an `affine.for` that `nem-mark-tile-loops` found the
conversion keeps as a NEM loop around raised tiles (`tile_loops.tile_loop`,
D-LOW-TILES): decided before `nem-fold-index-arith` rewrites its body."""


def kept_as_loop(loop: affine.ForOp) -> bool:
    """Whether the conversion keeps `loop` as a NEM loop and lowers its body
    op by op: structural, or a tile loop `nem-mark-tile-loops` marked (what
    `nem-check-task-control-flow` and `nem-raise-scalar-copies` ask of a
    loop; the conversion also decides unmarked tile loops itself)."""
    return is_structural(loop) or TILE_LOOP in loop.attributes


def is_structural(loop: affine.ForOp) -> bool:
    """A loop that moves data, allocates or holds async work becomes a NEM
    loop; a pure load/compute/store nest becomes one compute task.  A loop
    marked `nem_lowering.structural` held an await that a preparation pass
    erased (D-LOW-ASYNC-AWAITS): the answer the await gave."""
    if STRUCTURAL in loop.attributes:
        return True
    for op in loop.walk():
        if op is loop:
            continue
        if isinstance(
            op,
            AffineDmaStartOp
            | AffineDmaWaitOp
            | memref.AllocOp
            | memref.AllocaOp
            | BufferOp  # in a loop, an allocation's (nem-declare-allocations)
            | COPY_OPS
            | asy.ExecuteOp
            | asy.AwaitOp,
        ) or op.name.startswith("linalg."):
            return True
    return False


def allocation(op: Operation) -> str | None:
    """`memref.alloc` or `memref.alloca` when `op` is one, or the
    `nem_lowering.buffer` `nem-declare-allocations` made of one
    (D-LOW-DECLARE), else None: the preparation passes ask before that
    pass, the conversion after."""
    if isinstance(op, memref.AllocOp | memref.AllocaOp):
        return op.name
    if isinstance(op, BufferOp) and op.replaces is not None:
        return op.replaces.data
    return None


ALL_IN_FLIGHT = 4
"""A tile loop of at most this many trips may run them all at once, each in
its own slot of the body's L1 buffers (D-COMPILE-TILE-TIME, session 35):
with two slots, iteration 2's loads wait for iteration 0's stores, which on
a loop jammed over the engines (D-COMPILE-ENGINES) waits for every engine's.
The most a loop's mark (`WIDE`) may say (D-LOW-PIPE-BODY)."""
WIDE = "nem.all_in_flight"
"""The attribute of a tile loop whose slots the tile stage's L1 plan
fitted (`l1_plan.plan`): the iterations the lowering keeps in flight
(`tile_window`), each in a slot of the body's buffers.  Any other
pipelined tile loop keeps two (D-LOW-PIPE-BODY)."""


def tile_window(trips: int, units: int) -> int:
    """The iterations in flight of a tile loop of `trips` trips on an
    engine of `units` compute units (NMUs), and so the slots of its body's
    buffers: all of them in a short loop (`ALL_IN_FLIGHT`), two in a loop
    of two or fewer, and in a longer one one per unit and one more, which
    stages its tiles while the others compute (never more than
    `ALL_IN_FLIGHT`, the lowering's limit).  With one fewer an engine's
    units wait: iteration k + `units` + 1's loads wait for iteration k's
    stores, so on npm_pro's two NMUs two in flight left both idle 404 of
    every 1,918 cycles of Inception v2's 17x17 3x3 convolutions (traced,
    session 51); with one more, the slot takes L1 and tokens from the
    copies around the loop (npm_pro, Inception v2: 676,613 cycles with
    three, 677,205 with four; npm_mid, one NMU: Inception v1 1,148,024
    with two, 1,342,184 with three, session 52)."""
    if trips <= 2:
        return 2
    return trips if trips <= ALL_IN_FLIGHT else min(units + 1, ALL_IN_FLIGHT)
