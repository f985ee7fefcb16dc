"""What `nem-compile` takes besides its input: `CompileOptions`.

A module of its own, below every stage: the tile and lower stages' modules
type their `options` parameter with it without importing the pipeline that
imports them (no import cycle, issue 36)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nem.dialect.limits import DEFAULT_MAX_NODES, MAX_MODEL_BYTES


@dataclass(frozen=True)
class CompileOptions:
    """What `nem-compile` takes besides its input (docs/compile.md)."""

    device: str = "npm_pro_x1"
    tile_sizes: tuple[int, ...] | None = None
    """Override for every loop band (outermost loop first; missing entries
    leave their loop untiled)."""
    pipeline: bool = True
    """Double-buffer the tile loops (load of tile i+1 during compute on tile i)."""
    engines: int | None = None
    """Engines to spread tiles over (default: the device's `num_engines`)."""
    route: str = "transform"
    verify: bool = True
    include_dirs: tuple[str, ...] = ()
    simplify: bool = True
    """ONNX input: run the graph simplifier before importing (D-COMPILE-SIMPLIFY)."""
    demote_f64: bool = True
    """ONNX input: compute f64 in f32 (D-COMPILE-F64); else f64 is an error."""
    demote_i64: bool = True
    """ONNX input: compute int64 in i32 (D-COMPILE-I64); else int64 data is an error."""
    max_nodes: int = DEFAULT_MAX_NODES
    """ONNX input: the compile budget, most nodes of the model (D-LIMITS)."""
    max_model_bytes: int = MAX_MODEL_BYTES
    """ONNX input: largest model file with its external data (D-LIMITS)."""
    bind: tuple[tuple[str, Any], ...] = ()
    """ONNX input: graph inputs compiled as constants of these values, by
    name (D-COMPILE-BIND: a reduction's axes, a Slice's starts, ... given as
    graph inputs); `compile_onnx(bind={...})` takes a mapping."""
    origins: bool = False
    """Record the ONNX node of each statement (`CompileResult.origins`, about 2%
    of the compile): `nem-compile -o FILE.nemb` does (D-BC-NODES)."""
    located_temps: bool = False
    """Keep each MLIR stage's text with its locations too (`StageResult.located`,
    what `nem-compile --save-temps` writes, D-COMPILE-TEMPS-LOC)."""
    op_tile_sizes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """Tile sizes of single ops, by `tune.op_key` (what `--tune` found);
    other ops are sized as usual (D-COMPILE-TUNE)."""
    op_l1_scales: tuple[tuple[str, float], ...] = ()
    """Single ops tiled by the usual rules for this share of L1 (transform
    route), by `tune.op_key` (what `--tune` found, D-COMPILE-TUNE); other ops
    plan for all of it."""
    fuse: bool = True
    """Transform route: a convolution's bias and its elementwise epilogues
    (Relu, Clip, residual Add), and those of a window sum or max (an
    AveragePool's scale, LRN's normalization), run on its tiles in L1
    (D-COMPILE-FUSE-L1); `nem-compile --no-fuse` tiles each op apart."""
    fuse_chains: bool = True
    """Transform route: each chain of elementwise ops (an unfolded
    BatchNormalization and its Relu) is one op, its intermediates kept in L1
    (D-COMPILE-FUSE-CHAIN); `nem-compile --no-fuse-chains` tiles each op apart."""
    hoist: bool = True
    """Transform route: read-only tile copies (a convolution's weight tile)
    move out of the tile loops they do not depend on, staged once
    (D-COMPILE-HOIST); `nem-compile --no-hoist` stages them per tile."""
    share_staged: bool = True
    """Transform route: a peeled partial tile reads the buffer its loop
    staged instead of staging the same source again
    (D-COMPILE-SHARE-STAGED), and a padded border's fill tiles of one engine
    share one filled buffer (D-COMPILE-FILL-TILES); `nem-compile
    --no-share-staged` stages again."""
    split_units: bool = False
    """Transform route: split tile loops' large copies over the engine's DMAs
    in the tile stage (`--split-units`, D-COMPILE-SPLIT-OPT): every slice is
    a task more for the lowering's analyses, and `split_transfers` splits
    large transfers after them, by default; so it is opt-in."""
    split_nmus: bool = True
    """Transform route: a tile loop's large convolution runs over its engine's
    NMUs, one band of output rows each (D-COMPILE-NMU-SPLIT, session 48; off
    with `--no-split-nmus`); convolutions outside tile loops always do."""
    split_transfers: bool = True
    """Split large L1 transfers over the engine's DMAs on the ordered NEM
    program (`nem-split-transfers`, D-NEM-SPLIT-TRANSFERS; off with
    `--no-split-transfers`)."""
    pad_in_place: bool = True
    """A padded tensor's source is computed into the padded buffer's interior
    and only its border is filled, instead of a copy of the whole tensor into
    a buffer filled whole (D-COMPILE-PAD-IN-PLACE; off with
    `--no-pad-in-place`)."""
    transposed_reads: bool = True
    """A transposed graph input is read by its consumers through a strided
    view, each staging copy transposing on its way from DDR to L1, instead of
    transposed into a DDR buffer of its own first (D-COMPILE-LAYOUT, session
    26; off with `--no-transposed-reads`)."""
    concat_in_place: bool = True
    """A concatenation's inputs are computed into its buffer's slices instead
    of buffers of their own copied into it (D-COMPILE-CONCAT-IN-PLACE; off
    with `--no-concat-in-place`)."""
    jam: bool = True
    """Jam the loops of a nest's engine parts into one loop, so the engines run
    at the same time (`nem-jam-engine-loops`, D-NEM-JAM-ENGINES; off with
    `--no-jam`)."""
