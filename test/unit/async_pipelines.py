"""A whole `async` pipeline program from its `Params`: each tile's loads,
compute stages and write-back, in straight-line code or `affine.for` loops,
with their completion; `build` adds the numpy reference, `inputs` draws
operands."""

from __future__ import annotations

import itertools

import numpy as np
from async_params import NP_OPS, NP_TYPES, SLOTS, AsyncProgram, Params, normalize
from async_text import AsyncText


class PipelineText(AsyncText):
    """A whole program: every tile's pipeline, in straight-line code or loops."""

    # -- one tile -----------------------------------------------------------
    def tile(
        self,
        d: int,
        off: list,
        dma_idx: list[str],
        slot,
        global_bufs: dict,
        y_src: tuple,
        tag: str | None,
        tag0: int,
        deps_in: list[str],
    ) -> str | None:
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
        lazy: set[str] = set()  # made inside the execute that fills them
        fast = ([] if p.load == "direct" else loaded) + ["o1", "o2"]
        for b in fast:
            if b.startswith("o"):
                continue  # outputs: made when first written
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
        out_early: dict[str, str] = {}  # outputs made before the executes
        if p.buffers == "tile" and not vals:
            for b in ("o1", "o2"):
                out_early[b] = None  # allocated on demand at tile level
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
            if ytok is not None and not (
                p.carried_init == "y" and deps_in and p.chain_at == "load" and p.load != "direct"
            ):
                # (else the loads depend on the carried token, which is the
                # Y load's in the first iteration and after it in the others)
                load_tok["Y"] = ytok
            if vals and yval is not None:
                load_val["Y"] = yval

        # computes
        self.split_at = len(self.lines)
        groups = [[0, 1]] if two and p.fuse != "none" else [[k] for k in range(len(p.ops))]
        cur_tok, cur_val, cur_buf = None, None, None  # the previous group's output
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
                deps += ldeps  # no loads: the chain orders the first compute
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
                a_in = ddr_view(dd, "Z")  # the previous execute's view is not visible
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
                exprs = [
                    (p.ops[0], "in0", "in1" if p.ops[0] != "relu" else None),
                    (p.ops[1], "r0", "in1" if p.ops[1] != "relu" else None),
                ]
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

    # -- the function ---------------------------------------------------------
    def build(self) -> str:
        p = self.p
        d = 1
        loop = p.structure != "straight"
        global_bufs: dict[str, str] = {}
        loaded = (
            [] if p.load == "direct" else ["X"] + (["Y"] if self.has_y and not p.y_once else [])
        )
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
                    self.dma(d + 1, p.load, "%Y", self.zero_idx(yb), yb, self.zero_idx(yb), ytag, 0)
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
        history: list[str | None] = []  # each tile's completing token
        pending_dealloc: list[str] = []
        ranges = [range(0, s, t) for s, t in zip(p.shape, p.tile)]
        if p.col_major:
            grid = [off[::-1] for off in itertools.product(*ranges[::-1])]
        else:
            grid = list(itertools.product(*ranges))
        segments: list[tuple[list[str], list[str]]] = []  # (loads, the rest) per tile
        for k, off in enumerate(grid):
            start = len(self.lines)
            chain: list[str] = []
            back = SLOTS if p.buffers == "slots" else 1
            if (p.buffers != "tile" or p.chain_at == "store") and len(history) >= back:
                if history[-back] is not None:
                    chain = [history[-back]]
            dma_idx = [self.c(o) for o in off]
            fin = self.tile(d, list(off), dma_idx, k % SLOTS, global_bufs, y_src, tag, 3 * k, chain)
            history.append(fin)
            self.complete(d, fin, group)
            if p.completion == "await_end" and fin is not None:
                finals.append(fin)
            if p.dealloc and (fin is None or p.completion in ("await", "sync")):
                self.dealloc(d, self.tile_bufs)
            else:
                pending_dealloc += self.tile_bufs
            if p.prefetch:
                segments.append((self.lines[start : self.split_at], self.lines[self.split_at :]))
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
        results: list[list[str]] = []  # each loop's token results, outermost first
        prev = [tok0] * n_carried  # oldest last
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
                head = (
                    f"{r}{':' + str(len(pvs)) if len(pvs) > 1 else ''} = {head} "
                    f"iter_args({inits}) -> ({tys})"
                )
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
                self.emit(
                    depth, f"{o} = affine.apply affine_map<(d0) -> (d0 * {p.tile[k]})>({ivs[k]})"
                )
                off.append(o)
                dma_idx.append(f"{ivs[k]} * {p.tile[k]}" if "mdma" not in (p.load, p.store) else o)
        slot = None
        if p.buffers == "slots":
            # the linear tile index mod SLOTS
            dims = [ivs[k] for k in looped]
            terms = []
            for n, k in enumerate(looped):
                mult = 1
                for k2 in looped[n + 1 :]:
                    mult *= counts[k2]
                e = f"d{n}" if p.structure == "index_loop" else f"d{n} floordiv {p.tile[k]}"
                terms.append(e if mult == 1 else f"({e}) * {mult}")
            ds = ", ".join(f"d{n}" for n in range(len(dims)))
            slot = self.fresh("slot")
            self.emit(
                depth,
                f"{slot} = affine.apply affine_map<({ds}) -> "
                f"(({' + '.join(terms)}) mod {SLOTS})>({', '.join(dims)})",
            )
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
                self.emit(
                    depth + 1,
                    f"affine.yield {', '.join(ys)} : {', '.join(['!async.token'] * len(ys))}",
                )
            self.emit(depth, "}")
        if carried:
            for r in results[0]:
                self.emit(d, f"async.await {r} : !async.token")
        if group is not None:
            self.emit(d, f"async.await_all {group}")


def build(p: Params) -> AsyncProgram:
    p = normalize(p)
    g = PipelineText(p)
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
