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

`random_params(rng)` draws a `Params`, `build(params)` makes an
`AsyncProgram` (text, argument shapes, element type, numpy reference);
`random_async_program(rng)` does both; `FIXED` holds the named fixed cases.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, fields, replace
from typing import Callable

import numpy as np

NP_TYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i16": np.int16}
BINARY = ("add", "sub", "mul", "max")
FLOAT_ARITH = {"add": "arith.addf", "sub": "arith.subf", "mul": "arith.mulf",
               "max": "arith.maximumf"}
INT_ARITH = {"add": "arith.addi", "sub": "arith.subi", "mul": "arith.muli", "max": "arith.maxsi"}
NP_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum}
SLOTS = 2


@dataclass(frozen=True)
class Params:
    """What one program looks like (see the module docstring)."""
    shape: tuple[int, ...] = (128, 64)
    tile: tuple[int, ...] = (32, 64)
    t: str = "f32"
    ops: tuple[str, ...] = ("add",)          # stage 1: BINARY or "relu"; optional stage 2
    compute: tuple[str, ...] = ("linalg",)   # per stage: "linalg" | "affine"
    fuse: str = "none"                       # 2 stages: "none" | "execute" | "nest"
    in_place: bool = False                   # stage 2 writes stage 1's buffer
    load: str = "copy"                       # "copy" | "dma" | "mdma" | "direct"
    load_fused: bool = False                 # X and Y loads in one execute
    y_once: bool = False                     # Y is one tile, loaded once before the tiles
    store: str = "copy"                      # "copy" | "dma" | "mdma" | "direct"
    store_at: str = "execute"                # "execute" | "await" (after awaiting the compute)
    subview_inside: bool = False             # subviews inside the executes
    static_offsets: bool = False             # straight-line subviews with literal offsets
    structure: str = "straight"              # "straight" | "loop" (step = tile) | "index_loop"
    buffers: str = "tile"                    # "tile" (per tile) | "shared" | "slots"
    tile_execute: bool = False               # each tile's pipeline inside an outer execute
    wrap_all: bool = False                   # all tiles (loops) inside one outer execute
    completion: str = "await"                # "await" | "await_end" | "group" | "group_all"
    #                                          | "iter_args" | "sync"
    chain_at: str = "load"                   # iter_args/shared chain: "load" | "store"
    values: bool = False                     # !async.value<memref> between stages
    deps_style: str = "list"                 # "list" ([deps], (operands)) | "await" (in the body)
    carried_init: str = "empty"              # iter_args' initial token: an "empty" execute,
    #                                          or the "y" (bias) load's (y_once)
    col_major: bool = False                  # 2-D: tiles column by column
    prefetch: bool = False                   # straight-line: tile k+1's loads before tile k's compute
    extra_awaits: bool = False               # also await every load token at the end
    dealloc: bool = False                    # dealloc buffers once their users completed

    def key(self) -> str:
        d = Params()
        parts = ["x".join(map(str, self.shape)), "t" + "x".join(map(str, self.tile)), self.t,
                 "+".join(self.ops)]
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
    args: list[str]                          # memref argument names, in order
    shapes: list[tuple[int, ...]]            # their shapes
    t: str                                   # element type
    output: str                              # the argument holding the result
    reference: Callable[[list[np.ndarray]], np.ndarray]  # args -> expected output
    params: Params


def _needs_y(ops) -> bool:
    return any(o != "relu" for o in ops)


def normalize(p: Params) -> Params:
    """Make `p` consistent, and its program race-free upstream."""
    ops = p.ops[:2]
    compute = tuple((p.compute + ("linalg",) * 2)[:len(ops)])
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
        completion = "await"                 # the write-back itself is synchronous
    if not loop and completion == "iter_args":
        completion = "await_end"
    if loop and completion == "await_end":
        completion = "await"                 # tokens of a loop body do not leave it
    if p.buffers != "tile":
        chain_at = "load"
        if loop and completion in ("group", "group_all"):
            completion = "iter_args"         # iterations must not overlap on shared buffers
    has_y = _needs_y(ops)
    y_once = p.y_once and has_y
    load_fused = p.load_fused and has_y and not y_once and p.load != "direct"
    values = p.values
    return replace(p, ops=ops, compute=compute, fuse=fuse, in_place=in_place,
                   structure=structure, completion=completion, store_at=store_at,
                   chain_at=chain_at, load_fused=load_fused, y_once=y_once, values=values,
                   static_offsets=p.static_offsets and not loop,
                   col_major=p.col_major and len(p.shape) == 2,
                   prefetch=(p.prefetch and not loop and not p.tile_execute
                             and (p.buffers == "slots" or (p.buffers == "tile"
                                                           and chain_at == "load"))),
                   deps_style="list" if p.completion == "sync" else p.deps_style,
                   carried_init=p.carried_init if (completion == "iter_args" and y_once
                                                   and p.load != "direct") else "empty",
                   dealloc=p.dealloc and not values)


def _memref(shape, t: str, space: int | None = None, layout: str | None = None) -> str:
    dims = "x".join(map(str, shape))
    extra = (f", {layout}" if layout else "") + (f", {space}" if space is not None else "")
    return f"memref<{dims}x{t}{extra}>"


def _strides(shape) -> list[int]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


