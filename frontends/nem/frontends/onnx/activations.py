"""Elementwise ONNX activations beyond Relu/Sigmoid/Tanh/Gelu, and the
n-ary Sum, Max, Min and Mean (D-COMPILE-ACT).

Each is one elementwise `linalg.generic` (`ops.define_elementwise`,
numpy broadcasting) whose body is written with the ops the lowering
raises to NEM opcodes where an exact form exists (docs/compile.md, "What
the lowering takes from graphs"): `maximumf`/`minimumf` with a constant
(a splat), `mulf`, `addf`, `subf`, `divf`, `exp`, `log`, `absf`:

* PRelu `max(x, 0) + slope * min(x, 0)` (equal to ONNX's `x < 0 ? slope x : x`
  for every x: one term is an exact zero), Elu and Selu likewise with
  `alpha (exp(min(x, 0)) - 1)`;
* Softplus `max(x, 0) + log(1 + exp(-|x|))`, which does not overflow; its
  absolute error is within half an ulp of 1 (6e-8 in f32, below onnx's
  atol of 1e-7) where `log1p` would keep the relative precision of tiny
  results;
* HardSigmoid `min(max(alpha x + beta, 0), 1)`, HardSwish `x` times it;
* of f16, each of these but PRelu (whose one rounding is its product) in
  f32, rounded once (`ops.wide`, D-COMPILE-F16): in f16 every step and
  constant rounds, HardSigmoid 26 ulps off the exact result near zero;
* Sum, Max, Min, Mean of any number of inputs: one body adding (taking
  max/min of) all of them, Mean times `1/n`.

Sign, Shrink and ThresholdedRelu need `select` on a comparison, which
NEM has no opcode for: they run as escape-hatch kernels (correct, not
raised).
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, math

from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Importer, Node
from nem.frontends.onnx.ops import by_type, define_elementwise, operand, wide


def _c(x: ir.Value, v: float) -> ir.Value:
    return emit.fconst(x.type, v)


def _pos(x: ir.Value) -> ir.Value:
    return arith.maximumf(x, _c(x, 0.0))


def _neg(x: ir.Value) -> ir.Value:
    return arith.minimumf(x, _c(x, 0.0))


def prelu(imp: Importer, node: Node) -> None:
    """PRelu: the slope broadcast to x (unidirectionally, as ONNX says)."""
    x = imp.tensor(node.input(0))
    slope = operand(imp, node.input(1))
    c = imp.const(node.input(1))
    if c is not None and c.ndim == 1 and x.rank > 2 and c.shape[0] == x.shape[1] != x.shape[-1]:
        # opset 6's per-channel slope [C] (the version converter keeps it)
        slope = imp.weight(c.reshape(-1, *[1] * (x.rank - 2)), f"{node.input(1)}_channels")
    define_elementwise(
        imp, node, [x, slope], lambda v, s: arith.addf(_pos(v), arith.mulf(s, _neg(v)))
    )


def _elu_tail(x: ir.Value, alpha: float) -> ir.Value:
    """alpha (exp(min(x, 0)) - 1): zero for x >= 0."""
    return arith.mulf(_c(x, alpha), arith.subf(wide(math.exp)(_neg(x)), _c(x, 1.0)))


def elu(imp: Importer, node: Node) -> None:
    alpha = float(node.attrs.get("alpha", 1.0))
    define_elementwise(
        imp,
        node,
        [imp.tensor(node.input(0))],
        wide(lambda x: arith.addf(_pos(x), _elu_tail(x, alpha))),
    )


def selu(imp: Importer, node: Node) -> None:
    alpha = float(node.attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(node.attrs.get("gamma", 1.05070102214813232421875))
    define_elementwise(
        imp,
        node,
        [imp.tensor(node.input(0))],
        wide(lambda x: arith.mulf(_c(x, gamma), arith.addf(_pos(x), _elu_tail(x, alpha)))),
    )


def _softplus(x: ir.Value) -> ir.Value:
    tail = math.log(arith.addf(_c(x, 1.0), math.exp(arith.negf(math.absf(x)))))
    return arith.addf(_pos(x), tail)


def softplus(imp: Importer, node: Node) -> None:
    define_elementwise(imp, node, [imp.tensor(node.input(0))], wide(_softplus))


def softsign(imp: Importer, node: Node) -> None:
    define_elementwise(
        imp,
        node,
        [imp.tensor(node.input(0))],
        wide(lambda x: arith.divf(x, arith.addf(_c(x, 1.0), math.absf(x)))),
    )


def _hard_sigmoid(x: ir.Value, alpha: float, beta: float) -> ir.Value:
    y = arith.addf(arith.mulf(x, _c(x, alpha)), _c(x, beta))
    return arith.minimumf(arith.maximumf(y, _c(x, 0.0)), _c(x, 1.0))


def hard_sigmoid(imp: Importer, node: Node) -> None:
    alpha = float(node.attrs.get("alpha", 0.2))
    beta = float(node.attrs.get("beta", 0.5))
    define_elementwise(
        imp, node, [imp.tensor(node.input(0))], wide(lambda x: _hard_sigmoid(x, alpha, beta))
    )


def hard_swish(imp: Importer, node: Node) -> None:
    define_elementwise(
        imp,
        node,
        [imp.tensor(node.input(0))],
        wide(lambda x: arith.mulf(x, _hard_sigmoid(x, 1.0 / 6.0, 0.5))),
    )


def sign(imp: Importer, node: Node) -> None:
    """Sign: 1, -1, or x itself for 0 and NaN (escape-hatch kernel: select)."""

    def body(x: ir.Value) -> ir.Value:
        zero = _c(x, 0.0)
        pos = arith.cmpf(arith.CmpFPredicate.OGT, x, zero)
        neg = arith.cmpf(arith.CmpFPredicate.OLT, x, zero)
        return arith.select(pos, _c(x, 1.0), arith.select(neg, _c(x, -1.0), x))

    define_elementwise(imp, node, [imp.tensor(node.input(0))], body)


def shrink(imp: Importer, node: Node) -> None:
    """Shrink: x + bias below -lambd, x - bias above lambd, else 0
    (escape-hatch kernel: select)."""
    lambd = float(node.attrs.get("lambd", 0.5))
    bias = float(node.attrs.get("bias", 0.0))

    def body(x: ir.Value) -> ir.Value:
        low = arith.cmpf(arith.CmpFPredicate.OLT, x, _c(x, -lambd))
        high = arith.cmpf(arith.CmpFPredicate.OGT, x, _c(x, lambd))
        return arith.select(
            low,
            arith.addf(x, _c(x, bias)),
            arith.select(high, arith.subf(x, _c(x, bias)), _c(x, 0.0)),
        )

    define_elementwise(imp, node, [imp.tensor(node.input(0))], body)


def thresholded_relu(imp: Importer, node: Node) -> None:
    """ThresholdedRelu: x above alpha, else 0 (escape-hatch kernel: select).
    A converter of its own: onnx defines its body from opset 22 only, and
    below it the op was refused though the README lists it (an outside
    user, session 55)."""
    alpha = float(node.attrs.get("alpha", 1.0))

    def body(x: ir.Value) -> ir.Value:
        above = arith.cmpf(arith.CmpFPredicate.OGT, x, _c(x, alpha))
        return arith.select(above, x, _c(x, 0.0))

    define_elementwise(imp, node, [imp.tensor(node.input(0))], body)


def reciprocal(imp: Importer, node: Node) -> None:
    define_elementwise(imp, node, [imp.tensor(node.input(0))], lambda x: arith.divf(_c(x, 1.0), x))


def variadic(
    combine: Callable[[ir.Value, ir.Value], ir.Value], mean: bool = False
) -> Callable[[Importer, Node], None]:
    """Sum, Max, Min (and Mean: the sum times 1/n) of any number of inputs,
    broadcast together, as one body."""

    def convert(imp: Importer, node: Node) -> None:
        names = [n for n in node.inputs if n]
        ops = [operand(imp, n) for n in names]
        if len(ops) == 1 and not mean:
            imp.vals[node.outputs[0]] = imp.tensor(names[0])
            return

        def body(*xs: ir.Value) -> ir.Value:
            acc = xs[0]
            for v in xs[1:]:
                acc = by_type(combine)(acc, v)
            return arith.mulf(acc, _c(acc, 1.0 / len(xs))) if mean else acc

        define_elementwise(imp, node, ops, body)

    return convert
