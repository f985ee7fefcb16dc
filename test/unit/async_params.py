"""What one `async` pipeline of `async_sources` looks like: its `Params`
(the variant space the module docstring of `async_sources` describes),
`normalize` (consistent and race-free upstream), `random_params`, and the
`AsyncProgram` a `Params` becomes (text, arguments, numpy reference)."""

from __future__ import annotations

import random
from dataclasses import dataclass, fields, replace
from typing import Callable

import numpy as np

NP_TYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i16": np.int16}
BINARY = ("add", "sub", "mul", "max")
FLOAT_ARITH = {
    "add": "arith.addf",
    "sub": "arith.subf",
    "mul": "arith.mulf",
    "max": "arith.maximumf",
}
INT_ARITH = {"add": "arith.addi", "sub": "arith.subi", "mul": "arith.muli", "max": "arith.maxsi"}
NP_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum}
SLOTS = 2


@dataclass(frozen=True)
class Params:
    """What one program looks like (see the module docstring)."""

    shape: tuple[int, ...] = (128, 64)
    tile: tuple[int, ...] = (32, 64)
    t: str = "f32"
    ops: tuple[str, ...] = ("add",)  # stage 1: BINARY or "relu"; optional stage 2
    compute: tuple[str, ...] = ("linalg",)  # per stage: "linalg" | "affine"
    fuse: str = "none"  # 2 stages: "none" | "execute" | "nest"
    in_place: bool = False  # stage 2 writes stage 1's buffer
    load: str = "copy"  # "copy" | "dma" | "mdma" | "direct"
    load_fused: bool = False  # X and Y loads in one execute
    y_once: bool = False  # Y is one tile, loaded once before the tiles
    store: str = "copy"  # "copy" | "dma" | "mdma" | "direct"
    store_at: str = "execute"  # "execute" | "await" (after awaiting the compute)
    subview_inside: bool = False  # subviews inside the executes
    static_offsets: bool = False  # straight-line subviews with literal offsets
    structure: str = "straight"  # "straight" | "loop" (step = tile) | "index_loop"
    buffers: str = "tile"  # "tile" (per tile) | "shared" | "slots"
    tile_execute: bool = False  # each tile's pipeline inside an outer execute
    wrap_all: bool = False  # all tiles (loops) inside one outer execute
    completion: str = "await"  # "await" | "await_end" | "group" | "group_all"
    #                                          | "iter_args" | "sync"
    chain_at: str = "load"  # iter_args/shared chain: "load" | "store"
    values: bool = False  # !async.value<memref> between stages
    deps_style: str = "list"  # "list" ([deps], (operands)) | "await" (in the body)
    carried_init: str = "empty"  # iter_args' initial token: an "empty" execute,
    #                                          or the "y" (bias) load's (y_once)
    col_major: bool = False  # 2-D: tiles column by column
    prefetch: bool = False  # straight-line: tile k+1's loads before tile k's compute
    extra_awaits: bool = False  # also await every load token at the end
    dealloc: bool = False  # dealloc buffers once their users completed

    def key(self) -> str:
        d = Params()
        parts = [
            "x".join(map(str, self.shape)),
            "t" + "x".join(map(str, self.tile)),
            self.t,
            "+".join(self.ops),
        ]
        for f in fields(self):
            if f.name in ("shape", "tile", "t", "ops"):
                continue
            v = getattr(self, f.name)
            if v != getattr(d, f.name):
                parts.append(f"{f.name}={'+'.join(v) if isinstance(v, tuple) else v}")
        return "-".join(parts)


@dataclass
class AsyncProgram:
    name: str
    text: str
    args: list[str]  # memref argument names, in order
    shapes: list[tuple[int, ...]]  # their shapes
    t: str  # element type
    output: str  # the argument holding the result
    reference: Callable[[list[np.ndarray]], np.ndarray]  # args -> expected output
    params: Params


def needs_y(ops) -> bool:
    return any(o != "relu" for o in ops)