class _Gen:
    def __init__(self, p: Params):
        self.p = p
        self.lines: list[str] = []
        self.consts: dict[int, str] = {}
        self.n = 0
        self.has_y = _needs_y(p.ops)
        self.rank = len(p.shape)
        self.ty = _memref(p.shape, p.t)
        self.yty = _memref(p.tile, p.t) if p.y_once else self.ty
        self.buf = _memref(p.tile, p.t, 2)
        self.slot_ty = _memref((SLOTS,) + tuple(p.tile), p.t, 2)
        self.slot_view = _memref(p.tile, p.t, 2, "strided<[%s], offset: ?>"
                                 % ", ".join(map(str, _strides(p.tile))))
        self.strided_dma = self.rank == 2 and p.tile[1] < p.shape[1]
        self.types: dict[str, str] = {"%X": self.ty, "%Y": self.yty, "%Z": self.ty}
        self.n_tiles = 1
        for s, t in zip(p.shape, p.tile):
            self.n_tiles *= s // t
        self.tag_ty = "memref<3xi32>"
        self.late_awaits: list[str] = []
        self.pending: dict[str, tuple] = {}
        self.group_adds: dict[str, int] = {}
        self.group_mult: dict[str, int] = {}
        self.tile_bufs: list[str] = []
        self.tile_toks: list[str] = []

    # -- helpers ------------------------------------------------------------
    def fresh(self, base: str) -> str:
        self.n += 1
        return f"%{base}_{self.n}"

    def c(self, v: int) -> str:
        return self.consts.setdefault(v, f"%c{v}")

    def emit(self, d: int, s: str) -> None:
        self.lines.append("  " * d + s)

    def vty(self, name: str) -> str:
        return f"!async.value<{self.types[name]}>"

    def alloc(self, d: int, base: str, ty: str | None = None) -> str:
        name = self.fresh(base)
        self.types[name] = ty or self.buf
        self.emit(d, f"{name} = memref.alloc() : {self.types[name]}")
        return name

    def subview(self, d: int, mem: str, off) -> str:
        """`%s = memref.subview` of DDR `mem` (`%X`, `%Y`, `%Z`) at tile
        offsets `off` (ints with static offsets, else SSA names)."""
        name = self.fresh(mem.strip("%").lower() + "s")
        strides = _strides(self.p.shape)
        if all(isinstance(o, int) for o in off) and self.p.static_offsets:
            lin = sum(o * s for o, s in zip(off, strides))
            offs, o_ty = ", ".join(map(str, off)), str(lin)
        else:
            offs = ", ".join(self.c(o) if isinstance(o, int) else o for o in off)
            o_ty = "?"
        ty = _memref(self.p.tile, self.p.t,
                     layout=f"strided<[{', '.join(map(str, strides))}], offset: {o_ty}>")
        self.types[name] = ty
        sizes = ", ".join(map(str, self.p.tile))
        ones = ", ".join(["1"] * self.rank)
        self.emit(d, f"{name} = memref.subview {mem}[{offs}] [{sizes}] [{ones}] : "
                     f"{self.ty} to {ty}")
        return name

    def slot_subview(self, d: int, slots: str, slot) -> str:
        name = self.fresh(slots.strip("%").split("_")[0] + "v")
        self.types[name] = self.slot_view
        if isinstance(slot, int) and self.p.static_offsets:
            first = str(slot)
            lin = slot
            for n in self.p.tile:
                lin *= n
            ty = self.slot_view.replace("offset: ?", f"offset: {lin}")
            self.types[name] = ty
        else:
            first = self.c(slot) if isinstance(slot, int) else slot
        zeros = ", ".join(["0"] * self.rank)
        sizes = ", ".join(map(str, self.p.tile))
        ones = ", ".join(["1"] * (self.rank + 1))
        self.emit(d, f"{name} = memref.subview {slots}[{first}, {zeros}] [1, {sizes}] [{ones}] : "
                     f"{self.slot_ty} to {self.types[name]}")
        return name

    def dma(self, d: int, kind: str, src: str, src_idx: str, dst: str, dst_idx: str,
            tag: str, slot: int) -> None:
        n = 1
        for x in self.p.tile:
            n *= x
        stride = (f", {self.c(self.p.shape[1])}, {self.c(self.p.tile[1])}"
                  if self.strided_dma else "")
        tag_ty = self.types[tag]
        tys = f"{self.types[src]}, {self.types[dst]}, {tag_ty}"
        if kind == "dma":
            self.emit(d, f"affine.dma_start {src}[{src_idx}], {dst}[{dst_idx}], {tag}[{slot}], "
                         f"{self.c(n)}{stride} : {tys}")
            self.emit(d, f"affine.dma_wait {tag}[{slot}], {self.c(n)} : {tag_ty}")
        else:
            self.emit(d, f"memref.dma_start {src}[{src_idx}], {dst}[{dst_idx}], {self.c(n)}, "
                         f"{tag}[{self.c(slot)}]{stride} : {tys}")
            self.emit(d, f"memref.dma_wait {tag}[{self.c(slot)}], {self.c(n)} : {tag_ty}")

    def zero_idx(self, mem: str) -> str:
        """The first element of a tile-shaped memref `mem`."""
        del mem
        return ", ".join([self.c(0)] * self.rank)

    def execute(self, d: int, deps: list[str], operands: list[tuple[str, str]],
                n_values: int, base: str) -> tuple[str, list[str]]:
        """Open `%t(, %v...) = async.execute [deps] (operands) -> values {`;
        the head is written by `close`, once the yielded values' types are
        known.  Binds each operand's block argument to its value's payload
        type; returns the token and the value names."""
        tok = self.fresh("t" + base)
        vals = [self.fresh("v" + base) for _ in range(n_values)]
        for v, a in operands:
            self.types[a] = self.types[v]
        inner = self.p.deps_style == "await" and self.p.completion != "sync"
        self.pending[tok] = (len(self.lines), d, [] if inner else list(deps),
                             [] if inner else list(operands), vals)
        self.emit(d, "")
        if inner:
            # the body awaits its producers instead of depending on them
            for t in dict.fromkeys(deps):
                self.emit(d + 1, f"async.await {t} : !async.token")
            for v, a in operands:
                self.emit(d + 1, f"{a} = async.await {v} : {self.vty(v)}")
        self.tile_toks.append(tok)
        return tok, vals

    def close(self, d: int, tok: str, yields: list[str] = ()) -> None:
        at, d0, deps, operands, vals = self.pending.pop(tok)
        for v, y in zip(vals, yields):
            self.types[v] = self.types[y]
        head = ", ".join([tok] + vals) + " = async.execute"
        if deps and self.p.completion != "sync":
            head += f" [{', '.join(dict.fromkeys(deps))}]"
        if operands:
            head += " (" + ", ".join(f"{v} as {a}: {self.vty(v)}" for v, a in operands) + ")"
        if len(vals) == 1:
            head += f" -> {self.vty(vals[0])}"
        elif vals:
            head += " -> (" + ", ".join(self.vty(v) for v in vals) + ")"
        self.lines[at] = "  " * d0 + head + " {"
        if yields:
            self.emit(d + 1, f"async.yield {', '.join(yields)} : "
                             f"{', '.join(self.types[y] for y in yields)}")
        else:
            self.emit(d + 1, "async.yield")
        self.emit(d, "}")
        if self.p.completion == "sync":
            self.emit(d, f"async.await {tok} : !async.token")

    # -- compute ------------------------------------------------------------
    def _zero(self, d: int) -> str:
        z = self.fresh("zero")
        self.emit(d, f"{z} = arith.constant {'0.0' if self.p.t[0] == 'f' else '0'} : {self.p.t}")
        return z

    def nest(self, d: int, exprs, ins: list[str], out: str) -> None:
        """An affine nest storing `exprs` (a list of (op, lhs, rhs) over the
        names `in0`, `in1`, `r0`, ...) into `out`."""
        zero = self._zero(d) if any(op == "relu" for op, _, _ in exprs) else None
        ivs = [self.fresh("i") for _ in range(self.rank)]
        for k, (iv, n) in enumerate(zip(ivs, self.p.tile)):
            self.emit(d + k, f"affine.for {iv} = 0 to {n} {{")
        dd = d + self.rank
        idx = ", ".join(ivs)
        env = {}
        for k, b in enumerate(ins):
            env[f"in{k}"] = self.fresh("l")
            self.emit(dd, f"{env[f'in{k}']} = affine.load {b}[{idx}] : {self.types[b]}")
        arith = FLOAT_ARITH if self.p.t[0] == "f" else INT_ARITH
        for k, (op, lhs, rhs) in enumerate(exprs):
            r = self.fresh("r")
            if op == "relu":
                mx = "arith.maximumf" if self.p.t[0] == "f" else "arith.maxsi"
                self.emit(dd, f"{r} = {mx} {env[lhs]}, {zero} : {self.p.t}")
            else:
                self.emit(dd, f"{r} = {arith[op]} {env[lhs]}, {env[rhs]} : {self.p.t}")
            env[f"r{k}"] = r
        self.emit(dd, f"affine.store {env[f'r{len(exprs) - 1}']}, {out}[{idx}] : "
                      f"{self.types[out]}")
        for k in reversed(range(self.rank)):
            self.emit(d + k, "}")

    def stage(self, d: int, k: int, a: str, y: str | None, out: str) -> None:
        """Compute stage `k` of `a` (and `y`) into `out`."""
        op, style = self.p.ops[k], self.p.compute[k]
        if style == "linalg":
            self.emit(d, f"linalg.{op} ins({a}, {y} : {self.types[a]}, {self.types[y]}) "
                         f"outs({out} : {self.types[out]})")
        elif op == "relu":
            self.nest(d, [("relu", "in0", None)], [a], out)
        else:
            self.nest(d, [(op, "in0", "in1")], [a, y], out)

    # -- one tile -----------------------------------------------------------
    def tile(self, d: int, off: list, dma_idx: list[str], slot, global_bufs: dict,
             y_src: tuple, tag: str | None, tag0: int, deps_in: list[str]) -> str | None:
        """The pipeline of one tile at offsets `off` (DMA indices `dma_idx`,
        ping-pong slot `slot`); returns the token that completes it (None
        when its write-back is synchronous)."""
        p = self.p
        self.tile_bufs, self.tile_toks = [], []
        if not p.tile_execute:
            return self._tile(d, off, dma_idx, slot, global_bufs, y_src, tag, tag0, deps_in)
        # the whole pipeline in an outer execute that awaits its last stage
        outer, _ = self.execute(d, deps_in, [], 0, "tile")
        n_late = len(self.late_awaits)
        fin = self._tile(d + 1, off, dma_idx, slot, global_bufs, y_src, tag, tag0, [])
        if fin is not None:
            self.emit(d + 1, f"async.await {fin} : !async.token")
        if p.extra_awaits:
            for t in dict.fromkeys(self.late_awaits[n_late:]):
                self.emit(d + 1, f"async.await {t} : !async.token")
        del self.late_awaits[n_late:]
        if p.dealloc:
            self.dealloc(d + 1, self.tile_bufs)
        self.close(d, outer)
        self.tile_bufs, self.tile_toks = [], [outer]
        return outer

    def _tile(self, d, off, dma_idx, slot, global_bufs, y_src, tag, tag0, deps_in):
        p = self.p
        vals = p.values
        loaded = ["X"] + (["Y"] if self.has_y and not p.y_once else [])
        two = len(p.ops) == 2
        dma_at = ", ".join(dma_idx)

        # fast buffers: per tile (here, or inside the producing execute with
        # values), shared (global), or this tile's slot of a global buffer
        bufs: dict[str, str] = {}
        lazy: set[str] = set()           # made inside the execute that fills them
        fast = ([] if p.load == "direct" else loaded) + ["o1", "o2"]
        for b in fast:
            if b.startswith("o"):
                continue                 # outputs: made when first written
            if p.buffers == "shared":
                bufs[b] = global_bufs[b]
            elif p.buffers == "slots":
                if vals and p.subview_inside:
                    lazy.add(b)
                else:
                    bufs[b] = self.slot_subview(d, global_bufs[b], slot)
            elif vals:
                lazy.add(b)
            else:
                bufs[b] = self.alloc(d, b.lower() + "a")
                self.tile_bufs.append(bufs[b])
        out_early: dict[str, str] = {}   # outputs made before the executes
        if p.buffers == "tile" and not vals:
            for b in ("o1", "o2"):
                out_early[b] = None      # allocated on demand at tile level
        elif p.buffers == "slots" and not (vals and p.subview_inside):
            for b in ("o1", "o2"):
                out_early[b] = None

        def out_buf(dd: int, b: str) -> str:
            """Stage output `b`: global, made at tile level, or here."""
            if p.buffers == "shared":
                return global_bufs[b]
            if b in out_early:
                if out_early[b] is None:
                    # hoist: insert before the first execute of this tile
                    name = self.fresh(b)
                    if p.buffers == "slots":
                        self.types[name] = self.slot_view
                        line = self._slot_line(name, global_bufs[b], slot)
                    else:
                        self.types[name] = self.buf
                        line = f"{name} = memref.alloc() : {self.buf}"
                        self.tile_bufs.append(name)
                    self.lines.insert(tile_start, "  " * d + line)
                    self._shift_pending(tile_start)
                    self.split_at += 1
                    out_early[b] = name
                return out_early[b]
            if p.buffers == "slots":
                return self.slot_subview(dd, global_bufs[b], slot)
            return self.alloc(dd, b)

        def make(dd: int, b: str) -> str:
            if b not in lazy:
                return bufs[b]
            if p.buffers == "slots":
                return self.slot_subview(dd, global_bufs[b], slot)
            return self.alloc(dd, b.lower() + "a")

        subviews: dict[str, str] = {}
        need_sv = [m for m in loaded if p.load in ("copy", "direct")]
        if p.store in ("copy", "direct"):
            need_sv.append("Z")
        if not p.subview_inside:
            for m in need_sv:
                subviews[m] = self.subview(d, "%" + m, off)
        tile_start = len(self.lines)

        def ddr_view(dd: int, m: str) -> str:
            return subviews[m] if m in subviews else self.subview(dd, "%" + m, off)

        def load_body(dd: int, m: str, tslot: int) -> str:
            b = make(dd, m)
            if p.load == "copy":
                sv = ddr_view(dd, m)
                self.emit(dd, f"memref.copy {sv}, {b} : {self.types[sv]} to {self.types[b]}")
            else:
                self.dma(dd, p.load, "%" + m, dma_at, b, self.zero_idx(b), tag, tslot)
            return b

        # loads
        load_tok: dict[str, str] = {}
        load_val: dict[str, str] = {}
        ldeps = list(deps_in) if p.chain_at == "load" else []
        if p.load == "direct":
            pass
        elif p.load_fused:
            tok, vs = self.execute(d, ldeps, [], len(loaded) if vals else 0, "ld")
            bs = [load_body(d + 1, m, tag0 + i) for i, m in enumerate(loaded)]
            self.close(d, tok, bs if vals else [])
            for i, m in enumerate(loaded):
                load_tok[m] = tok
                if vals:
                    load_val[m] = vs[i]
        else:
            for i, m in enumerate(loaded):
                tok, vs = self.execute(d, ldeps, [], 1 if vals else 0, "ld")
                b = load_body(d + 1, m, tag0 + i)
                self.close(d, tok, [b] if vals else [])
                load_tok[m] = tok
                if vals:
                    load_val[m] = vs[0]
        self.late_awaits += list(dict.fromkeys(load_tok.values()))
        if p.y_once:
            ytok, yval, ybuf = y_src
            if ytok is not None and not (p.carried_init == "y" and deps_in
                                         and p.chain_at == "load" and p.load != "direct"):
                # (else the loads depend on the carried token, which is the
                # Y load's in the first iteration and after it in the others)
                load_tok["Y"] = ytok
            if vals and yval is not None:
                load_val["Y"] = yval

        # computes
        self.split_at = len(self.lines)
        groups = [[0, 1]] if two and p.fuse != "none" else [[k] for k in range(len(p.ops))]
        cur_tok, cur_val, cur_buf = None, None, None   # the previous group's output
        for g in groups:
            last = g[-1] == len(p.ops) - 1
            used = ["X"] if g[0] == 0 else []
            if any(p.ops[k] != "relu" for k in g):
                used.append("Y")
            operands: list[tuple[str, str]] = []
            deps: list[str] = []
            if g[0] != 0:
                if vals:
                    operands.append((cur_val, self.fresh("ob")))
                else:
                    deps.append(cur_tok)
            if g[0] == 0 and p.load == "direct":
                deps += ldeps            # no loads: the chain orders the first compute
            bound: dict[str, str] = {}
            for m in used:
                if m in load_val:
                    a = self.fresh(m.lower() + "b")
                    operands.append((load_val[m], a))
                    bound[m] = a
                elif m in load_tok:
                    deps.append(load_tok[m])
            value_out = vals and not (last and p.store == "direct")
            tok, vs = self.execute(d, deps, operands, 1 if value_out else 0, "c")
            dd = d + 1

            def src(m: str) -> str:
                if m in bound:
                    return bound[m]
                if m == "Y" and p.y_once:
                    return "%Y" if p.load == "direct" else y_src[2]
                if p.load == "direct":
                    return ddr_view(dd, m)
                return bufs[m]

            a_in = (operands[0][1] if vals else cur_buf) if g[0] != 0 else src("X")
            if g[0] != 0 and not vals and cur_buf.startswith("%zs") and p.subview_inside:
                a_in = ddr_view(dd, "Z")     # the previous execute's view is not visible
            y_in = src("Y") if "Y" in used else None
            outs: list[str | None] = []
            for k in g:
                if k == 1 and p.in_place:
                    outs.append(a_in if g[0] == 1 else outs[0])
                elif p.store == "direct" and (k == len(p.ops) - 1 or (k == 0 and p.in_place)):
                    outs.append(ddr_view(dd, "Z"))
                elif p.fuse == "nest" and k == 0 and len(g) == 2:
                    outs.append(None)
                else:
                    outs.append(out_buf(dd, f"o{k + 1}"))
            if p.fuse == "nest" and len(g) == 2:
                exprs = [(p.ops[0], "in0", "in1" if p.ops[0] != "relu" else None),
                         (p.ops[1], "r0", "in1" if p.ops[1] != "relu" else None)]
                self.nest(dd, exprs, [a_in] + ([y_in] if y_in else []), outs[-1])
            else:
                s = a_in
                for k, o in zip(g, outs):
                    self.stage(dd, k, s, y_in, o)
                    s = o
            self.close(d, tok, [outs[-1]] if value_out else [])
            cur_tok, cur_val, cur_buf = tok, (vs[0] if value_out else None), outs[-1]

        # write-back
        def store_body(dd: int, b: str) -> None:
            if p.store == "copy":
                sv = ddr_view(dd, "Z")
                self.emit(dd, f"memref.copy {b}, {sv} : {self.types[b]} to {self.types[sv]}")
            else:
                self.dma(dd, p.store, b, self.zero_idx(b), "%Z", dma_at, tag, tag0 + 2)

        if p.store == "direct":
            if p.chain_at == "store" and deps_in and p.completion != "sync":
                # this tile completes after the previous one: a join execute
                tok, _ = self.execute(d, [cur_tok] + deps_in, [], 0, "join")
                self.close(d, tok)
                return tok
            return cur_tok
        if p.store_at == "await":
            if vals:
                r = self.fresh("res")
                self.types[r] = self.types[cur_val]
                self.emit(d, f"{r} = async.await {cur_val} : {self.vty(cur_val)}")
            else:
                if p.completion != "sync":
                    self.emit(d, f"async.await {cur_tok} : !async.token")
                r = cur_buf
            store_body(d, r)
            return None
        deps = [] if vals else [cur_tok]
        if p.chain_at == "store":
            deps += deps_in
        operands = [(cur_val, self.fresh("ob"))] if vals else []
        tok, _ = self.execute(d, deps, operands, 0, "st")
        store_body(d + 1, operands[0][1] if vals else cur_buf)
        self.close(d, tok)
        return tok

    def _slot_line(self, name: str, slots: str, slot) -> str:
        first = self.c(slot) if isinstance(slot, int) else slot
        zeros = ", ".join(["0"] * self.rank)
        sizes = ", ".join(map(str, self.p.tile))
        ones = ", ".join(["1"] * (self.rank + 1))
        return (f"{name} = memref.subview {slots}[{first}, {zeros}] [1, {sizes}] [{ones}] : "
                f"{self.slot_ty} to {self.types[name]}")

    def _shift_pending(self, at: int) -> None:
        for k, (line, *rest) in list(self.pending.items()):
            if line >= at:
                self.pending[k] = (line + 1, *rest)

    def dealloc(self, d: int, bufs: list[str]) -> None:
        for b in bufs:
            self.emit(d, f"memref.dealloc {b} : {self.types[b]}")

    def add_to_group(self, d: int, tok: str, group: str) -> None:
        self.emit(d, f"{self.fresh('k')} = async.add_to_group {tok}, {group} : !async.token")
        # a group made outside the tile loops gets one token per iteration
        self.group_adds[group] = self.group_adds.get(group, 0) + self.group_mult.get(group, 1)

    def create_group(self, d: int) -> str:
        g = self.fresh("g")
        self.emit(d, f"{g} = async.create_group @@{g}@@ : !async.group")
        return g

    def complete(self, d: int, fin: str | None, group: str | None) -> None:
        """What follows a tile: its completion."""
        p = self.p
        if p.completion == "group_all":
            for t in self.tile_toks:
                self.add_to_group(d, t, group)
        if fin is None:
            return
        if p.completion == "await":
            self.emit(d, f"async.await {fin} : !async.token")
        elif p.completion == "group":
            self.add_to_group(d, fin, group)

    # -- the function ---------------------------------------------------------
    def build(self) -> str:
        p = self.p
        d = 1
        loop = p.structure != "straight"
        global_bufs: dict[str, str] = {}
        loaded = [] if p.load == "direct" else ["X"] + (["Y"] if self.has_y and not p.y_once
                                                        else [])
        for b in loaded + ["o1", "o2"]:
            base = b.lower() + "a" if b in ("X", "Y") else b
            if p.buffers == "shared":
                global_bufs[b] = self.alloc(d, base)
            elif p.buffers == "slots":
                global_bufs[b] = self.alloc(d, base + "slots", self.slot_ty)
        uses_tag = p.load in ("dma", "mdma") or p.store in ("dma", "mdma")
        tag = None
        if uses_tag and (not loop or p.buffers == "shared"):
            tag = "%tag"
            self.types[tag] = f"memref<{3 * self.n_tiles}xi32>" if not loop else self.tag_ty
            self.emit(d, f"{tag} = memref.alloc() : {self.types[tag]}")
        # Y loaded once: one tile-shaped operand every tile uses
        y_src: tuple = (None, None, None)
        if p.y_once:
            if p.load == "direct":
                y_src = (None, None, "%Y")
            else:
                yb = self.alloc(d, "yonce")
                tok, vs = self.execute(d, [], [], 1 if p.values else 0, "y")
                if p.load == "copy":
                    self.emit(d + 1, f"memref.copy %Y, {yb} : {self.yty} to {self.buf}")
                else:
                    ytag = self.fresh("ytag")
                    self.types[ytag] = "memref<1xi32>"
                    self.emit(d + 1, f"{ytag} = memref.alloc() : memref<1xi32>")
                    saved, self.strided_dma = self.strided_dma, False
                    self.dma(d + 1, p.load, "%Y", self.zero_idx(yb), yb, self.zero_idx(yb),
                             ytag, 0)
                    self.strided_dma = saved
                self.close(d, tok, [yb] if p.values else [])
                y_src = (tok, vs[0] if vs else None, yb)
                self.late_awaits.append(tok)
        outer = None
        if p.wrap_all:
            # everything below in one execute, awaited at the end
            outer, _ = self.execute(d, [], [], 0, "all")
            d += 1
        group = None
        if p.completion == "group" or (p.completion == "group_all" and not loop):
            group = self.create_group(d)
        if not loop:
            self.straight(d, global_bufs, y_src, tag, group)
        else:
            self.loops(d, global_bufs, y_src, tag, group)
        if p.extra_awaits and not loop:
            for t in dict.fromkeys(self.late_awaits):
                self.emit(d, f"async.await {t} : !async.token")
        if outer is not None:
            d -= 1
            self.close(d, outer)
            if p.completion != "sync":
                self.emit(d, f"async.await {outer} : !async.token")
        if p.dealloc and p.buffers != "tile":
            self.dealloc(d, list(global_bufs.values()))
        self.emit(1, "return")
        for g, n in self.group_adds.items():
            self.lines = [ln.replace(f"@@{g}@@", self.c(n)) for ln in self.lines]
        names = ["X"] + (["Y"] if self.has_y else [])
        args = ", ".join(f"%{a}: {self.yty if a == 'Y' else self.ty}" for a in names + ["Z"])
        head = [f"// {p.key()}", f"func.func @async_pipeline({args}) {{"]
        consts = [f"  {n} = arith.constant {v} : index" for v, n in sorted(self.consts.items())]
        return "\n".join(head + consts + self.lines + ["}", ""])

    def straight(self, d, global_bufs, y_src, tag, group) -> None:
        p = self.p
        finals: list[str] = []
        history: list[str | None] = []      # each tile's completing token
        pending_dealloc: list[str] = []
        ranges = [range(0, s, t) for s, t in zip(p.shape, p.tile)]
        if p.col_major:
            grid = [off[::-1] for off in itertools.product(*ranges[::-1])]
        else:
            grid = list(itertools.product(*ranges))
        segments: list[tuple[list[str], list[str]]] = []   # (loads, the rest) per tile
        for k, off in enumerate(grid):
            start = len(self.lines)
            chain: list[str] = []
            back = SLOTS if p.buffers == "slots" else 1
            if (p.buffers != "tile" or p.chain_at == "store") and len(history) >= back:
                if history[-back] is not None:
                    chain = [history[-back]]
            dma_idx = [self.c(o) for o in off]
            fin = self.tile(d, list(off), dma_idx, k % SLOTS, global_bufs, y_src, tag, 3 * k,
                            chain)
            history.append(fin)
            self.complete(d, fin, group)
            if p.completion == "await_end" and fin is not None:
                finals.append(fin)
            if p.dealloc and (fin is None or p.completion in ("await", "sync")):
                self.dealloc(d, self.tile_bufs)
            else:
                pending_dealloc += self.tile_bufs
            if p.prefetch:
                segments.append((self.lines[start:self.split_at], self.lines[self.split_at:]))
                del self.lines[start:]
        if p.prefetch:
            # software-pipelined text: the loads of tile k+1 before the rest of tile k
            order = [segments[0][0]]
            for k in range(len(segments)):
                if k + 1 < len(segments):
                    order.append(segments[k + 1][0])
                order.append(segments[k][1])
            self.lines += [ln for seg in order for ln in seg]
        for fin in finals:
            self.emit(d, f"async.await {fin} : !async.token")
        if group is not None:
            self.emit(d, f"async.await_all {group}")
        if p.dealloc:
            self.dealloc(d, pending_dealloc)

    def loops(self, d, global_bufs, y_src, tag, group) -> None:
        p = self.p
        carried = p.completion == "iter_args"
        n_carried = SLOTS if p.buffers == "slots" else 1
        tok0 = None
        if carried and p.carried_init == "y":
            tok0 = y_src[0]
        elif carried:
            tok0 = self.fresh("t")
            self.emit(d, f"{tok0} = async.execute {{")
            self.emit(d + 1, "async.yield")
            self.emit(d, "}")
        looped = [k for k in range(self.rank) if p.tile[k] < p.shape[k]]
        if p.col_major:
            looped.reverse()
        counts = [p.shape[k] // p.tile[k] for k in range(self.rank)]
        ivs: dict[int, str] = {}
        results: list[list[str]] = []       # each loop's token results, outermost first
        prev = [tok0] * n_carried           # oldest last
        depth = d
        for k in looped:
            iv = self.fresh("iv")
            ivs[k] = iv
            if p.structure == "loop":
                head = f"affine.for {iv} = 0 to {p.shape[k]} step {p.tile[k]}"
            else:
                head = f"affine.for {iv} = 0 to {counts[k]}"
            if carried:
                r = self.fresh("last")
                pvs = [self.fresh("prev") for _ in prev]
                inits = ", ".join(f"{a} = {b}" for a, b in zip(pvs, prev))
                tys = ", ".join(["!async.token"] * len(pvs))
                head = (f"{r}{':' + str(len(pvs)) if len(pvs) > 1 else ''} = {head} "
                        f"iter_args({inits}) -> ({tys})")
                results.append([r] if len(pvs) == 1 else [f"{r}#{i}" for i in range(len(pvs))])
                prev = pvs
            self.emit(depth, head + " {")
            depth += 1
        if group is not None:
            self.group_mult[group] = self.n_tiles
        inner_group = group
        if p.completion == "group_all":
            inner_group = self.create_group(depth)
        if tag is None and (p.load in ("dma", "mdma") or p.store in ("dma", "mdma")):
            tag = self.fresh("tag")
            self.types[tag] = self.tag_ty
            self.emit(depth, f"{tag} = memref.alloc() : {self.tag_ty}")
        # offsets (SSA), DMA indices and the slot of this iteration
        off: list = []
        dma_idx: list[str] = []
        for k in range(self.rank):
            if k not in ivs:
                off.append(0)
                dma_idx.append(self.c(0))
            elif p.structure == "loop":
                off.append(ivs[k])
                dma_idx.append(ivs[k])
            else:
                o = self.fresh("off")
                self.emit(depth, f"{o} = affine.apply affine_map<(d0) -> (d0 * {p.tile[k]})>"
                                 f"({ivs[k]})")
                off.append(o)
                dma_idx.append(f"{ivs[k]} * {p.tile[k]}" if "mdma" not in (p.load, p.store)
                               else o)
        slot = None
        if p.buffers == "slots":
            # the linear tile index mod SLOTS
            dims = [ivs[k] for k in looped]
            terms = []
            for n, k in enumerate(looped):
                mult = 1
                for k2 in looped[n + 1:]:
                    mult *= counts[k2]
                e = f"d{n}" if p.structure == "index_loop" else f"d{n} floordiv {p.tile[k]}"
                terms.append(e if mult == 1 else f"({e}) * {mult}")
            ds = ", ".join(f"d{n}" for n in range(len(dims)))
            slot = self.fresh("slot")
            self.emit(depth, f"{slot} = affine.apply affine_map<({ds}) -> "
                             f"(({' + '.join(terms)}) mod {SLOTS})>({', '.join(dims)})")
        chain = [prev[-1]] if carried else []
        fin = self.tile(depth, off, dma_idx, slot, global_bufs, y_src, tag, 0, chain)
        self.complete(depth, fin, inner_group)
        if p.extra_awaits:
            for t in dict.fromkeys(self.late_awaits):
                self.emit(depth, f"async.await {t} : !async.token")
        if p.completion == "group_all":
            self.emit(depth, f"async.await_all {inner_group}")
        if p.dealloc and (fin is None or p.completion in ("await", "sync", "group_all")):
            self.dealloc(depth, self.tile_bufs)
        # close the loops; with carried tokens the innermost loop yields the
        # tile's token (and shifts the older ones), every outer loop the
        # results of the one inside
        for n in reversed(range(len(looped))):
            depth -= 1
            if carried:
                ys = [fin] + prev[:-1] if n == len(looped) - 1 else results[n + 1]
                self.emit(depth + 1, f"affine.yield {', '.join(ys)} : "
                                     f"{', '.join(['!async.token'] * len(ys))}")
            self.emit(depth, "}")
        if carried:
            for r in results[0]:
                self.emit(d, f"async.await {r} : !async.token")
        if group is not None:
            self.emit(d, f"async.await_all {group}")


def build(p: Params) -> AsyncProgram:
    p = normalize(p)
    g = _Gen(p)
    text = g.build()
    names = ["X"] + (["Y"] if g.has_y else [])
    dt = NP_TYPES[p.t]
    reps = tuple(s // t for s, t in zip(p.shape, p.tile))

    def reference(args: list[np.ndarray]) -> np.ndarray:
        x = args[0]
        y = args[1] if g.has_y else None
        if p.y_once and y is not None:
            y = np.tile(y, reps)
        v = x
        for op in p.ops:
            v = (np.maximum(v, dt(0)) if op == "relu" else NP_OPS[op](v, y)).astype(dt)
        return v

    shapes = [p.tile if (n == "Y" and p.y_once) else p.shape for n in names] + [p.shape]
    return AsyncProgram(p.key(), text, names + ["Z"], shapes, p.t, "Z", reference, p)


def inputs(prog: AsyncProgram, seed: int) -> list[np.ndarray]:
    """Random operands (the output too).  Floats are multiples of 1/8 in
    [-1, 1): every result of at most two ops on them is exact in f16/f32."""
    rng = np.random.default_rng(seed)
    dt = NP_TYPES[prog.t]
    if prog.t[0] == "f":
        return [(rng.integers(-8, 8, s) / 8).astype(dt) for s in prog.shapes]
    return [rng.integers(-50, 50, s).astype(dt) for s in prog.shapes]


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
        if rng.random() < 0.5:          # whole rows
            tc = cols = rng.choice([8, 16, 24, 64, 96])
        else:
            tc = rng.choice([8, 16, 32])
            cols = tc * rng.randint(2, 3)
        rows = tr * rng.randint(1, max(1, max_tiles // (cols // tc)))
        shape, tile = (rows, cols), (tr, tc)
    first = rng.choice(BINARY + ("relu",))
    ops = (first,) if rng.random() < 0.5 else (first, rng.choice(BINARY + ("relu",)))
    return normalize(Params(
        shape=shape, tile=tile, t=rng.choice(["f32", "f32", "i32", "f16", "i16"]), ops=ops,
        compute=tuple(rng.choice(["linalg", "affine"]) for _ in ops),
        fuse=rng.choice(["none", "execute", "nest"]), in_place=rng.random() < 0.3,
        load=rng.choice(["copy", "copy", "dma", "dma", "mdma", "direct"]),
        load_fused=rng.random() < 0.3, y_once=rng.random() < 0.15,
        store=rng.choice(["copy", "copy", "dma", "dma", "mdma", "direct"]),
        store_at="await" if rng.random() < 0.2 else "execute",
        subview_inside=rng.random() < 0.4, static_offsets=rng.random() < 0.4,
        structure=structure, buffers=rng.choice(["tile", "tile", "shared", "slots"]),
        tile_execute=rng.random() < 0.15, wrap_all=rng.random() < 0.15,
        completion=rng.choice(["await", "await_end", "group", "group_all", "iter_args", "sync"]),
        chain_at=rng.choice(["load", "store"]), values=rng.random() < 0.35,
        extra_awaits=rng.random() < 0.15, dealloc=rng.random() < 0.3,
        deps_style="await" if rng.random() < 0.2 else "list", col_major=rng.random() < 0.3,
        carried_init=rng.choice(["empty", "y"]), prefetch=rng.random() < 0.3))


def random_async_program(rng: random.Random) -> AsyncProgram:
    return build(random_params(rng))


# -- fixed programs --------------------------------------------------------------

# Each entry is already normalized (`normalize` leaves it unchanged, which
# test_lowering_async_sweep checks), so it runs exactly what it says.
FIXED: dict[str, Params] = {
    # straight-line tiles, copy loads, linalg.add, per-tile awaits
    "straight_copy_linalg": Params(shape=(64, 32), tile=(16, 32), ops=("add",)),
    # DMA loads/stores of whole-row tiles, affine relu after a linalg mul, a group
    "straight_dma_group": Params(shape=(64, 48), tile=(16, 48), ops=("mul", "relu"),
                                 compute=("linalg", "affine"), load="dma", store="dma",
                                 completion="group"),
    # the fixture's loop shape: affine.for, per-iteration allocs, a group
    "loop_group_copy": Params(shape=(128,), tile=(32,), ops=("sub",), structure="loop",
                              completion="group", load_fused=True),
    # a token carried through iter_args over shared buffers, DMA loads, i32
    "loop_iter_args_shared": Params(shape=(64, 24), tile=(16, 24), t="i32", ops=("max",),
                                    compute=("affine",), structure="loop", buffers="shared",
                                    completion="iter_args", load="dma"),
    # !async.value buffers allocated inside the producing executes, 2-D loop nest
    "loop_values": Params(shape=(32, 32), tile=(16, 16), ops=("add", "relu"),
                          compute=("linalg", "affine"), structure="loop", values=True,
                          subview_inside=True),
    # values in straight-line code, the write-back after `async.await %v`
    "straight_values_await": Params(shape=(96,), tile=(32,), ops=("mul",), values=True,
                                    store_at="await", load_fused=True, static_offsets=True),
    # two computes fused into one affine nest, f16, shared buffers chained by tokens
    "straight_shared_nest_f16": Params(shape=(48, 16), tile=(16, 16), t="f16",
                                       ops=("add", "relu"), compute=("affine", "affine"),
                                       fuse="nest", buffers="shared", completion="await_end"),
    # awaits in between instead of dependencies, in a loop, deallocs, memref DMA
    "loop_sync_dealloc": Params(shape=(64,), tile=(16,), ops=("relu", "add"),
                                compute=("affine", "linalg"), structure="loop", completion="sync", dealloc=True, store="mdma"),
    # two computes in one execute, the second in place
    "straight_in_place": Params(shape=(32, 64), tile=(8, 64), ops=("sub", "max"),
                                compute=("linalg", "linalg"), fuse="execute", in_place=True, completion="await_end"),
    # iter_args chaining only the write-backs (the loads of iterations overlap)
    "loop_chain_store": Params(shape=(24, 32), tile=(8, 16), ops=("add",),
                               compute=("affine",), structure="loop", completion="iter_args",
                               chain_at="store", load="dma"),
    # ping-pong slots of one buffer, two tokens carried, a unit-step tile loop
    "index_loop_slots": Params(shape=(128,), tile=(16,), ops=("add", "relu"),
                               compute=("linalg", "affine"), structure="index_loop",
                               buffers="slots", completion="iter_args", load="dma"),
    # a bias tile loaded once, every execute of a tile in one group, nested executes
    "bias_once_group_all": Params(shape=(64, 16), tile=(16, 16), ops=("add",), y_once=True,
                                  structure="loop", completion="group_all", tile_execute=True),
    # software-pipelined text (tile k+1's loads first), ping-pong slots, memref DMAs,
    # the consumers awaiting their producers in their bodies, i16
    "straight_prefetch_slots_i16": Params(shape=(96,), tile=(16,), t="i16", ops=("mul",),
                                          buffers="slots", prefetch=True, load="mdma",
                                          completion="group_all", deps_style="await"),
    # found by this sweep, fixed: 2-D tiles narrower than a row written back by
    # independent executes (their strided extents overlap: ordered, D-LOW-ASYNC)
    "straight_narrow_tiles_dma": Params(shape=(16, 32), tile=(8, 16), ops=("add",),
                                        load="dma", store="dma", completion="await_end"),
    # ... a fused nest (two raised ops through a scratch buffer) in independent
    # executes (one scratch buffer per execute)
    "straight_fused_nest_executes": Params(shape=(64,), tile=(16,), ops=("add", "relu"),
                                           compute=("affine", "affine"), fuse="nest",
                                           load="dma", store="dma", completion="await_end"),
    # ... an iter_args token initialised by the bias load (awaited before the loop)
    "loop_iter_args_bias_init": Params(shape=(128,), tile=(32,), ops=("add",), y_once=True,
                                       structure="loop", completion="iter_args",
                                       carried_init="y", load="dma"),
    # ... 40 tiles in straight-line code, all in a group: more live tokens than
    # the device allows (SEQ.max_active_tokens = 32) unless the oldest are awaited
    "straight_many_tiles_group": Params(shape=(320,), tile=(8,), ops=("add", "relu"),
                                        compute=("linalg", "affine"), load="dma", store="dma", completion="group"),
    # column-major 2-D loop nest inside one execute, computing straight on DDR subviews
    "wrapped_col_major_direct": Params(shape=(32, 48), tile=(16, 16), ops=("max", "relu"),
                                       compute=("linalg", "affine"), structure="loop",
                                       col_major=True, load="direct", store="direct",
                                       wrap_all=True, completion="group"),
}


def fixed_programs() -> list[AsyncProgram]:
    return [replace(build(p), name=n) for n, p in FIXED.items()]
