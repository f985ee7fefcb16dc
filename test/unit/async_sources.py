"""Hand-written-style `async` pipelines for differential tests of the MLIR ->
NEM lowering (D-LOW-ASYNC, D-LOW-ASYNC-VALUE): the kind of input someone
writing their own tiled async pipeline would give the lowering.  Every
program is valid upstream MLIR (mlir-opt 22 accepts it).

A program computes `Z = f(X[, Y])` elementwise, tile by tile (1-D or 2-D
tiles; a 2-D tile narrower than a row is a strided access).  Per tile:

* loads of the X (and Y) tile into on-chip buffers (memory space 2) by
  `memref.copy` of a `memref.subview`, by `affine.dma_start`/`dma_wait` or by
  `memref.dma_start`/`dma_wait` (strided when the tile is narrower than a
  row), each load in its own `async.execute` or both in one; or no load, the
  compute reading the DDR subviews directly; Y may instead be one tile-shaped
  operand loaded once before all tiles (a "bias" every tile uses);
* one or two compute stages (`linalg.add/sub/mul/max` named ops or an affine
  loop nest with add/sub/mul/max, relu as `arith.maximumf`/`maxsi` with 0),
  in one execute each, both in one execute, or fused into one affine nest,
  the second optionally in place;
* a write-back (copy, affine or memref DMA) in an execute, or outside any
  execute after an `async.await` of the compute; or none, the last compute
  writing the Z subview directly.

Stages are ordered by dependency tokens (`async.execute [%t0, %t1]`), by
`!async.value<memref<...>>` operands (a buffer, possibly a subview, yielded
by one execute and bound in the next, `%v as %b`), by `async.await`s at the
top of the consumer's body instead of either, or by awaiting each execute
before the next starts ("sync").  A tile's pipeline may itself be wrapped in
an outer execute that awaits its last inner execute, and all the tiles (the
loops) in one execute.  Tiles are unrolled in straight-line code or iterated
by `affine.for` loops (2-D: row by row or column by column), with step =
tile size or a unit-step loop over the tile index and `affine.apply`
offsets.  Element types f32, f16, i32, i16 (integer results wrap as in
MLIR and numpy).  On-chip buffers are allocated per tile (inside the loop, or inside
the producing execute with values), shared by all tiles, or slots of one
2-slot buffer (ping-pong, tile k in slot k mod 2).  Completion:
`async.await` of each write-back (in the loop body, or all at the end), an
`async.create_group` + `async.add_to_group` + `async.await_all` (of the
write-backs, or of every execute, a group per loop iteration), or tokens
carried through `iter_args` and awaited after the loop.

Every program is race-free under upstream's semantics: whatever the data
flow needs (RAW, and WAR/WAW on reused buffers and DMA tag slots) is ordered
by a token, a value operand or an await: a tile that reuses a shared buffer
(a slot) depends on the write-back token of the tile that used it before (in
straight-line code, or a token carried by `iter_args`), or the tiles are
awaited one by one.

This module holds the programs the sweep runs: `random_async_program(rng)`
and the named fixed cases `FIXED` (`fixed_programs()`).  `async_params` holds
`Params` (`random_params(rng)` draws one, `normalize` makes it consistent) and
`AsyncProgram` (text, argument shapes, element type, numpy reference);
`async_pipelines.build(params)` writes a program (the line-level MLIR text
helpers are `async_text`'s); `async_pipelines.inputs` draws its operands.
"""

from __future__ import annotations

import random
from dataclasses import replace

from async_params import AsyncProgram, Params, random_params
from async_pipelines import build


def random_async_program(rng: random.Random) -> AsyncProgram:
    return build(random_params(rng))


# -- fixed programs --------------------------------------------------------------