def normalize(p: Params) -> Params:
    """Make `p` consistent, and its program race-free upstream."""
    ops = p.ops[:2]
    compute = tuple((p.compute + ("linalg",) * 2)[: len(ops)])
    compute = tuple("affine" if o == "relu" else c for o, c in zip(ops, compute))
    fuse = p.fuse if len(ops) == 2 else "none"
    if fuse == "nest" and compute != ("affine", "affine"):
        fuse = "execute"
    in_place = p.in_place and len(ops) == 2 and fuse != "nest"
    tiles = [s // t for s, t in zip(p.shape, p.tile)]
    structure = p.structure
    if structure != "straight" and all(n == 1 for n in tiles):
        structure = "straight"
    loop = structure != "straight"
    completion, store_at, chain_at = p.completion, p.store_at, p.chain_at
    if p.store == "direct":
        store_at = "execute"
    if store_at == "await" and completion in ("group", "iter_args", "await_end"):
        completion = "await"  # the write-back itself is synchronous
    if not loop and completion == "iter_args":
        completion = "await_end"
    if loop and completion == "await_end":
        completion = "await"  # tokens of a loop body do not leave it
    if p.buffers != "tile":
        chain_at = "load"
        if loop and completion in ("group", "group_all"):
            completion = "iter_args"  # iterations must not overlap on shared buffers
    has_y = needs_y(ops)
    y_once = p.y_once and has_y
    load_fused = p.load_fused and has_y and not y_once and p.load != "direct"
    values = p.values
    return replace(
        p,
        ops=ops,
        compute=compute,
        fuse=fuse,
        in_place=in_place,
        structure=structure,
        completion=completion,
        store_at=store_at,
        chain_at=chain_at,
        load_fused=load_fused,
        y_once=y_once,
        values=values,
        static_offsets=p.static_offsets and not loop,
        col_major=p.col_major and len(p.shape) == 2,
        prefetch=(
            p.prefetch
            and not loop
            and not p.tile_execute
            and (p.buffers == "slots" or (p.buffers == "tile" and chain_at == "load"))
        ),
        deps_style="list" if p.completion == "sync" else p.deps_style,
        carried_init=p.carried_init
        if (completion == "iter_args" and y_once and p.load != "direct")
        else "empty",
        dealloc=p.dealloc and not values,
    )


# -- random programs -----------------------------------------------------------


def random_params(rng: random.Random) -> Params:
    """One random point of the variant space (normalized)."""
    rank = rng.choice([1, 2])
    structure = rng.choice(["straight", "loop", "loop", "index_loop"])
    max_tiles = 6 if structure == "straight" else 12
    if rank == 1:
        tile = (rng.choice([8, 16, 32, 48, 64]),)
        shape = (tile[0] * rng.randint(1, max_tiles),)
    else:
        tr = rng.choice([4, 8, 16, 32])
        if rng.random() < 0.5:  # whole rows
            tc = cols = rng.choice([8, 16, 24, 64, 96])
        else:
            tc = rng.choice([8, 16, 32])
            cols = tc * rng.randint(2, 3)
        rows = tr * rng.randint(1, max(1, max_tiles // (cols // tc)))
        shape, tile = (rows, cols), (tr, tc)
    first = rng.choice(BINARY + ("relu",))
    ops = (first,) if rng.random() < 0.5 else (first, rng.choice(BINARY + ("relu",)))
    return normalize(
        Params(
            shape=shape,
            tile=tile,
            t=rng.choice(["f32", "f32", "i32", "f16", "i16"]),
            ops=ops,
            compute=tuple(rng.choice(["linalg", "affine"]) for _ in ops),
            fuse=rng.choice(["none", "execute", "nest"]),
            in_place=rng.random() < 0.3,
            load=rng.choice(["copy", "copy", "dma", "dma", "mdma", "direct"]),
            load_fused=rng.random() < 0.3,
            y_once=rng.random() < 0.15,
            store=rng.choice(["copy", "copy", "dma", "dma", "mdma", "direct"]),
            store_at="await" if rng.random() < 0.2 else "execute",
            subview_inside=rng.random() < 0.4,
            static_offsets=rng.random() < 0.4,
            structure=structure,
            buffers=rng.choice(["tile", "tile", "shared", "slots"]),
            tile_execute=rng.random() < 0.15,
            wrap_all=rng.random() < 0.15,
            completion=rng.choice(
                ["await", "await_end", "group", "group_all", "iter_args", "sync"]
            ),
            chain_at=rng.choice(["load", "store"]),
            values=rng.random() < 0.35,
            extra_awaits=rng.random() < 0.15,
            dealloc=rng.random() < 0.3,
            deps_style="await" if rng.random() < 0.2 else "list",
            col_major=rng.random() < 0.3,
            carried_init=rng.choice(["empty", "y"]),
            prefetch=rng.random() < 0.3,
        )
    )
