"""ONNX `Einsum` (D-COMPILE-EINSUM).

An equation of two operands that is a (batched) matrix product (each
index once per operand, every index either in both operands or in the
output, no broadcast) becomes the MatMul converter's forms: each operand
transposed to [batch, rows, reduction] / [batch, reduction, columns] and
reshaped to 2-D or 3-D, one `linalg.matmul`/`batch_matmul` (raised to a NEM
matmul), the result reshaped and transposed to the output's order.  Any
other equation (one operand, three, a diagonal `ii`, an index summed in one
operand only, `...` broadcasting) is one `linalg.generic`: loops over the
output's indices then the summed ones, each operand read by its letters
(a repeated letter reads the diagonal, a size-1 `...` dimension is
broadcast), the product of the operands added to the accumulator, f16
in f32 rounded once (D-COMPILE-F16).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg

from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Importer, Node
from nem.frontends.onnx.ops import is_f16, text

_SPARE = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""Letters standing for `...`'s dimensions (ONNX equations use lower case
for their own; upper case letters are spares unless the equation uses them)."""


def einsum(imp: Importer, node: Node) -> None:
    """The converter of `Einsum` (module docstring)."""
    xs = [imp.logical(imp.tensor(n)) for n in node.inputs if n]
    equation = text(node, "equation", "")
    terms, out = _parse(imp, equation, xs)
    imp.define(node.outputs[0], contract(imp, terms, out, xs))


def contract(imp: Importer, terms: Sequence[str], out: str, xs: Sequence[ir.Value]) -> ir.Value:
    """The sum of products of `xs` (logical tensors, indexed by `terms`)
    over the letters not in `out`: one matmul where it is a (batched)
    matrix product, else one `linalg.generic` (module docstring); Resize's
    per-axis weights use it too (D-COMPILE-RESIZE)."""
    sizes = _sizes(imp, terms, xs)
    if len(xs) == 2 and _is_product(terms, out, xs, sizes):
        return _as_matmul(terms, out, xs, sizes)
    return _as_generic(terms, out, xs, sizes)


def _parse(imp: Importer, equation: str, xs: Sequence[ir.Value]) -> tuple[list[str], str]:
    """Each operand's letters (`...` spelled with spare letters) and the
    output's (implicit: the letters used once, alphabetical, after `...`)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(xs):
        raise imp.error(f"Einsum equation '{equation}' has {len(terms)} operands, not {len(xs)}")
    spares = [c for c in _SPARE if c not in eq]
    ranks = [len(emit.shape_of(x)) for x in xs]
    ellipsis = max(
        (r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0
    )
    dots = "".join(spares[:ellipsis])
    spelled = []
    for t, rank in zip(terms, ranks):
        if "..." in t:
            own = rank - len(t.replace("...", ""))
            t = t.replace("...", dots[ellipsis - own :] if own else "")
        if len(t) != rank or not all(c.isalpha() for c in t):
            raise imp.error(f"Einsum term '{t}' does not index an operand of rank {rank}")
        spelled.append(t)
    if arrow:
        out = rhs.replace("...", dots)
    else:
        letters = "".join(spelled)
        once = sorted(c for c in set(letters) if letters.count(c) == 1 and c not in dots)
        out = dots + "".join(once)
    if len(set(out)) != len(out) or any(c not in "".join(spelled) for c in out):
        raise imp.error(f"Einsum output '{rhs}' must name operand indices, each once")
    return spelled, out


def _sizes(imp: Importer, terms: Sequence[str], xs: Sequence[ir.Value]) -> dict[str, int]:
    """Each letter's size; a size-1 dimension broadcasts against a larger one."""
    sizes: dict[str, int] = {}
    for t, x in zip(terms, xs):
        for c, s in zip(t, emit.shape_of(x)):
            old = sizes.get(c, 1)
            if s != old and 1 not in (s, old):
                raise imp.error(f"Einsum index '{c}' has sizes {old} and {s}")
            sizes[c] = max(old, s)
    return sizes


