"""Source MLIR programs for differential lowering tests, written the way a
user writes them before upstream `mlir-opt` tiles them: affine loop nests
(matmul, elementwise, relu) and `linalg.matmul` on memrefs, for any static
shape and element type.  `reference` computes what each means with numpy."""

from __future__ import annotations

import numpy as np

NP_TYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i16": np.int16, "i8": np.int8}
FLOAT_OPS = {"add": "arith.addf", "sub": "arith.subf", "mul": "arith.mulf", "max": "arith.maximumf"}
INT_OPS = {"add": "arith.addi", "sub": "arith.subi", "mul": "arith.muli", "max": "arith.maxsi"}
NP_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum}


def memref(shape, t: str) -> str:
    return f"memref<{'x'.join(map(str, shape))}x{t}>"


def _nest(shape, body: list[str]) -> str:
    """`affine.for %i0 .. %iN` around `body` (lines indexed by `%i0, ...`)."""
    lines = [f"{'  ' * (d + 1)}affine.for %i{d} = 0 to {n} {{" for d, n in enumerate(shape)]
    lines += ["  " * (len(shape) + 1) + b for b in body]
    lines += [f"{'  ' * (d + 1)}}}" for d in reversed(range(len(shape)))]
    return "\n".join(lines)


def matmul(m: int, n: int, k: int, t: str) -> str:
    """C[i, j] += A[i, k] * B[k, j] as an affine nest (i, j, k order)."""
    mul, add = ("arith.mulf", "arith.addf") if t[0] == "f" else ("arith.muli", "arith.addi")
    a, b, c = memref((m, k), t), memref((k, n), t), memref((m, n), t)
    body = [
        f"%a = affine.load %A[%i0, %i2] : {a}",
        f"%b = affine.load %B[%i2, %i1] : {b}",
        f"%c = affine.load %C[%i0, %i1] : {c}",
        f"%p = {mul} %a, %b : {t}",
        f"%s = {add} %c, %p : {t}",
        f"affine.store %s, %C[%i0, %i1] : {c}",
    ]
    return (
        f"func.func @matmul(%A: {a}, %B: {b}, %C: {c}) {{\n{_nest((m, n, k), body)}\n  return\n}}\n"
    )


def linalg_matmul(m: int, n: int, k: int, t: str) -> str:
    a, b, c = memref((m, k), t), memref((k, n), t), memref((m, n), t)
    return (
        f"func.func @matmul(%A: {a}, %B: {b}, %C: {c}) {{\n"
        f"  linalg.matmul ins(%A, %B : {a}, {b}) outs(%C : {c})\n  return\n}}\n"
    )


def eltwise(shape, t: str, op: str) -> str:
    """Z = X op Y elementwise."""
    ty = memref(shape, t)
    idx = ", ".join(f"%i{d}" for d in range(len(shape)))
    arith = (FLOAT_OPS if t[0] == "f" else INT_OPS)[op]
    body = [
        f"%a = affine.load %X[{idx}] : {ty}",
        f"%b = affine.load %Y[{idx}] : {ty}",
        f"%s = {arith} %a, %b : {t}",
        f"affine.store %s, %Z[{idx}] : {ty}",
    ]
    return f"func.func @{op}(%X: {ty}, %Y: {ty}, %Z: {ty}) {{\n{_nest(shape, body)}\n  return\n}}\n"


def add_relu(shape, t: str) -> str:
    """Z = max(X + Y, 0): a fused bias add and relu in one nest."""
    ty = memref(shape, t)
    idx = ", ".join(f"%i{d}" for d in range(len(shape)))
    add, zero, mx = (
        ("arith.addf", "0.0", "arith.maximumf")
        if t[0] == "f"
        else ("arith.addi", "0", "arith.maxsi")
    )
    body = [
        f"%a = affine.load %X[{idx}] : {ty}",
        f"%b = affine.load %Y[{idx}] : {ty}",
        f"%s = {add} %a, %b : {t}",
        f"%r = {mx} %s, %zero : {t}",
        f"affine.store %r, %Z[{idx}] : {ty}",
    ]
    return (
        f"func.func @add_relu(%X: {ty}, %Y: {ty}, %Z: {ty}) {{\n"
        f"  %zero = arith.constant {zero} : {t}\n{_nest(shape, body)}\n  return\n}}\n"
    )


def relu(shape, t: str) -> str:
    """Z = max(X, 0)."""
    ty = memref(shape, t)
    idx = ", ".join(f"%i{d}" for d in range(len(shape)))
    body = [
        f"%a = affine.load %X[{idx}] : {ty}",
        f"%s = arith.maximumf %a, %zero : {t}",
        f"affine.store %s, %Z[{idx}] : {ty}",
    ]
    return (
        f"func.func @relu(%X: {ty}, %Z: {ty}) {{\n  %zero = arith.constant 0.0 : {t}\n"
        f"{_nest(shape, body)}\n  return\n}}\n"
    )


def inputs(kind: str, shapes: list[tuple[int, ...]], t: str, seed: int) -> list[np.ndarray]:
    """Random operands (outputs too).  Floats are multiples of 1/8 in [-1, 1):
    every sum and product of the sizes used here is exact in f16/f32, so the
    result does not depend on the order a tiled program accumulates in."""
    rng = np.random.default_rng(seed)
    dt = NP_TYPES[t]
    if t[0] == "f":
        return [(rng.integers(-8, 8, s) / 8).astype(dt) for s in shapes]
    return [rng.integers(-50, 50, s).astype(dt) for s in shapes]


def reference(kind: str, args: list[np.ndarray]) -> tuple[int, np.ndarray]:
    """(index of the output argument, its expected value)."""
    dt = args[0].dtype
    if kind == "matmul":
        a, b, c = args
        wide = np.float64 if dt.kind == "f" else np.int64
        return 2, (c.astype(wide) + a.astype(wide) @ b.astype(wide)).astype(dt)
    if kind == "relu":
        return 1, np.maximum(args[0], 0).astype(dt)
    if kind == "add_relu":
        return 2, np.maximum(args[0] + args[1], 0).astype(dt)
    return 2, NP_OPS[kind](args[0], args[1]).astype(dt)
