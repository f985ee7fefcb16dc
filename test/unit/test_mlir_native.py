"""The native backend of `compute op="mlir.kernel"` (D-RT-MLIR-JIT):
differential testing against the interpreter on random kernels, the exact
loop sinking, the fallback notices and the per-kernel cache.

The differential test generates random kernels (elementwise expression trees
over f32/f16/bf16/i8/i32 with conversions, division, shifts and comparisons;
matmul nests in every loop order; row reductions with iter_args; stencils
that sometimes read past the end) and random inputs with edge values (NaN,
infinities, signed zeros, subnormals, INT_MIN, -1, shift widths), runs each
on both backends and requires the same outputs bit for bit (any NaN equal to
any NaN) or the same NumericError message.  Default: a fixed-seed run of
`NEM_JIT_DIFF` kernels (40); e.g. `NEM_JIT_DIFF=2000 python -m pytest
test/unit/test_mlir_native.py -k differential` for a long run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from nem.runtime import mlir_native
from nem.runtime.api import NemInterpreter
from nem.runtime.escape_hatch import EscapeHatch
from nem.runtime.kernels import NotSupported, NumericError, Tensor
from nem.runtime.loop_sink import sink_parallel_loops
from nem.runtime.mlir_kernel import CompiledKernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import bench_mlir_kernel  # noqa: E402 - the benchmark's kernels and program

pytestmark = pytest.mark.skipif(
    mlir_native.unavailable() is not None, reason=str(mlir_native.unavailable())
)

DT = {
    "f32": np.float32,
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "i8": np.int8,
    "i32": np.int32,
}
FLOATS = ("f32", "f16", "bf16")
INTS = ("i8", "i32")


def run(text, ins, outs, index_args=(), backend="auto", hatch=None):
    """Run a kernel on one backend (in `hatch`, else a new escape hatch);
    returns the outs or the NumericError text."""
    hatch = hatch if hatch is not None else EscapeHatch(backend)
    try:
        attrs = {"op": "mlir.kernel", "kernel": text}
        if index_args:
            attrs["index_args"] = list(index_args)
        return hatch.run_task(
            [Tensor(a.copy(), e) for a, e in ins], [Tensor(a.copy(), e) for a, e in outs], attrs
        )
    except NumericError as e:
        return str(e)


def same(x, y) -> bool:
    """Equal outputs bit for bit (any NaN equals any NaN), or equal errors."""
    if isinstance(x, str) or isinstance(y, str):
        return x == y
    for a, b in zip(x, y):
        if a.dtype.kind in "iu":
            if not np.array_equal(a, b):
                return False
            continue
        fa, fb = a.astype(np.float32), b.astype(np.float32)
        nan = np.isnan(fa)
        word = np.dtype(f"u{a.dtype.itemsize}")
        if not (
            np.array_equal(nan, np.isnan(fb))
            and np.array_equal(a[~nan].view(word), b[~nan].view(word))
        ):
            return False
    return True


# ---------------------------------------------------------------------------
# Random kernels

EDGE_F = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    np.inf,
    -np.inf,
    np.nan,
    1e-40,
    -3e-39,
    65504.0,
    1e30,
    -1e30,
    2.5,
    -2.5,
    127.5,
    -128.5,
    3.0e9,
]


def values(rng, elem: str, shape) -> np.ndarray:
    n = int(np.prod(shape))
    if elem in FLOATS:
        v = rng.uniform(-4, 4, n)
        pick = rng.random(n) < 0.25
        v[pick] = rng.choice(EDGE_F, pick.sum())
        with np.errstate(all="ignore"):
            return v.astype(DT[elem]).reshape(shape)
    info = np.iinfo(DT[elem])
    v = rng.integers(info.min, info.max, n, endpoint=True)
    pick = rng.random(n) < 0.3
    v[pick] = rng.choice([0, -1, 1, 7, 8, 31, 32, info.min, info.max], pick.sum())
    return v.astype(DT[elem]).reshape(shape)


class Expr:
    """An elementwise expression tree, emitted as MLIR lines."""

    def __init__(self, rng, loads: dict[str, str]):
        self.rng, self.loads, self.lines, self.n = rng, loads, [], 0

    def fresh(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def emit(self, line: str) -> str:
        v = self.fresh()
        self.lines.append(f"{v} = {line}")
        return v

    def const(self, t: str) -> str:
        if t in FLOATS:
            c = float(self.rng.choice([0.0, -0.0, 1.0, 0.5, 3.0, -2.0, 1e-3]))
            return self.emit(f"arith.constant {c!r} : {t}")
        return self.emit(f"arith.constant {int(self.rng.choice([0, 1, -1, 3, 7, 100]))} : {t}")

    def gen(self, t: str, depth: int) -> str:
        r = self.rng
        if depth == 0 or r.random() < 0.2:
            if t in self.loads and r.random() < 0.85:
                return self.loads[t]
            others = [u for u in self.loads if u != t]
            if others and r.random() < 0.5:
                return self.convert(self.loads[str(r.choice(others))], str(r.choice(others)), t)
            return self.const(t)
        return self.float_op(t, depth) if t in FLOATS else self.int_op(t, depth)

    def convert(self, v: str, src: str, dst: str) -> str:
        if src == dst:
            return v
        if src in FLOATS and dst in FLOATS:
            if src == "f32":
                return self.emit(f"arith.truncf {v} : f32 to {dst}")
            wide = self.emit(f"arith.extf {v} : {src} to f32")
            return self.convert(wide, "f32", dst)
        if src in INTS and dst in FLOATS:
            op = "sitofp" if self.rng.random() < 0.7 else "uitofp"
            return self.emit(f"arith.{op} {v} : {src} to {dst}")
        if src in FLOATS and dst in INTS:
            op = "fptosi" if self.rng.random() < 0.8 else "fptoui"
            return self.emit(f"arith.{op} {v} : {src} to {dst}")
        if src == "i8":
            ext = "extsi" if self.rng.random() < 0.6 else "extui"
            return self.emit(f"arith.{ext} {v} : i8 to i32")
        return self.emit(f"arith.trunci {v} : i32 to i8")

    def float_op(self, t: str, depth: int) -> str:
        r = self.rng
        k = r.random()
        if k < 0.25:
            op = str(
                r.choice(
                    [
                        "negf",
                        "math.absf",
                        "math.sqrt",
                        "math.exp",
                        "math.tanh",
                        "math.floor",
                        "math.log1p",
                        "math.sin",
                        "math.round",
                    ]
                )
            )
            name = op if "." in op else f"arith.{op}"
            return self.emit(f"{name} {self.gen(t, depth - 1)} : {t}")
        if k < 0.85:
            op = str(
                r.choice(
                    [
                        "addf",
                        "subf",
                        "mulf",
                        "divf",
                        "maximumf",
                        "minimumf",
                        "math.powf",
                        "math.atan2",
                    ]
                )
            )
            name = op if "." in op else f"arith.{op}"
            a, b = self.gen(t, depth - 1), self.gen(t, depth - 1)
            return self.emit(f"{name} {a}, {b} : {t}")
        a, b = self.gen(t, depth - 1), self.gen(t, depth - 1)
        pred = str(r.choice(["olt", "oge", "une", "ord", "ugt", "oeq"]))
        c = self.emit(f"arith.cmpf {pred}, {a}, {b} : {t}")
        return self.emit(f"arith.select {c}, {a}, {b} : {t}")

    def int_op(self, t: str, depth: int) -> str:
        r = self.rng
        w = int(t[1:])
        a, b = self.gen(t, depth - 1), self.gen(t, depth - 1)
        op = str(
            r.choice(
                [
                    "addi",
                    "subi",
                    "muli",
                    "divsi",
                    "remsi",
                    "divui",
                    "remui",
                    "floordivsi",
                    "ceildivsi",
                    "shli",
                    "shrsi",
                    "shrui",
                    "maxsi",
                    "minui",
                    "andi",
                    "xori",
                    "select",
                    "math.absi",
                    "math.ctpop",
                ]
            )
        )
        if op.startswith("math."):
            return self.emit(f"{op} {a} : {t}")
        if op.startswith("sh") and r.random() < 0.8:  # mostly in range
            m = self.emit(f"arith.constant {w - 1} : {t}")
            b = self.emit(f"arith.andi {b}, {m} : {t}")
        if op == "select":
            c = self.emit(f"arith.cmpi {r.choice(['slt', 'ult', 'eq', 'sge'])}, {a}, {b} : {t}")
            return self.emit(f"arith.select {c}, {a}, {b} : {t}")
        return self.emit(f"arith.{op} {a}, {b} : {t}")


def eltwise_kernel(rng):
    shape = [int(rng.integers(1, 5)), int(rng.integers(1, 9))]
    types = list(dict.fromkeys(str(t) for t in rng.choice([*FLOATS, *INTS], rng.integers(1, 4))))
    out_t = str(rng.choice(types))
    mt = lambda t: f"memref<{shape[0]}x{shape[1]}x{t}>"  # noqa: E731
    params = [f"%a{k}: {mt(t)}" for k, t in enumerate(types)] + [f"%z: {mt(out_t)}"]
    ex = Expr(rng, {t: f"%x{k}" for k, t in enumerate(types)})
    root = ex.gen(out_t, int(rng.integers(1, 5)))
    loads = [f"%x{k} = affine.load %a{k}[%i, %j] : {mt(t)}" for k, t in enumerate(types)]
    text = (
        f"func.func @kernel({', '.join(params)}) {{\n"
        f"  affine.for %i = 0 to {shape[0]} {{\n  affine.for %j = 0 to {shape[1]} {{\n    "
        + "\n    ".join(loads + ex.lines)
        + f"\n    affine.store {root}, %z[%i, %j] : "
        f"{mt(out_t)}\n  }}\n  }}\n  func.return\n}}"
    )
    ins = [(values(rng, t, shape), t) for t in types]
    return text, ins, [(values(rng, out_t, shape), out_t)], ()


def matmul_kernel(rng):
    t = str(rng.choice(FLOATS))
    m, n, k = (int(v) for v in rng.integers(1, 12, 3))
    order = list(rng.permutation(["i", "j", "k"]))
    bounds = {"i": m, "j": n, "k": k}
    a_t, b_t, c_t = f"memref<{m}x{k}x{t}>", f"memref<{k}x{n}x{t}>", f"memref<{m}x{n}x{t}>"
    body = (
        f"%a = affine.load %A[%i, %k] : {a_t}\n%b = affine.load %B[%k, %j] : {b_t}\n"
        f"%c = affine.load %C[%i, %j] : {c_t}\n%p = arith.mulf %a, %b : {t}\n"
        f"%s = arith.addf %c, %p : {t}\naffine.store %s, %C[%i, %j] : {c_t}"
    )
    for v in reversed(order):
        body = f"affine.for %{v} = 0 to {bounds[v]} {{\n{body}\n}}"
    text = f"func.func @kernel(%A: {a_t}, %B: {b_t}, %C: {c_t}) {{\n{body}\nfunc.return\n}}"
    return (
        text,
        [(values(rng, t, (m, k)), t), (values(rng, t, (k, n)), t)],
        [(values(rng, t, (m, n)), t)],
        (),
    )


def rowsum_kernel(rng):
    """s[i] = sum_j x[i, j] with iter_args, then scaled by an index argument."""
    t = str(rng.choice(FLOATS))
    m, n = (int(v) for v in rng.integers(1, 9, 2))
    text = f"""func.func @kernel(%x: memref<{m}x{n}x{t}>, %s: memref<{m}x{t}>, %q: index) {{
  affine.for %i = 0 to {m} {{
    %init = affine.load %s[%i] : memref<{m}x{t}>
    %r = affine.for %j = 0 to affine_map<()[s0] -> (s0)>()[%q] iter_args(%acc = %init) -> ({t}) {{
      %v = affine.load %x[%i, %j] : memref<{m}x{n}x{t}>
      %e = math.exp %v : {t}
      %a = arith.addf %acc, %e : {t}
      affine.yield %a : {t}
    }}
    affine.store %r, %s[%i] : memref<{m}x{t}>
  }}
  func.return
}}"""
    return (
        text,
        [(values(rng, t, (m, n)), t)],
        [(values(rng, t, (m,)), t)],
        (int(rng.integers(0, n + 1)),),
    )


def stencil_kernel(rng):
    """y[i] = x[i] * x[i + d] over i < n - d, or one step further (out of bounds)."""
    t = str(rng.choice([*FLOATS, *INTS]))
    n = int(rng.integers(2, 12))
    d = int(rng.integers(1, n))
    past = int(rng.random() < 0.3)
    mul = "arith.mulf" if t in FLOATS else "arith.muli"
    text = f"""func.func @kernel(%x: memref<{n}x{t}>, %y: memref<{n}x{t}>) {{
  affine.for %i = 0 to {n - d + past} {{
    %a = affine.load %x[%i] : memref<{n}x{t}>
    %b = affine.load %x[%i + {d}] : memref<{n}x{t}>
    %p = {mul} %a, %b : {t}
    affine.store %p, %y[%i] : memref<{n}x{t}>
  }}
  func.return
}}"""
    return text, [(values(rng, t, (n,)), t)], [(values(rng, t, (n,)), t)], ()


KINDS = (eltwise_kernel, eltwise_kernel, matmul_kernel, rowsum_kernel, stencil_kernel)


@pytest.mark.slow  # 8 s
def test_differential_native_vs_interpreter():
    """Random kernels: the native backend gives the interpreter's outputs bit
    for bit, or the same NumericError (D-RT-MLIR-JIT)."""
    count = int(os.environ.get("NEM_JIT_DIFF", "40"))
    rng = np.random.default_rng(20240612)
    errors = natively = 0
    for case in range(count):
        text, ins, outs, idx = KINDS[case % len(KINDS)](rng)
        want = run(text, ins, outs, idx, "interpreter")
        try:
            got = run(text, ins, outs, idx, "native")
        except NotSupported as e:  # the native backend refused: say which and why
            pytest.fail(f"case {case}: native backend refused: {e}\n{text}")
        natively += 1
        errors += isinstance(want, str)
        assert same(want, got), f"case {case}:\n{text}\ninterpreter: {want}\nnative: {got}"
    assert natively == count
    assert 0 < errors < count  # both outcomes were exercised


FLOAT_UNARY = [
    "arith.negf",
    "math.absf",
    "math.sqrt",
    "math.rsqrt",
    "math.floor",
    "math.ceil",
    "math.trunc",
    "math.round",
    "math.roundeven",
    "math.exp",
    "math.exp2",
    "math.expm1",
    "math.log",
    "math.log2",
    "math.log10",
    "math.log1p",
    "math.cbrt",
    "math.tanh",
    "math.cos",
    "math.sin",
    "math.tan",
    "math.atan",
    "math.asin",
    "math.acos",
    "math.sinh",
    "math.cosh",
    "math.atanh",
    "math.asinh",
    "math.acosh",
    "math.erf",
]
FLOAT_BINARY = [
    "arith.addf",
    "arith.subf",
    "arith.mulf",
    "arith.divf",
    "arith.maximumf",
    "arith.minimumf",
    "math.powf",
    "math.atan2",
    "math.copysign",
]
INT_BINARY = [
    "arith.addi",
    "arith.subi",
    "arith.muli",
    "arith.divsi",
    "arith.divui",
    "arith.remsi",
    "arith.remui",
    "arith.floordivsi",
    "arith.ceildivsi",
    "arith.ceildivui",
    "arith.maxsi",
    "arith.minsi",
    "arith.maxui",
    "arith.minui",
    "arith.andi",
    "arith.ori",
    "arith.xori",
    "arith.shli",
    "arith.shrsi",
    "arith.shrui",
    "math.ipowi",
]
INT_UNARY = ["math.absi", "math.ctlz", "math.cttz", "math.ctpop"]


def _all_ops_kernel(t: str, n: int) -> tuple[str, list[str]]:
    """One kernel applying every op of `t`'s table to (x[i], y[i]), each into
    its own output; results of ops that may be undefined are guarded so
    that the others still run (a division by zero would stop the kernel)."""
    ops = (FLOAT_UNARY + FLOAT_BINARY) if t in FLOATS else (INT_UNARY + INT_BINARY)
    mt = f"memref<{n}x{t}>"
    params = [f"%x: {mt}", f"%y: {mt}"] + [f"%z{k}: {mt}" for k in range(len(ops))]
    lines = [f"%a = affine.load %x[%i] : {mt}", f"%b = affine.load %y[%i] : {mt}"]
    if t in INTS:  # undefined operands replaced: divisor 0 -> 1, shifts mod width
        w = int(t[1:])
        lines += [
            f"%zero = arith.constant 0 : {t}",
            f"%one = arith.constant 1 : {t}",
            f"%m1 = arith.constant -1 : {t}",
            f"%wm = arith.constant {w - 1} : {t}",
            f"%min = arith.constant {-(1 << (w - 1))} : {t}",
            f"%b0 = arith.cmpi eq, %b, %zero : {t}",
            f"%bd = arith.select %b0, %one, %b : {t}",
            f"%am = arith.cmpi eq, %a, %min : {t}",
            f"%bm = arith.cmpi eq, %bd, %m1 : {t}",
            "%ov = arith.andi %am, %bm : i1",
            f"%q = arith.select %ov, %one, %bd : {t}",
            f"%s = arith.andi %b, %wm : {t}",
            f"%an = arith.cmpi eq, %a, %zero : {t}",
            f"%bn = arith.cmpi slt, %b, %zero : {t}",
            "%pz = arith.andi %an, %bn : i1",
            f"%pa = arith.select %pz, %one, %a : {t}",
        ]
    for k, op in enumerate(ops):
        if op in FLOAT_UNARY or op in INT_UNARY:
            lines.append(f"%r{k} = {op} %a : {t}")
        elif t in INTS and op.startswith(
            ("arith.div", "arith.rem", "arith.floordiv", "arith.ceildiv")
        ):
            lines.append(f"%r{k} = {op} %a, %q : {t}")
        elif op.startswith("arith.sh"):
            lines.append(f"%r{k} = {op} %a, %s : {t}")
        elif op == "math.ipowi":
            lines.append(f"%r{k} = {op} %pa, %b : {t}")
        else:
            lines.append(f"%r{k} = {op} %a, %b : {t}")
        lines.append(f"affine.store %r{k}, %z{k}[%i] : {mt}")
    text = (
        f"func.func @kernel({', '.join(params)}) {{\n  affine.for %i = 0 to {n} {{\n    "
        + "\n    ".join(lines)
        + "\n  }\n  func.return\n}"
    )
    return text, ops


@pytest.mark.parametrize("t", [*FLOATS, *INTS])
@pytest.mark.slow  # 13 s (5 cases)
def test_every_op_on_edge_values(t):
    """Every arith/math op of a type on all pairs of edge values (and random
    ones): native and interpreter agree bit for bit."""
    rng = np.random.default_rng(7)
    if t in FLOATS:
        with np.errstate(all="ignore"):
            edge = np.array(EDGE_F + list(rng.uniform(-3, 3, 6)), np.float64).astype(DT[t])
    else:
        info = np.iinfo(DT[t])
        edge = np.array(
            [
                0,
                1,
                -1,
                2,
                7,
                8,
                31,
                33,
                info.min,
                info.max,
                info.min + 1,
                *rng.integers(info.min, info.max, 5),
            ],
            np.int64,
        ).astype(DT[t])
    x, y = (v.ravel() for v in np.meshgrid(edge, edge))
    text, ops = _all_ops_kernel(t, len(x))
    outs = [(np.zeros(len(x), DT[t]), t) for _ in ops]
    want = run(text, [(x, t), (y, t)], outs, (), "interpreter")
    got = run(text, [(x, t), (y, t)], outs, (), "native")
    assert not isinstance(want, str), want
    bad = [op for op, a, b in zip(ops, want, got) if not same([a], [b])]
    assert not bad, f"{t}: native differs from the interpreter on {bad}"


# ---------------------------------------------------------------------------
# Loop sinking (exact)


def _sunk_order(text: str) -> list[str]:
    ck = CompiledKernel(text)
    fn = ck.module.clone().ops.first
    sink_parallel_loops(fn)
    return [o.body.block.args[0].name_hint for o in fn.walk() if o.name == "affine.for"]


MATMUL = bench_mlir_kernel.matmul_kernel(4, 5, 3)  # loops i, j, k


def test_matmul_nest_gets_its_contiguous_loop_innermost():
    assert _sunk_order(MATMUL) == ["i", "k", "j"]


@pytest.mark.parametrize(
    "change,why",
    [
        # every C[i, j] sums over j and k: j carries the reduction too
        ("%C[%i, %j]", "%C[%i, 0]"),
        # C[i, j + k]: two iterations with different j touch the same element
        ("%C[%i, %j]", "%C[%i, %j + %k]"),
        # a read of C at another j than the store's
        ("%c = affine.load %C[%i, %j]", "%c = affine.load %C[%i, (%j + 1) mod 5]"),
    ],
)
def test_nests_whose_order_matters_are_left_alone(change, why):
    text = MATMUL.replace(change, why)
    if "%j + %k" in why:
        text = text.replace("memref<4x5xf32>", "memref<4x8xf32>")
    assert _sunk_order(text) == ["i", "j", "k"]


def test_sinking_keeps_results_bit_exact():
    """A float sum along k in every loop order: native (sunk) equals the
    interpreter (sequential k) bit for bit."""
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (4, 3)).astype(np.float32) * 1e4
    b = rng.uniform(-1, 1, (3, 5)).astype(np.float32)
    c = rng.uniform(-1, 1, (4, 5)).astype(np.float32)
    ins, outs = [(a, "f32"), (b, "f32")], [(c, "f32")]
    assert same(run(MATMUL, ins, outs, (), "interpreter"), run(MATMUL, ins, outs, (), "native"))


# ---------------------------------------------------------------------------
# Cache, fallback and notices

FMA = """func.func @kernel(%x: memref<8xf32>, %z: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %a = affine.load %x[%i] : memref<8xf32>
    %p = arith.mulf %a, %a : f32
    affine.store %p, %z[%i] : memref<8xf32>
  }
  func.return
}"""


def test_compiled_once_per_kernel_and_aliasing():
    hatch = EscapeHatch("native")
    x = np.arange(8, dtype=np.float32)
    run(FMA, [(x, "f32")], [(np.zeros(8, np.float32), "f32")], hatch=hatch)
    ck = hatch.compiled(FMA)
    nk = hatch._native_kernel(ck, [0, 1], 1)
    assert isinstance(nk, mlir_native.NativeKernel)
    run(FMA, [(x, "f32")], [(np.zeros(8, np.float32), "f32")], hatch=hatch)
    assert hatch.compiled(FMA) is ck and hatch._native_kernel(ck, [0, 1], 1) is nk
    # `compute in Y out Y`: one memref, a separate compilation
    y = np.arange(8, dtype=np.float32)
    (out,) = hatch.run_task(
        [Tensor(y, "f32")], [Tensor(y, "f32")], {"op": "mlir.kernel", "kernel": FMA}
    )
    np.testing.assert_array_equal(out, y * y)
    assert hatch._native_kernel(ck, [0, 0], 1) is not nk


@pytest.mark.slow  # 4 s
def test_a_failed_check_leaves_memory_alone():
    """An undefined result raises the interpreter's error; the outputs the
    runtime passed are not modified (the kernel wrote a copy)."""
    text = FMA.replace(
        "%p = arith.mulf %a, %a : f32",
        "%n = arith.fptosi %a : f32 to i32\n%q = arith.divsi %n, %n : i32\n"
        "%p = arith.sitofp %q : i32 to f32",
    )
    z = np.full(8, 7, np.float32)
    with pytest.raises(NumericError, match="integer division by zero"):
        EscapeHatch("native").run_task(
            [Tensor(np.arange(8, dtype=np.float32), "f32")],
            [Tensor(z, "f32")],
            {"op": "mlir.kernel", "kernel": text},
        )
    assert (z == 7).all()


def test_auto_falls_back_with_one_notice(monkeypatch):
    """A kernel the native backend does not take (i4) runs interpreted in
    "auto" mode, and says so once, with an estimate of its cost."""
    notices = []
    hatch = EscapeHatch()
    hatch.notice = notices.append
    hatch.compile_after = 0  # no interpreted first tier
    text = FMA.replace("f32", "i4").replace("arith.mulf", "arith.muli")
    x = np.array([1, 2, 3, -1, -2, 0, 7, -8], np.int8)
    for _ in range(2):
        (z,) = run(text, [(x, "i4")], [(np.zeros(8, np.int8), "i4")], hatch=hatch)
        np.testing.assert_array_equal(z, ((x.astype(int) ** 2 + 8) % 16 - 8))
    assert len(notices) == 1
    assert "runs in xDSL's interpreter, not natively: a memref of i4" in notices[0]
    assert "(about 34 scalar operations per run, ~<0.1 s at ~20 us each)" in notices[0]


BF16_MATMUL = """func.func @kernel(%A: memref<5x10xbf16>, %B: memref<10x1xbf16>, %C: memref<5x1xbf16>) {
  affine.for %i = 0 to 5 {
    affine.for %k = 0 to 10 {
      affine.for %j = 0 to 1 {
        %a = affine.load %A[%i, %k] : memref<5x10xbf16>
        %b = affine.load %B[%k, %j] : memref<10x1xbf16>
        %c = affine.load %C[%i, %j] : memref<5x1xbf16>
        %p = arith.mulf %a, %b : bf16
        %s = arith.addf %c, %p : bf16
        affine.store %s, %C[%i, %j] : memref<5x1xbf16>
      }
    }
  }
  func.return
}"""


def test_a_bf16_kernel_runs_natively_first_in_its_process():
    """LLVM legalizes this kernel's bf16 values through compiler-rt's
    `__truncsfbf2`, which only MLIR's float16 utilities define: run first in
    a fresh process (no other engine having loaded them), the kernel
    crashed the process; it now gives the interpreter's bits."""
    script = f"""
import sys
sys.path.insert(0, {os.path.dirname(__file__)!r})
import numpy as np, ml_dtypes
from test_mlir_native import BF16_MATMUL, run
rng = np.random.default_rng(7)
ins = [(rng.standard_normal(s).astype(ml_dtypes.bfloat16), "bf16") for s in ((5, 10), (10, 1))]
outs = [(rng.standard_normal((5, 1)).astype(ml_dtypes.bfloat16), "bf16")]
(native,) = run(BF16_MATMUL, ins, outs, (), "native")
(interpreted,) = run(BF16_MATMUL, ins, outs, (), "interpreter")
assert np.array_equal(native.view(np.uint16), interpreted.view(np.uint16))
print("same")
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert (r.returncode, r.stdout.strip()) == (0, "same"), r.stderr[-2000:]


def test_without_the_bindings_everything_is_interpreted(monkeypatch):
    """Without the `mlir` extra: interpreted, one notice naming the extra."""
    notices = []
    hatch = EscapeHatch()
    hatch.notice = notices.append
    hatch.compile_after = 0  # no interpreted first tier
    monkeypatch.setattr(mlir_native, "unavailable", lambda: "no module named 'mlir'")
    x = np.arange(8, dtype=np.float32)
    for _ in range(2):
        (z,) = run(FMA, [(x, "f32")], [(np.zeros(8, np.float32), "f32")], hatch=hatch)
        np.testing.assert_array_equal(z, x * x)
    assert notices == [
        "compute op=mlir.kernel: kernels run in xDSL's interpreter (no module "
        "named 'mlir'; install the `mlir` extra (pip install "
        "'nem-toolchain[mlir]') to compile them natively)"
    ]
    # what nem-run prints before running a program with such tasks
    it = NemInterpreter()
    prog = it.load_string(bench_mlir_kernel.program(16, 16, 16))
    assert it.escape_hatch.load_notice(prog.op) == (
        "1 escape-hatch task(s) (compute op=mlir.kernel) will run in xDSL's interpreter (no "
        "module named 'mlir'; install the `mlir` extra (pip install 'nem-toolchain[mlir]') to "
        "compile them natively): the largest does about 29,218 scalar operations per run, "
        "~0.6 s at ~20 us each"
    )


def test_small_kernels_are_interpreted_until_compiling_pays(monkeypatch):
    """ "auto": a kernel whose work is known statically is interpreted while
    its total work stays within COMPILE_AFTER scalar ops, then compiled; a
    kernel whose work is not known (a bound from an index argument) is
    compiled at once."""
    hatch = EscapeHatch("auto")
    hatch.compile_after = 100  # FMA: 34 ops per run
    x = np.arange(8, dtype=np.float32)
    compiled_after = []
    for _ in range(4):
        (z,) = run(FMA, [(x, "f32")], [(np.zeros(8, np.float32), "f32")], hatch=hatch)
        np.testing.assert_array_equal(z, x * x)
        compiled_after.append(len(hatch._native) > 0)
    assert compiled_after == [False, False, True, True]
    dynamic = FMA.replace("%z: memref<8xf32>", "%z: memref<8xf32>, %n: index").replace(
        "affine.for %i = 0 to 8", "affine.for %i = 0 to affine_map<()[s0] -> (s0)>()[%n]"
    )
    assert not hatch.compiled(dynamic).estimate_exact
    run(dynamic, [(x, "f32")], [(np.zeros(8, np.float32), "f32")], (8,), hatch=hatch)
    assert any(key[0] == dynamic for key in hatch._native.keys())


def test_scalar_op_estimate():
    """16 x 16 x 16 matmul nest: 4096 points of 6 ops plus loop overhead."""
    ck = CompiledKernel(bench_mlir_kernel.matmul_kernel(16, 16, 16))
    assert 4096 * 6 < ck.estimate < 4096 * 8 and ck.estimate_exact


@pytest.mark.slow  # 12 s
def test_nem_run_warns_once_when_kernels_are_interpreted(tmp_path):
    """nem-run says before running that the program's escape-hatch tasks will
    be interpreted, with the cost of the largest."""
    prog = tmp_path / "k.nem"
    prog.write_text(bench_mlir_kernel.program(8, 8, 8))
    env = dict(os.environ, NEM_MLIR_KERNEL="interpreter")
    r = subprocess.run(
        [sys.executable, "-m", "nem.cli.nem_run", str(prog), "--random-inputs", "1"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert warnings == [
        "nem-run: warning: 1 escape-hatch task(s) (compute op=mlir.kernel) "
        "will run in xDSL's interpreter (NEM_MLIR_KERNEL=interpreter): the "
        "largest does about 3,730 scalar operations per run, ~<0.1 s at ~20 us "
        "each"
    ]
    r = subprocess.run(
        [sys.executable, "-m", "nem.cli.nem_run", str(prog), "--random-inputs", "1"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "warning" not in r.stderr


def test_load_notice_does_not_count_fills(monkeypatch):
    """Without the `mlir` extra, a constant-fill kernel runs as a numpy fill
    (D-RT-MLIR-FILL), not in the interpreter: nem-run's notice counts the
    other kernels only, and says nothing for a program of fills alone."""
    monkeypatch.setattr(mlir_native, "unavailable", lambda: "no module named 'mlir'")
    fill = (
        "func.func @kernel(%a0: memref<16xf32>, %a1: memref<16xf32>) { "
        "%c = arith.constant 1.000000e+00 : f32 affine.for %i = 0 to 16 { "
        '"affine.store"(%c, %a0, %i) <{map = affine_map<()[s0] -> (s0)>}> '
        ": (f32, memref<16xf32>, index) -> () } func.return }"
    ).replace('"', '\\"')
    task = (
        "f = compute.async in region(Y, 0, 64) elem=f32, shape=[16], layout=C "
        "out region(Y, 0, 64) elem=f32, shape=[16], layout=C "
        f'op="mlir.kernel" kernel="{fill}"\nwait(f)\n'
    )
    it = NemInterpreter()
    only_fill = it.load_string("program fills:\nbuffer Y : DDR (size=64, align=64)\n" + task)
    assert it.escape_hatch.load_notice(only_fill.op) is None
    it2 = NemInterpreter()
    both = it2.load_string(
        bench_mlir_kernel.program(16, 16, 16)
        .replace("wait(c)\n", "wait(c)\n" + task)
        .replace("buffer C :", "buffer Y : DDR (size=64, align=64)\nbuffer C :")
    )
    notice = it2.escape_hatch.load_notice(both.op)
    assert notice is not None and notice.startswith("1 escape-hatch task(s)")