def _is_product(
    terms: Sequence[str], out: str, xs: Sequence[ir.Value], sizes: dict[str, int]
) -> bool:
    """Whether two operands form a (batched) matrix product (module docstring)."""
    a, b = terms
    return (
        len(set(a)) == len(a)
        and len(set(b)) == len(b)
        and all(c in out or (c in a and c in b) for c in a + b)
        and all(s == sizes[c] for t, x in zip(terms, xs) for c, s in zip(t, emit.shape_of(x)))
    )


def _as_matmul(
    terms: Sequence[str], out: str, xs: Sequence[ir.Value], sizes: dict[str, int]
) -> ir.Value:
    a, b = terms
    batch = [c for c in out if c in a and c in b]
    red = [c for c in a if c in b and c not in out]
    rows = [c for c in a if c not in b]
    cols = [c for c in b if c not in a]

    def count(letters: Sequence[str]) -> int:
        return int(np.prod([sizes[c] for c in letters]))

    def arrange(v: ir.Value, term: str, order: Sequence[str], shape: Sequence[int]) -> ir.Value:
        perm = [term.index(c) for c in order]
        if perm != list(range(len(perm))):
            v = emit.transpose(v, perm)
        return emit.reshape(v, shape)

    nb, m, k, n = count(batch), count(rows), count(red), count(cols)
    elem = emit.elem_type(xs[0])
    if nb == 1:
        av = arrange(xs[0], a, [*batch, *rows, *red], [m, k])
        bv = arrange(xs[1], b, [*batch, *red, *cols], [k, n])
        y = emit.value_of(linalg.matmul(av, bv, outs=[emit.fill([m, n], elem, 0.0)]))
    else:
        av = arrange(xs[0], a, [*batch, *rows, *red], [nb, m, k])
        bv = arrange(xs[1], b, [*batch, *red, *cols], [nb, k, n])
        y = emit.value_of(linalg.batch_matmul(av, bv, outs=[emit.fill([nb, m, n], elem, 0.0)]))
    got = [*batch, *rows, *cols]
    y = emit.reshape(y, [sizes[c] for c in got])
    perm = [got.index(c) for c in out]
    return emit.transpose(y, perm) if perm != list(range(len(perm))) else y


def _as_generic(
    terms: Sequence[str], out: str, xs: Sequence[ir.Value], sizes: dict[str, int]
) -> ir.Value:
    summed = sorted({c for t in terms for c in t} - set(out))
    loops = [*out, *summed]
    dim = {c: ir.AffineDimExpr.get(i) for i, c in enumerate(loops)}
    zero = ir.AffineConstantExpr.get(0)
    elem = emit.elem_type(xs[0])
    narrow = is_f16(xs[0])
    acc_t = ir.F32Type.get() if narrow else elem
    operands = []
    for t, x in zip(terms, xs):
        exprs = [dim[c] if s == sizes[c] else zero for c, s in zip(t, emit.shape_of(x))]
        operands.append((x, ir.AffineMap.get(len(loops), 0, exprs)))
    floating = isinstance(elem, ir.FloatType)
    mul, add = (arith.mulf, arith.addf) if floating else (arith.muli, arith.addi)

    def body(*args: ir.Value) -> ir.Value:
        *vals, acc = args
        if narrow:
            vals = [arith.extf(acc_t, v) for v in vals]
        return add(acc, reduce(mul, vals))

    shape = [sizes[c] for c in out]
    y = emit.generic(
        operands,
        emit.fill(shape, acc_t, 0.0),
        ir.AffineMap.get(len(loops), 0, [dim[c] for c in out]),
        [emit.PARALLEL] * len(out) + [emit.REDUCTION] * len(summed),
        body,
        pass_output=True,
    )
    if not narrow:
        return y
    rank = len(shape)
    return emit.generic(
        [(y, emit.identity(rank))],
        emit.empty(shape, elem),
        emit.identity(rank),
        [emit.PARALLEL] * rank,
        lambda v: arith.truncf(elem, v),
    )
