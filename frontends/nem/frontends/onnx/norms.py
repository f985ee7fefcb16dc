"""The ONNX converters of Softmax and LayerNormalization.

Softmax is one `linalg.softmax` where the target runs NEM `softmax` on its
element type (D-COMPILE-SOFTMAX), else a decomposition (row max, exp, row
sum, divide) with a positive scalar scale folded into the exponential.
LayerNormalization is a row sum, a variance sum and one normalizing body,
`(x - mean) / sqrt(var + eps) * scale + bias`, onnxruntime's formula.  Both
compute f16 in f32 (D-COMPILE-F16).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, math
from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Importer, Node, TensorVal
from nem.frontends.onnx.ops import elementwise, is_f16


def _keep(x: TensorVal, axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(1 if d in axes else s for d, s in enumerate(x.shape))


def _scaled_input(imp: Importer, name: str) -> tuple[TensorVal, float] | None:
    """(x, c) when tensor `name` is `Mul(x, c)` with `c` a positive scalar
    constant, `x` of the product's shape, and one consumer (the softmax):
    softmax(c x) = exp(c (x - max x)) / sum, so the scaling (attention's
    1/sqrt(d)) runs in the exponential's body instead of in a nest of its own
    (issue 16: one load-compute-store step less on the critical path; the
    product's nest is then dead and erased)."""
    made = [n for n in imp.graph.node if name in n.output]
    uses = sum(list(n.input).count(name) for n in imp.graph.node)
    if len(made) != 1 or made[0].op_type != "Mul" or uses != 1 or any(
            o.name == name for o in imp.graph.output):
        return None
    for a, b in (tuple(made[0].input), tuple(reversed(made[0].input))):
        c = imp.const(b)
        if c is not None and c.size == 1 and float(c.reshape(())) > 0 and imp.const(a) is None:
            x = imp.tensor(a)
            if x.shape == imp.tensor(name).shape:
                return x, float(c.reshape(()))
    return None


def softmax(imp: Importer, node: Node) -> None:
    default = -1 if imp.opset >= 13 else 1
    whole = imp.tensor(node.input(0))
    axis = imp.axis(int(node.attrs.get("axis", default)), whole.rank)
    if (imp.opset >= 13 or axis == whole.rank - 1) and str(whole.elem) in imp.softmax_types:
        # one NEM softmax task per row chunk (D-COMPILE-SOFTMAX); a scaled
        # input keeps its Mul, as onnxruntime computes it
        y = linalg.softmax([whole.value.type], whole.value,
                           emit.empty(emit.shape_of(whole.value), whole.elem),
                           ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                              whole.perm.index(axis)))
        imp.define(node.outputs[0], emit.value_of(y), whole.perm)
        return
    scaled = _scaled_input(imp, node.input(0))
    x, scale = scaled if scaled is not None else (whole, 1.0)
    axes = [axis] if imp.opset >= 13 else list(range(axis, x.rank))
    phys = [x.perm.index(a) for a in axes]
    f32 = ir.F32Type.get()
    wide_t = f32 if is_f16(x.value) else x.elem
    widen = is_f16(x.value)

    def up(v: ir.Value) -> ir.Value:
        return arith.extf(f32, v) if widen else v

    mx = TensorVal(emit.reduce(x.value, phys, -np.inf, arith.maximumf), _keep(x, axes), x.perm)
    def exp(v: ir.Value, m: ir.Value) -> ir.Value:
        d = arith.subf(up(v), up(m))
        return math.exp(d if scale == 1.0 else arith.mulf(d, emit.fconst(d.type, scale)))
    ex, _ = elementwise(imp, [x, mx], exp, elem=wide_t)
    ext = TensorVal(ex, x.shape, x.perm)
    total = TensorVal(emit.reduce(ex, phys, 0.0, arith.addf), _keep(x, axes), x.perm)

    def norm(e: ir.Value, s: ir.Value) -> ir.Value:
        r = arith.divf(e, s)
        return arith.truncf(x.elem, r) if is_f16(x.value) else r
    y, perm = elementwise(imp, [ext, total], norm, elem=x.elem)
    imp.define(node.outputs[0], y, perm)
    if scaled is not None:   # the product, now unused: bufferization would keep it
        product = imp.tensor(node.input(0)).value.owner
        if not any(True for _ in product.results[0].uses):
            product.erase()


def layernorm(imp: Importer, node: Node) -> None:
    x = imp.tensor(node.input(0))
    axis = imp.axis(int(node.attrs.get("axis", -1)), x.rank)
    eps = float(node.attrs.get("epsilon", 1e-5))
    if len(node.outputs) > 1 and any(node.outputs[1:]):
        raise imp.error("not supported: LayerNormalization Mean/InvStdDev outputs")
    axes = list(range(axis, x.rank))
    phys = [x.perm.index(a) for a in axes]
    count = float(np.prod([x.shape[a] for a in axes]))
    f32 = ir.F32Type.get()
    half = is_f16(x.value)

    def up(v: ir.Value) -> ir.Value:
        return arith.extf(f32, v) if half else v

    acc_t = f32 if half else x.elem
    total = emit.reduce(x.value, phys, 0.0, arith.addf, elem=acc_t, prologue=up)
    kept = _keep(x, axes)
    # the mean (sum / count) is computed where it is used, in the variance's
    # and the output's bodies: no nest of its own between them (issue 16:
    # one load-compute-store step less on the block's critical path)
    sum_v = TensorVal(total, kept, x.perm)

    def mean_of(s: ir.Value) -> ir.Value:
        return arith.mulf(s, emit.fconst(s.type, 1.0 / count))
    # variance: sum over the axes of (x - mean)^2, mean broadcast along them
    rank = x.rank
    kept_phys = [kept[p] for p in x.perm]
    out_map = emit.broadcast_map(kept_phys, list(range(rank)), emit.shape_of(x.value))
    kinds = [emit.REDUCTION if d in phys else emit.PARALLEL for d in range(rank)]

    def sq(v: ir.Value, s: ir.Value, acc: ir.Value) -> ir.Value:
        d = arith.subf(up(v), mean_of(s))
        return arith.addf(acc, arith.mulf(d, d))
    var_sum = emit.generic([(x.value, emit.identity(rank)), (total, out_map)],
                           emit.fill(kept_phys, acc_t, 0.0), out_map, kinds, sq,
                           pass_output=True)
    var = TensorVal(var_sum, kept, x.perm)
    ops: list[TensorVal | float] = [x, sum_v, var]
    has_scale = bool(node.input(1))
    has_bias = bool(node.input(2))
    if has_scale:
        ops.append(imp.tensor(node.input(1)))
    if has_bias:
        ops.append(imp.tensor(node.input(2)))

    def body(v: ir.Value, s: ir.Value, vs: ir.Value, *rest: ir.Value) -> ir.Value:
        c = partial(emit.fconst, acc_t)
        # (x - mean) / sqrt(var + eps), onnxruntime's formula: one rounding
        # (and one task on the critical path) fewer than * rsqrt
        std = math.sqrt(arith.addf(arith.mulf(vs, c(1.0 / count)), c(eps)))
        r = arith.divf(arith.subf(up(v), mean_of(s)), std)
        k = 0
        if has_scale:
            r = arith.mulf(r, up(rest[k]))
            k += 1
        if has_bias:
            r = arith.addf(r, up(rest[k]))
        return arith.truncf(x.elem, r) if half else r
    y, perm = elementwise(imp, ops, body, elem=x.elem)
    imp.define(node.outputs[0], y, perm)
