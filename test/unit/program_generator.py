"""Random valid `.nem` programs for property tests (hypothesis or a seeded
`random.Random`): consts with + - * / mod and parentheses, buffers at
DDR/L2/L1/L1[k], named/let/inline regions with elem/shape/layout-or-strides
and quant descriptors, loops with decorators, transfers, stores, compute
tasks of every registry opcode with deps, waits, decorators.  `Generated`
keeps the names, decorators and quant descriptors a program was built with,
so a test can check that they survive.  Used by the `.nem` round trip
(test_roundtrip.py), the bytecode round trip and the MLIR interop tests.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from hypothesis import strategies as st

from nem.dialect.attributes import BITWIDTH, fmt_num
from nem.dialect.registry import OpcodeSpec, opcodes

REGISTRY = opcodes()
OPCODES = sorted(REGISTRY)
ELEMS = ["i4", "i8", "i16", "i32", "u8", "u16", "u32", "f16", "bf16", "f32"]
LAYOUTS_BY_RANK = {
    1: ["C", "N"],
    2: ["NC", "MK", "KN", "MN"],
    3: ["CHW", "NHW"],
    4: ["NHWC", "NCHW", "HWIO"],
}
FLOATS = [0.5, 0.25, 1.0, 2.0, 0.125, 1e-05, 0.1, 3.75, 0.0078125]
PREFIXES = ["X", "W", "Y", "A", "Bq", "acc", "tile", "buf", "c", "t", "R", "Lx", "pp", "x_L1"]
REGION_DECOS = [
    "@materialized",
    "@readonly",
    "@writeonly",
    "@debug(x)",
    '@debug("x")',
    "@profile(p)",
]
TASK_DECOS = [
    "@resource(CSTL[0])",
    "@resource(NMU[1])",
    "@resource(DMA[0])",
    "@resource(VPU[0])",
    "@seq_engine(1)",
    "@deterministic",
    '@debug("x")',
    "@debug(x)",
    '@profile("hot path")',
]
TRANSFER_DECOS = TASK_DECOS + ["@memmove"]
LOOP_DECOS = ["@max_in_flight(2)", "@max_in_flight(1)", "@deterministic", "@debug(loop)"]
BUFFER_DECOS = ["@debug(x)", '@profile("b")']


# ---------------------------------------------------------------------------
# Program generator
# ---------------------------------------------------------------------------


@dataclass
class _Scope:
    ints: list[str] = field(default_factory=list)  # consts, int lets, loop vars
    regions: list[str] = field(default_factory=list)  # typed region names
    tokens: list[str] = field(default_factory=list)


class HypothesisSource:
    """Random choices drawn from hypothesis (shrinkable)."""

    def __init__(self, draw):
        self._draw = draw

    def pick(self, seq):
        return self._draw(st.sampled_from(seq))

    def flip(self, p: float) -> bool:
        return self._draw(st.integers(0, 99)) < p * 100

    def int_(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi))

    def sublist(self, seq, lo: int, hi: int) -> list:
        return self._draw(st.lists(st.sampled_from(seq), min_size=lo, max_size=hi, unique=True))


class RandomSource:
    """The same choices from a seeded `random.Random` (fast, for the
    generator's own coverage check)."""

    def __init__(self, seed: int):
        self._r = random.Random(seed)

    def pick(self, seq):
        return self._r.choice(list(seq))

    def flip(self, p: float) -> bool:
        return self._r.random() < p

    def int_(self, lo: int, hi: int) -> int:
        return self._r.randint(lo, hi)

    def sublist(self, seq, lo: int, hi: int) -> list:
        seq = list(dict.fromkeys(seq))
        return self._r.sample(seq, self._r.randint(min(lo, len(seq)), min(hi, len(seq))))


class ProgramGen:
    """Draws one program; records what must survive the round trip."""

    def __init__(self, draw):
        self.draw = draw
        self.n = 0
        self.lines: list[str] = []
        self.names: list[str] = []
        self.decos: list[str] = []
        self.quants: list[str] = []
        self.consts: list[str] = []
        self.const_values: dict[str, int] = {}
        self.loopvars: list[tuple[str, int]] = []  # (name, upper bound) of enclosing loops
        self.buffers: list[str] = []
        self.scopes: list[_Scope] = [_Scope()]

    # -- helpers -------------------------------------------------------------
    def pick(self, seq):
        return self.draw.pick(seq)

    def flip(self, p: float = 0.5) -> bool:
        return self.draw.flip(p)

    def int_(self, lo: int, hi: int) -> int:
        return self.draw.int_(lo, hi)

    def sublist(self, seq, lo: int, hi: int) -> list:
        return self.draw.sublist(seq, lo, hi)

    def name(self, prefix: str | None = None) -> str:
        self.n += 1
        p = prefix or self.pick(PREFIXES)
        form = self.int_(0, 3)
        name = f"{p}_{self.n}" if form < 2 else f"{p}{self.n}" if form == 2 else f"{p}_{self.n}_v"
        self.names.append(name)
        return name

    def visible(self, what: str) -> list[str]:
        return [x for s in self.scopes for x in getattr(s, what)]

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def deco_list(self, choices: list[str], max_n: int = 2) -> str:
        picked = self.sublist(choices, 0, max_n)
        self.decos += picked
        return "".join(" " + d for d in picked)

    # -- expressions ---------------------------------------------------------
    def expr(self, depth: int = 2, const_only: bool = False) -> str:
        atoms = self.consts if const_only else self.visible("ints")
        kind = self.int_(0, 3 if depth > 0 else 1)
        if kind == 0 or not atoms and kind == 1:
            return str(self.int_(0, 64))
        if kind == 1:
            return self.pick(atoms)
        op = self.pick(["+", "-", "*", "/", "mod"])
        lhs = self.expr(depth - 1, const_only)
        # literal non-zero divisors: no division by zero (CONST-05)
        rhs = str(self.int_(1, 7)) if op in ("/", "mod") else self.expr(depth - 1, const_only)
        text = f"{lhs} {op} {rhs}"
        return f"({text})" if kind == 3 else text

    def vexpr(self, value: int, depth: int = 2) -> str:
        """An expression whose value is exactly `value` (>= 0), built from
        literals, consts of known value and + - * / mod, with parentheses."""
        kind = self.int_(0, 5) if depth > 0 else 0
        sub = lambda v: self._wrap(self.vexpr(v, depth - 1))  # noqa: E731
        if kind == 1 and self.consts:
            c = self.pick(self.consts)
            v = self.const_values[c]
            return f"{c} + {sub(value - v)}" if value >= v else f"{c} - {sub(v - value)}"
        if kind == 2:
            k = self.int_(1, 4)
            return f"{sub(value * k)} / {k}"
        if kind == 3 and value > 0:
            k = self.int_(1, 8)
            q, r = divmod(value, k)
            return f"{sub(q)} * {k} + {r}"
        if kind == 4:
            return f"{sub(value)} mod {value + self.int_(1, 9)}"
        if kind == 5:
            d = self.int_(0, 9)
            return f"{sub(value + d)} - {d}"
        return str(value)

    def _wrap(self, text: str) -> str:
        return f"({text})" if not text.isidentifier() and not text.isdigit() else text

    def float_(self) -> str:
        return fmt_num(self.pick(FLOATS))

    # -- regions ---------------------------------------------------------------
    def quant(self, shape: list[int]) -> str:
        kind = self.int_(0, 2)
        if kind == 0:
            zp = self.int_(-3, 3)
            q = f"per_tensor(scale={self.float_()}, zero_point={fmt_num(zp)})"
        else:
            axis = self.int_(0, len(shape) - 1)
            if kind == 1:
                n = shape[axis]
                head = f"per_channel(axis={axis}, "
            else:
                group = self.pick([d for d in (1, 2, 4) if shape[axis] % d == 0])
                n = shape[axis] // group
                head = f"per_group(axis={axis}, group_size={group}, "
            scales = ", ".join(self.float_() for _ in range(n))
            zps = ", ".join(fmt_num(self.int_(-2, 5)) for _ in range(n))
            q = f"{head}scales=[{scales}], zero_points=[{zps}])"
        self.quants.append(q)
        return q

    def type_attrs(self, elem: str, dims: list[int]) -> str:
        """`elem=..., shape=[...], layout=...|strides=[...][, quant=...]` for a
        packed row-major region; quant only on integer elements."""
        rank = len(dims)
        if elem[0] in "iu" and self.flip(0.4):
            shape = ", ".join(map(str, dims))
            tail = f", quant={self.quant(dims)}"
        else:
            shape = ", ".join(self.vexpr(d, 1) for d in dims)
            tail = ""
        text = f"elem={elem}, shape=[{shape}], "
        if self.flip(0.7):
            text += f"layout={self.pick(LAYOUTS_BY_RANK[rank])}"
        else:
            strides = [math.prod(dims[i + 1 :]) for i in range(rank)]
            text += "strides=[" + ", ".join(self.vexpr(st_, 1) for st_ in strides) + "]"
        return text + tail

    def region(
        self, typed: bool = True, elem: str | None = None, dims: list[int] | None = None
    ) -> str:
        """A region that stays inside its buffer for every iteration of the
        enclosing loops, with an extent that fits its elements exactly."""
        elem = elem or self.pick(ELEMS)
        dims = dims or [self.pick([1, 2, 4, 8]) for _ in range(self.int_(1, 4))]
        ext = max(1, math.ceil(math.prod(dims) * BITWIDTH[elem] / 8))
        base = 64 * self.int_(0, 4096)
        offset = self.vexpr(base)
        if self.loopvars and self.flip(0.6):
            iv, _ = self.pick(self.loopvars)
            offset = f"{iv} * {self._wrap(self.vexpr(ext, 1))} + {self._wrap(offset)}"
        text = f"region({self.pick(self.buffers)}, {offset}, {self.vexpr(ext)})"
        return text + (" " + self.type_attrs(elem, dims) if typed else "")

    def operand(
        self,
        typed: bool = True,
        decos: bool = False,
        elem: str | None = None,
        dims: list[int] | None = None,
    ) -> str:
        regions = self.visible("regions")
        use_named = regions and self.flip(0.3 if elem else 0.6)
        text = self.pick(regions) if use_named else self.region(typed, elem, dims)
        if decos:
            text += self.deco_list(REGION_DECOS, 1)
        return text

    # -- statements ------------------------------------------------------------
    def const(self) -> None:
        name = self.name("c")
        if self.flip(0.2):
            value = -self.int_(1, 9)
            text = f"0 - {-value}"
        else:
            value = self.int_(0, 64)
            text = self.vexpr(value)
        self.emit(0, f"const {name} = {text}")
        self.consts.append(name)
        self.const_values[name] = value
        self.scopes[0].ints.append(name)

    def buffer(self) -> None:
        name = self.name("buf")
        level = self.pick(["DDR", "L2", "L1", "L1[0]", "L1[1]"])
        size = self.vexpr(1 << 20, 1)  # holds every region the generator writes
        props = [f"size={size}"]
        if self.flip():
            props.append(f"align={self.pick([16, 32, 64])}")
            if self.flip(0.2):
                props.reverse()
        self.emit(
            0, f"buffer {name} : {level} ({', '.join(props)}){self.deco_list(BUFFER_DECOS, 1)}"
        )
        self.buffers.append(name)

    def statement(self, depth: int) -> None:
        scope = self.scopes[-1]
        kind = self.pick(
            [
                "region",
                "let_region",
                "let_int",
                "let_value",
                "transfer",
                "store",
                "compute",
                "compute",
                "compute",
                "wait",
                "loop",
            ]
        )
        if kind in ("region", "let_region"):
            name = self.name(self.pick(["X", "Y", "W", "R", "pp"]))
            prefix = "let " if kind == "let_region" else ""
            self.emit(depth, f"{prefix}{name} = {self.region()}{self.deco_list(REGION_DECOS)}")
            scope.regions.append(name)
        elif kind == "let_int":
            name = self.name("n")
            self.emit(depth, f"let {name} = {self.expr()}")
            scope.ints.append(name)
        elif kind == "let_value":
            name = self.name("v")
            value = self.pick(
                [
                    '"some text"',
                    "[1, 2, 3]",
                    f"[{self.float_()}, 2]",
                    f"[{self.expr(1)}, {self.expr(1)}]",
                    "f16",
                ]
            )
            self.emit(depth, f"let {name} = {value}")
            self.names.append(name)
        elif kind in ("transfer", "store"):
            self.move(kind, depth)
        elif kind == "compute":
            self.compute(depth)
        elif kind == "wait":
            tokens = self.visible("tokens")
            if tokens:
                ts = self.sublist(tokens, 1, 3)
                self.emit(depth, f"wait({', '.join(ts)}){self.deco_list(['@debug(w)'], 1)}")
        elif kind == "loop" and depth < 2:
            self.loop(depth)

    def token(self, depth: int, text: str) -> None:
        if self.flip(0.75):
            name = self.name("t")
            self.scopes[-1].tokens.append(name)
            text = f"{name} = {text}"
        self.emit(depth, text)

    def deps(self, sep: str) -> str:
        tokens = self.visible("tokens")
        if not tokens or self.flip(0.4):
            return ""
        ts = self.sublist(tokens, 1, 3)
        return f"{sep}deps=[{', '.join(ts)}]"

    def move(self, kw: str, depth: int) -> None:
        mode = self.pick(["async", "sync"])
        typed = self.flip(0.6)
        elem = self.pick(ELEMS)
        dims = [self.pick([1, 2, 4, 8]) for _ in range(self.int_(1, 4))]
        dst, src = self.operand(typed, False, elem, dims), self.operand(typed, False, elem, dims)
        text = f"{kw}.{mode}(dst={dst}, src={src}{self.deps(', ')})"
        self.token(depth, text + self.deco_list(TRANSFER_DECOS if kw == "transfer" else TASK_DECOS))

    def attr_value(self, type_: str) -> str:
        if type_ == "int":
            return self.expr(1)
        if type_ == "int_list":
            return "[" + ", ".join(self.expr(1) for _ in range(self.int_(1, 4))) + "]"
        if type_ == "float":
            return self.float_()
        if type_ == "number":
            return self.float_() if self.flip() else self.expr(1)
        if type_ == "elem":
            return self.pick(ELEMS)
        return '"' + self.pick(["my_op", "custom.fused", "x"]) + '"'

    def compute(self, depth: int) -> None:
        spec: OpcodeSpec = REGISTRY[self.pick(OPCODES)]
        mode = self.pick(["async", "sync"])

        def operands(side) -> list[str]:
            out: list[str] = []
            optional_budget = self.int_(0, len(side))
            for o in side:
                if not o.required and not out and o.variadic:
                    count = self.int_(1, 2)  # the grammar needs at least one operand
                elif not o.required:
                    if optional_budget == 0:
                        break
                    optional_budget -= 1
                    count = 1
                else:
                    count = self.int_(1, 3) if o.variadic else 1
                out += [self.operand(True, True, elem, dims) for _ in range(count)]
            return out

        elem = self.pick(["f16", "f16", "i8", "f32", "bf16"])
        dims = [self.pick([1, 2, 4, 8]) for _ in range(self.int_(1, 4))]
        ins, outs = operands(spec.inputs), operands(spec.outputs)
        text = f"{spec.name}.{mode} in {', '.join(ins)} out {', '.join(outs)}{self.deps(' ')}"
        for a in spec.attributes.values():
            if a.required or self.flip():
                text += f" {a.name}={self.attr_value(a.type)}"
        if spec.open_attributes and self.flip():
            text += f' tile={self.expr(1)} mode="fast"'
        self.token(depth, text + self.deco_list(TASK_DECOS))

    def loop(self, depth: int) -> None:
        iv = self.name("i")
        # small trip counts (the verifier enumerates loop iterations), lb <= ub
        lb = self.int_(0, 2)
        ub = lb + self.int_(0, 5)
        self.emit(
            depth,
            f"loop {iv} in [{self.vexpr(lb, 1)}..{self.vexpr(ub, 1)}]{self.deco_list(LOOP_DECOS)}:",
        )
        self.scopes.append(_Scope(ints=[iv]))
        self.loopvars.append((iv, ub))
        for _ in range(self.int_(1, 5)):
            self.statement(depth + 1)
        self.loopvars.pop()
        self.scopes.pop()
        self.emit(depth, "endloop")

    def program(self) -> str:
        if self.flip(0.5):
            self.emit(0, f"program {self.name('prog')}:")
        if self.flip(0.3):
            self.emit(0, "# a comment the printer drops")
        for _ in range(self.int_(0, 4)):
            self.const()
        for _ in range(self.int_(1, 3)):
            self.buffer()
        for _ in range(self.int_(1, 10)):
            self.statement(0)
        return "\n".join(self.lines) + "\n"


@dataclass
class Generated:
    text: str
    names: list[str]
    decos: list[str]
    quants: list[str]


@st.composite
def programs(draw) -> Generated:
    return generate(HypothesisSource(draw))


def generate(source) -> Generated:
    g = ProgramGen(source)
    text = g.program()
    return Generated(text, g.names, g.decos, g.quants)
