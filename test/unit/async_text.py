"""The MLIR text of an `async` pipeline, line by line: the state of one
program (SSA names, constants, memref types) and the helpers that emit its
allocs, subviews, DMAs, `async.execute`s, compute stages and groups."""

from __future__ import annotations

from async_params import FLOAT_ARITH, INT_ARITH, SLOTS, Params, needs_y


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


class AsyncText:
    """The state and the line-emitting helpers of one program's MLIR text:
    SSA names, constants, allocs, subviews, DMAs, executes, compute stages,
    groups (`async_pipelines.PipelineText` writes the tiles and the function)."""

    def __init__(self, p: Params):
        self.p = p
        self.lines: list[str] = []
        self.consts: dict[int, str] = {}
        self.n = 0
        self.has_y = needs_y(p.ops)
        self.rank = len(p.shape)
        self.ty = _memref(p.shape, p.t)
        self.yty = _memref(p.tile, p.t) if p.y_once else self.ty
        self.buf = _memref(p.tile, p.t, 2)
        self.slot_ty = _memref((SLOTS,) + tuple(p.tile), p.t, 2)
        self.slot_view = _memref(
            p.tile, p.t, 2, "strided<[%s], offset: ?>" % ", ".join(map(str, _strides(p.tile)))
        )
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
        ty = _memref(
            self.p.tile,
            self.p.t,
            layout=f"strided<[{', '.join(map(str, strides))}], offset: {o_ty}>",
        )
        self.types[name] = ty
        sizes = ", ".join(map(str, self.p.tile))
        ones = ", ".join(["1"] * self.rank)
        self.emit(
            d, f"{name} = memref.subview {mem}[{offs}] [{sizes}] [{ones}] : {self.ty} to {ty}"
        )
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
        self.emit(
            d,
            f"{name} = memref.subview {slots}[{first}, {zeros}] [1, {sizes}] [{ones}] : "
            f"{self.slot_ty} to {self.types[name]}",
        )
        return name

    def dma(
        self, d: int, kind: str, src: str, src_idx: str, dst: str, dst_idx: str, tag: str, slot: int
    ) -> None:
        n = 1
        for x in self.p.tile:
            n *= x
        stride = (
            f", {self.c(self.p.shape[1])}, {self.c(self.p.tile[1])}" if self.strided_dma else ""
        )
        tag_ty = self.types[tag]
        tys = f"{self.types[src]}, {self.types[dst]}, {tag_ty}"
        if kind == "dma":
            self.emit(
                d,
                f"affine.dma_start {src}[{src_idx}], {dst}[{dst_idx}], {tag}[{slot}], "
                f"{self.c(n)}{stride} : {tys}",
            )
            self.emit(d, f"affine.dma_wait {tag}[{slot}], {self.c(n)} : {tag_ty}")
        else:
            self.emit(
                d,
                f"memref.dma_start {src}[{src_idx}], {dst}[{dst_idx}], {self.c(n)}, "
                f"{tag}[{self.c(slot)}]{stride} : {tys}",
            )
            self.emit(d, f"memref.dma_wait {tag}[{self.c(slot)}], {self.c(n)} : {tag_ty}")

    def zero_idx(self, mem: str) -> str:
        """The first element of a tile-shaped memref `mem`."""
        del mem
        return ", ".join([self.c(0)] * self.rank)

    def execute(
        self, d: int, deps: list[str], operands: list[tuple[str, str]], n_values: int, base: str
    ) -> tuple[str, list[str]]:
        """Open `%t(, %v...) = async.execute [deps] (operands) -> values {`;
        the head is written by `close`, once the yielded values' types are
        known.  Binds each operand's block argument to its value's payload
        type; returns the token and the value names."""
        tok = self.fresh("t" + base)
        vals = [self.fresh("v" + base) for _ in range(n_values)]
        for v, a in operands:
            self.types[a] = self.types[v]
        inner = self.p.deps_style == "await" and self.p.completion != "sync"
        self.pending[tok] = (
            len(self.lines),
            d,
            [] if inner else list(deps),
            [] if inner else list(operands),
            vals,
        )
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
            self.emit(
                d + 1,
                f"async.yield {', '.join(yields)} : {', '.join(self.types[y] for y in yields)}",
            )
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
        self.emit(dd, f"affine.store {env[f'r{len(exprs) - 1}']}, {out}[{idx}] : {self.types[out]}")
        for k in reversed(range(self.rank)):
            self.emit(d + k, "}")

    def stage(self, d: int, k: int, a: str, y: str | None, out: str) -> None:
        """Compute stage `k` of `a` (and `y`) into `out`."""
        op, style = self.p.ops[k], self.p.compute[k]
        if style == "linalg":
            self.emit(
                d,
                f"linalg.{op} ins({a}, {y} : {self.types[a]}, {self.types[y]}) "
                f"outs({out} : {self.types[out]})",
            )
        elif op == "relu":
            self.nest(d, [("relu", "in0", None)], [a], out)
        else:
            self.nest(d, [(op, "in0", "in1")], [a, y], out)

    def _slot_line(self, name: str, slots: str, slot) -> str:
        first = self.c(slot) if isinstance(slot, int) else slot
        zeros = ", ".join(["0"] * self.rank)
        sizes = ", ".join(map(str, self.p.tile))
        ones = ", ".join(["1"] * (self.rank + 1))
        return (
            f"{name} = memref.subview {slots}[{first}, {zeros}] [1, {sizes}] [{ones}] : "
            f"{self.slot_ty} to {self.types[name]}"
        )

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
