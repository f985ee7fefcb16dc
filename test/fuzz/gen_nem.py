"""Grammar-aware generation of `.nem` programs (SPEC §12).

`gen_program(rng)` writes a program from the grammar: an optional device
directive, consts (sometimes long chains, big or nested expressions),
buffers on every level, typed and untyped regions, loops (nested, pipelined,
sometimes with huge trip counts), transfers, stores, compute tasks, waits
and deps, decorators on every target.  Most programs are well formed; the
values are chosen around the limits (D-LIMITS, D-INT-RANGE) and the checks
(extents, alignment, element types), so that the checker, the printer and
the runtime all see near-miss input.  `rng` is a `random.Random`; hypothesis
drives it with `st.randoms()` in the tests.
"""

from __future__ import annotations

import random

ELEMS = {"i8": 1, "u8": 1, "i16": 2, "f16": 2, "bf16": 2, "i32": 4, "f32": 4}
UNARY = ["relu", "sigmoid", "tanh", "exp", "abs", "neg"]
BINARY = ["add", "mul", "sub", "max", "min"]


class _Gen:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.lines: list[str] = []
        self.consts: list[str] = []
        self.buffers: list[tuple[str, str, int]] = []  # name, level, size
        self.regions: list[tuple[str, str, int]] = []  # name, elem, count
        self.tokens: list[str] = []
        self.n = 0

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def number(self) -> str:
        r = self.rng.random()
        if r < 0.8:
            return str(self.rng.choice((0, 1, 2, 3, 4, 8, 16, 64, 128, 256, 1024)))
        if r < 0.9 and self.consts:
            return self.rng.choice(self.consts)
        return str(self.rng.choice((2**31, 2**62, 2**63 - 1, 10**12, 7, 65535)))

    def expr(self, depth: int = 0) -> str:
        if depth > 3 or self.rng.random() < 0.5:
            return self.number()
        op = self.rng.choice(("+", "-", "*", "/", "mod"))
        e = f"{self.expr(depth + 1)} {op} {self.expr(depth + 1)}"
        return f"({e})" if self.rng.random() < 0.3 else e

    def stmt_const(self) -> None:
        name = self.fresh("C")
        self.lines.append(f"const {name} = {self.expr()}")
        self.consts.append(name)

    def stmt_buffer(self) -> None:
        name = self.fresh("B")
        level = self.rng.choice(("DDR", "L2", "L2", "L1", "L1[0]", "L1[1]"))
        size = self.rng.choice((64, 256, 1024, 4096, 65536, 10**9))
        align = self.rng.choice(("", ", align=64", ", align=3", ", align=0"))
        deco = self.rng.choice(("", "", " @debug(b)", " @readonly"))
        self.lines.append(f"buffer {name} : {level} (size={size}{align}){deco}")
        self.buffers.append((name, level, size))

    def region_text(self, indent: str = "", iv: str | None = None) -> tuple[str, str, int]:
        buf, _, size = self.rng.choice(self.buffers)
        elem = self.rng.choice(list(ELEMS))
        count = self.rng.choice((1, 4, 16, 64, 256))
        ext = count * ELEMS[elem]
        off = self.rng.choice(("0", str(ext), str(size - ext), str(size)))
        if iv is not None and self.rng.random() < 0.6:
            off = self.rng.choice((f"({iv} mod 2) * {ext}", f"{iv} * {ext}", f"{iv}"))
        if self.rng.random() < 0.15:
            return f"region({buf}, {off}, {ext})", "", ext
        shape = self.rng.choice(
            (f"[{count}]", f"[1, {count}]", f"[{count}, 1]", "[0]", f"[{count * 2}]")
        )
        layout = self.rng.choice(
            (
                "layout=N" if shape.count(",") == 0 else "layout=MK",
                "strides=[1]",
                f"strides=[{ELEMS[elem]}]",
                "layout=NHWC",
            )
        )
        return f"region({buf}, {off}, {ext}) elem={elem}, shape={shape}, {layout}", elem, count

    def stmt_region(self, iv: str | None) -> None:
        name = self.fresh("R")
        text, elem, count = self.region_text(iv=iv)
        kw = "let " if iv is not None or self.rng.random() < 0.2 else ""
        deco = self.rng.choice(("", "", "", " @materialized", " @readonly", " @writeonly"))
        self.lines.append(f"{kw}{name} = {text}{deco}")
        self.regions.append((name, elem, count))

    def deps(self) -> str:
        if not self.tokens or self.rng.random() < 0.4:
            return ""
        picks = self.rng.sample(self.tokens, min(len(self.tokens), self.rng.choice((1, 2))))
        return ", deps=[" + ", ".join(picks) + "]"

    def operand(self) -> str:
        if self.rng.random() < 0.2:
            return self.region_text()[0]
        name = self.rng.choice(self.regions)[0]
        return name + self.rng.choice(("", "", "", " @readonly", " @writeonly", " @materialized"))

    def stmt_task(self) -> None:
        if not self.regions:
            return self.stmt_region(None)
        tok = self.fresh("t")
        mode = self.rng.choice(("async", "async", "sync"))
        kind = self.rng.randrange(5)
        deco = self.rng.choice(
            (
                "",
                "",
                "",
                " @resource(DMA[0])",
                " @resource(CSTL[1])",
                " @seq_engine(0)",
                " @deterministic",
                " @memmove",
            )
        )
        if kind <= 1:
            verb = "transfer" if kind == 0 else "store"
            d = self.deps()
            text = f"{tok} = {verb}.{mode}(dst={self.operand()}, src={self.operand()}{d}){deco}"
        elif kind == 2:
            op = self.rng.choice(UNARY)
            text = f"{tok} = {op}.{mode} in {self.operand()} out {self.operand()}{deco}"
        elif kind == 3:
            op = self.rng.choice(BINARY)
            text = (
                f"{tok} = {op}.{mode} in {self.operand()}, {self.operand()} "
                f"out {self.operand()}{deco}"
            )
        else:
            text = (
                f"{tok} = gemm.{mode} in {self.operand()}, {self.operand()} "
                f"out {self.operand()} accum_type={self.rng.choice(('f32', 'i32', 'f16'))}"
            )
        self.lines.append(text)
        self.tokens.append(tok)
        if self.rng.random() < 0.3:
            self.lines.append(f"wait({tok})")

    def stmt_loop(self, depth: int) -> None:
        iv = self.fresh("i")
        hi = self.rng.choice(
            (
                "0",
                "1",
                "3",
                "7",
                "T - 1" if "T" in self.consts else "2",
                "100",
                "100000",
                "9223372036854775806",
            )
        )
        mif = self.rng.choice(
            ("", "", " @max_in_flight(2)", " @max_in_flight(4)", " @max_in_flight(0)")
        )
        self.lines.append(f"loop {iv} in [0..{hi}]{mif}:")
        saved = (len(self.regions), len(self.tokens))
        for _ in range(self.rng.randint(1, 5)):
            self.statement(depth + 1, iv)
        if self.tokens[saved[1] :] and self.rng.random() < 0.7:
            self.lines.append("wait(" + ", ".join(self.tokens[saved[1] :]) + ")")
        del self.regions[saved[0] :]
        del self.tokens[saved[1] :]
        self.lines.append("endloop")

    def statement(self, depth: int, iv: str | None) -> None:
        r = self.rng.random()
        if r < 0.25:
            self.stmt_region(iv)
        elif r < 0.75:
            self.stmt_task()
        elif r < 0.9 and depth < 4:
            self.stmt_loop(depth)
        elif iv is None:
            self.stmt_const()

    def program(self) -> str:
        head = self.rng.choice(
            (
                "",
                'device "npm_lite.nem"\n',
                'include "npm_pro.nem"\ndevice npm_pro_x1\n',
                'device "npm_pro.nem"\n',
            )
        )
        if self.rng.random() < 0.7:
            self.lines.append("program p:")
        for _ in range(self.rng.randint(0, 3)):
            self.stmt_const()
        for _ in range(self.rng.randint(1, 4)):
            self.stmt_buffer()
        for _ in range(self.rng.randint(1, 12)):
            self.statement(0, None)
        return head + "\n".join(self.lines) + "\n"


def gen_program(rng: random.Random) -> str:
    return _Gen(rng).program()


__all__ = ["gen_program"]