# Each entry is already normalized (`normalize` leaves it unchanged, which
# test_lowering_async_sweep checks), so it runs exactly what it says.
FIXED: dict[str, Params] = {
    # straight-line tiles, copy loads, linalg.add, per-tile awaits
    "straight_copy_linalg": Params(shape=(64, 32), tile=(16, 32), ops=("add",)),
    # DMA loads/stores of whole-row tiles, affine relu after a linalg mul, a group
    "straight_dma_group": Params(
        shape=(64, 48),
        tile=(16, 48),
        ops=("mul", "relu"),
        compute=("linalg", "affine"),
        load="dma",
        store="dma",
        completion="group",
    ),
    # the fixture's loop shape: affine.for, per-iteration allocs, a group
    "loop_group_copy": Params(
        shape=(128,),
        tile=(32,),
        ops=("sub",),
        structure="loop",
        completion="group",
        load_fused=True,
    ),
    # a token carried through iter_args over shared buffers, DMA loads, i32
    "loop_iter_args_shared": Params(
        shape=(64, 24),
        tile=(16, 24),
        t="i32",
        ops=("max",),
        compute=("affine",),
        structure="loop",
        buffers="shared",
        completion="iter_args",
        load="dma",
    ),
    # !async.value buffers allocated inside the producing executes, 2-D loop nest
    "loop_values": Params(
        shape=(32, 32),
        tile=(16, 16),
        ops=("add", "relu"),
        compute=("linalg", "affine"),
        structure="loop",
        values=True,
        subview_inside=True,
    ),
    # values in straight-line code, the write-back after `async.await %v`
    "straight_values_await": Params(
        shape=(96,),
        tile=(32,),
        ops=("mul",),
        values=True,
        store_at="await",
        load_fused=True,
        static_offsets=True,
    ),
    # two computes fused into one affine nest, f16, shared buffers chained by tokens
    "straight_shared_nest_f16": Params(
        shape=(48, 16),
        tile=(16, 16),
        t="f16",
        ops=("add", "relu"),
        compute=("affine", "affine"),
        fuse="nest",
        buffers="shared",
        completion="await_end",
    ),
    # awaits in between instead of dependencies, in a loop, deallocs, memref DMA
    "loop_sync_dealloc": Params(
        shape=(64,),
        tile=(16,),
        ops=("relu", "add"),
        compute=("affine", "linalg"),
        structure="loop",
        completion="sync",
        dealloc=True,
        store="mdma",
    ),
    # two computes in one execute, the second in place
    "straight_in_place": Params(
        shape=(32, 64),
        tile=(8, 64),
        ops=("sub", "max"),
        compute=("linalg", "linalg"),
        fuse="execute",
        in_place=True,
        completion="await_end",
    ),
    # iter_args chaining only the write-backs (the loads of iterations overlap)
    "loop_chain_store": Params(
        shape=(24, 32),
        tile=(8, 16),
        ops=("add",),
        compute=("affine",),
        structure="loop",
        completion="iter_args",
        chain_at="store",
        load="dma",
    ),
    # ping-pong slots of one buffer, two tokens carried, a unit-step tile loop
    "index_loop_slots": Params(
        shape=(128,),
        tile=(16,),
        ops=("add", "relu"),
        compute=("linalg", "affine"),
        structure="index_loop",
        buffers="slots",
        completion="iter_args",
        load="dma",
    ),
    # a bias tile loaded once, every execute of a tile in one group, nested executes
    "bias_once_group_all": Params(
        shape=(64, 16),
        tile=(16, 16),
        ops=("add",),
        y_once=True,
        structure="loop",
        completion="group_all",
        tile_execute=True,
    ),
    # software-pipelined text (tile k+1's loads first), ping-pong slots, memref DMAs,
    # the consumers awaiting their producers in their bodies, i16
    "straight_prefetch_slots_i16": Params(
        shape=(96,),
        tile=(16,),
        t="i16",
        ops=("mul",),
        buffers="slots",
        prefetch=True,
        load="mdma",
        completion="group_all",
        deps_style="await",
    ),
    # found by this sweep, fixed: 2-D tiles narrower than a row written back by
    # independent executes (their strided extents overlap: ordered, D-LOW-ASYNC)
    "straight_narrow_tiles_dma": Params(
        shape=(16, 32), tile=(8, 16), ops=("add",), load="dma", store="dma", completion="await_end"
    ),
    # ... a fused nest (two raised ops through a scratch buffer) in independent
    # executes (one scratch buffer per execute)
    "straight_fused_nest_executes": Params(
        shape=(64,),
        tile=(16,),
        ops=("add", "relu"),
        compute=("affine", "affine"),
        fuse="nest",
        load="dma",
        store="dma",
        completion="await_end",
    ),
    # ... an iter_args token initialised by the bias load (awaited before the loop)
    "loop_iter_args_bias_init": Params(
        shape=(128,),
        tile=(32,),
        ops=("add",),
        y_once=True,
        structure="loop",
        completion="iter_args",
        carried_init="y",
        load="dma",
    ),
    # ... 40 tiles in straight-line code, all in a group: more live tokens than
    # the device allows (SEQ.max_active_tokens = 32) unless the oldest are awaited
    "straight_many_tiles_group": Params(
        shape=(320,),
        tile=(8,),
        ops=("add", "relu"),
        compute=("linalg", "affine"),
        load="dma",
        store="dma",
        completion="group",
    ),
    # column-major 2-D loop nest inside one execute, computing straight on DDR subviews
    "wrapped_col_major_direct": Params(
        shape=(32, 48),
        tile=(16, 16),
        ops=("max", "relu"),
        compute=("linalg", "affine"),
        structure="loop",
        col_major=True,
        load="direct",
        store="direct",
        wrap_all=True,
        completion="group",
    ),
}


def fixed_programs() -> list[AsyncProgram]:
    return [replace(build(p), name=n) for n, p in FIXED.items()]
