"""The ONNX converters of Softmax, LogSoftmax, LayerNormalization,
InstanceNormalization and LRN.

Softmax is one `linalg.softmax` where the target runs NEM `softmax` on its
element type (D-COMPILE-SOFTMAX), else a decomposition (row max, exp, row
sum, divide) with a positive scalar scale folded into the exponential.
LayerNormalization is a row sum, a variance sum and one normalizing body,
`(x - mean) / sqrt(var + eps) * scale + bias`, onnxruntime's formula, its
sums shifted by each row's first element (D-COMPILE-NORM-SHIFT).  Both
compute f16 in f32 (D-COMPILE-F16).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, math, tensor

from nem.frontends.onnx import emit
from nem.frontends.onnx.convs import channels_last
from nem.frontends.onnx.graph import Importer, Node, TensorVal
from nem.frontends.onnx.ops import elementwise, is_f16, x_dtype
from nem.frontends.onnx.pools import pool2d
from nem.frontends.onnx.shapes import add_unit_dims


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
    if (
        len(made) != 1
        or made[0].op_type != "Mul"
        or uses != 1
        or any(o.name == name for o in imp.graph.output)
    ):
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
        y = linalg.softmax(
            [whole.value.type],
            whole.value,
            emit.empty(emit.shape_of(whole.value), whole.elem),
            ir.IntegerAttr.get(ir.IntegerType.get_signless(64), whole.perm.index(axis)),
        )
        imp.define(node.outputs[0], emit.value_of(y), whole.perm)
        return
    scaled = _scaled_input(imp, node.input(0))
    x, scale = scaled if scaled is not None else (whole, 1.0)
    axes = [axis] if imp.opset >= 13 else list(range(axis, x.rank))
    _, ext, total = _exp_sums(imp, x, axes, scale)

    def norm(e: ir.Value, s: ir.Value) -> ir.Value:
        r = arith.divf(e, s)
        return arith.truncf(x.elem, r) if is_f16(x.value) else r

    y, perm = elementwise(imp, [ext, total], norm, elem=x.elem)
    imp.define(node.outputs[0], y, perm)
    if scaled is not None:  # the product, now unused: bufferization would keep it
        product = imp.tensor(node.input(0)).value.owner
        if not any(True for _ in product.results[0].uses):
            product.erase()


def _up(x: ir.Value) -> ir.Value:
    """An f16 scalar widened to f32 (D-COMPILE-F16), else itself."""
    return arith.extf(ir.F32Type.get(), x) if is_f16(x) else x


def _exp_sums(
    imp: Importer, x: TensorVal, axes: Sequence[int], scale: float
) -> tuple[TensorVal, TensorVal, TensorVal]:
    """(row max, exp(scale (x - max)), row sum of those) over `axes`, the
    exponentials and sums of f16 in f32 (D-COMPILE-F16)."""
    phys = [x.perm.index(a) for a in axes]
    wide_t = ir.F32Type.get() if is_f16(x.value) else x.elem
    mx = TensorVal(emit.reduce(x.value, phys, -np.inf, arith.maximumf), _keep(x, axes), x.perm)

    def exp(v: ir.Value, m: ir.Value) -> ir.Value:
        d = arith.subf(_up(v), _up(m))
        return math.exp(d if scale == 1.0 else arith.mulf(d, emit.fconst(d.type, scale)))

    ex, _ = elementwise(imp, [x, mx], exp, elem=wide_t)
    ext = TensorVal(ex, x.shape, x.perm)
    total = TensorVal(emit.reduce(ex, phys, 0.0, arith.addf), _keep(x, axes), x.perm)
    return mx, ext, total


def log_softmax(imp: Importer, node: Node) -> None:
    """LogSoftmax: (x - max) - log(sum exp(x - max)), over one axis (opset
    13) or the coerced 2-D rows of older opsets."""
    x = imp.tensor(node.input(0))
    axis = imp.axis(int(node.attrs.get("axis", -1 if imp.opset >= 13 else 1)), x.rank)
    axes = [axis] if imp.opset >= 13 else list(range(axis, x.rank))
    mx, _, total = _exp_sums(imp, x, axes, 1.0)

    def body(v: ir.Value, m: ir.Value, t: ir.Value) -> ir.Value:
        r = arith.subf(arith.subf(_up(v), _up(m)), math.log(t))
        return arith.truncf(x.elem, r) if is_f16(x.value) else r

    y, perm = elementwise(imp, [x, mx, total], body, elem=x.elem)
    imp.define(node.outputs[0], y, perm)


def lrn(imp: Importer, node: Node) -> None:
    """LRN: x (bias + alpha / size * sum of squares over a channel window)^-beta,
    the window sum a sum pooling along the channel axis of the squares
    viewed as [1, N H W, C, 1] (zero-padded), the power exp(-beta log(.)).
    The normalization reads the pooling's output in that view, so that it
    runs on the pooling's tiles in L1 (D-COMPILE-FUSE-L1; session 63:
    Inception v1's second LRN moved 3.5x its tensors' bytes)."""
    x = imp.tensor(node.input(0))
    if x.rank < 3:
        raise imp.error(f"LRN needs rank >= 3, got {x.rank}")
    size = int(node.attrs["size"])
    alpha = float(node.attrs.get("alpha", 1e-4))
    beta = float(node.attrs.get("beta", 0.75))
    bias = float(node.attrs.get("bias", 1.0))
    cl = channels_last(x.rank)
    v = imp.in_perm(x, cl)
    phys = emit.shape_of(v)
    rows, c = int(np.prod(phys[:-1])), phys[-1]
    # squared in the pooled view, so that the square is the pad's source and
    # writes the padded buffer's interior (D-COMPILE-PAD-IN-PLACE)
    view = [1, rows, c, 1]
    flat = TensorVal(emit.reshape(v, view), tuple(view), tuple(range(4)))
    sq, _ = elementwise(imp, [flat], lambda e: arith.mulf(e, e))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = emit.pad(sq, [0, 0, lo, 0], [0, 0, hi, 0], 0.0)
    sums = pool2d(padded, [1, size], [1, 1], [1, 1], [rows, c], "sum")

    def body(e: ir.Value, s: ir.Value) -> ir.Value:
        def f(e: ir.Value, s: ir.Value) -> ir.Value:
            t = arith.addf(
                emit.fconst(s.type, bias), arith.mulf(s, emit.fconst(s.type, alpha / size))
            )
            return arith.mulf(e, math.exp(arith.mulf(math.log(t), emit.fconst(s.type, -beta))))

        if not is_f16(e):
            return f(e, s)
        return arith.truncf(e.type, f(_up(e), _up(s)))

    y, _ = elementwise(imp, [flat, TensorVal(sums, tuple(view), tuple(range(4)))], body)
    imp.define(node.outputs[0], emit.reshape(y, phys), cl)


def layernorm(imp: Importer, node: Node) -> None:
    x = imp.tensor(node.input(0))
    axis = imp.axis(int(node.attrs.get("axis", -1)), x.rank)
    extras = [imp.tensor(node.input(k)) if node.input(k) else None for k in (1, 2)]
    y, perm, stats = normalize(
        imp, x, list(range(axis, x.rank)), float(node.attrs.get("epsilon", 1e-5)), *extras
    )
    imp.define(node.outputs[0], y, perm)
    if any(node.outputs[1:]):  # Mean and InvStdDev, kept dimensions of size 1
        for name, value in zip(node.outputs[1:], stats()):
            if name:
                imp.define(name, value.value, value.perm)


def instance_norm(imp: Importer, node: Node) -> None:
    """InstanceNormalization: per (n, c), over the spatial axes, the
    per-channel scale and bias broadcast along them."""
    x = imp.tensor(node.input(0))
    if x.rank < 3:
        raise imp.error(f"InstanceNormalization needs rank >= 3, got {x.rank}")
    extras = []
    for k in (1, 2):
        c = imp.const(node.input(k))
        if c is not None:
            extras.append(
                imp.weight(
                    c.astype(x_dtype(imp, x)).reshape(-1, *[1] * (x.rank - 2)), node.input(k)
                )
            )
        else:
            extras.append(add_unit_dims(imp.tensor(node.input(k)), list(range(1, x.rank - 1))))
    y, perm, _ = normalize(
        imp, x, list(range(2, x.rank)), float(node.attrs.get("epsilon", 1e-5)), *extras
    )
    imp.define(node.outputs[0], y, perm)


def normalize(
    imp: Importer,
    x: TensorVal,
    axes: list[int],
    eps: float,
    scale: TensorVal | None,
    bias: TensorVal | None,
) -> tuple[ir.Value, tuple[int, ...], Callable[[], tuple[TensorVal, TensorVal]]]:
    """`(x - mean) / sqrt(var + eps) * scale + bias` with mean and variance
    over `axes` (f16 statistics in f32, D-COMPILE-F16): a row sum, a
    variance sum and one normalizing body (module docstring).  The third
    result builds, when called, the mean and `1 / sqrt(var + eps)` (f32 for
    f16 data) with the reduced dimensions of size 1: LayerNormalization's
    optional outputs."""
    phys = [x.perm.index(a) for a in axes]
    count = float(np.prod([x.shape[a] for a in axes]))
    f32 = ir.F32Type.get()
    half = is_f16(x.value)

    def up(v: ir.Value) -> ir.Value:
        return arith.extf(f32, v) if half else v

    acc_t = f32 if half else x.elem
    kept = _keep(x, axes)
    rank = x.rank
    kept_phys = [kept[p] for p in x.perm]
    out_map = emit.broadcast_map(kept_phys, list(range(rank)), emit.shape_of(x.value))
    kinds = [emit.REDUCTION if d in phys else emit.PARALLEL for d in range(rank)]
    # the sums are of x - x0, x0 each row's first element (the shifted-data
    # algorithm, D-COMPILE-NORM-SHIFT): a row whose mean is far from zero
    # next to its spread (m93: |mean| 350 standard deviations) loses its
    # variance to the rounding of a plain sum
    first = TensorVal(
        tensor.extract_slice(
            emit.tensor_type(kept_phys, x.elem),
            x.value,
            [],
            [],
            [],
            [0] * rank,
            kept_phys,
            [1] * rank,
        ),
        kept,
        x.perm,
    )

    def shifted(v: ir.Value, f: ir.Value, acc: ir.Value) -> ir.Value:
        return arith.addf(acc, arith.subf(up(v), up(f)))

    total = emit.generic(
        [(x.value, emit.identity(rank)), (first.value, out_map)],
        emit.fill(kept_phys, acc_t, 0.0),
        out_map,
        kinds,
        shifted,
        pass_output=True,
    )
    # the mean (x0 + sum / count) is computed where it is used, in the
    # variance's and the output's bodies: no nest of its own between them
    # (issue 16: one load-compute-store step less on the block's critical path)
    sum_v = TensorVal(total, kept, x.perm)

    def mean_of(s: ir.Value, f: ir.Value) -> ir.Value:
        return arith.addf(up(f), arith.mulf(s, emit.fconst(s.type, 1.0 / count)))

    def sq(v: ir.Value, s: ir.Value, f: ir.Value, acc: ir.Value) -> ir.Value:
        d = arith.subf(up(v), mean_of(s, f))
        return arith.addf(acc, arith.mulf(d, d))

    # variance: sum over the axes of (x - mean)^2, mean broadcast along them
    var_sum = emit.generic(
        [(x.value, emit.identity(rank)), (total, out_map), (first.value, out_map)],
        emit.fill(kept_phys, acc_t, 0.0),
        out_map,
        kinds,
        sq,
        pass_output=True,
    )
    var = TensorVal(var_sum, kept, x.perm)
    ops: list[TensorVal | float] = [
        x,
        sum_v,
        first,
        var,
        *(e for e in (scale, bias) if e is not None),
    ]

    def body(v: ir.Value, s: ir.Value, f: ir.Value, vs: ir.Value, *rest: ir.Value) -> ir.Value:
        c = partial(emit.fconst, acc_t)
        # (x - mean) / sqrt(var + eps), onnxruntime's formula: one rounding
        # (and one task on the critical path) fewer than * rsqrt
        std = math.sqrt(arith.addf(arith.mulf(vs, c(1.0 / count)), c(eps)))
        r = arith.divf(arith.subf(up(v), mean_of(s, f)), std)
        k = 0
        if scale is not None:
            r = arith.mulf(r, up(rest[k]))
            k += 1
        if bias is not None:
            r = arith.addf(r, up(rest[k]))
        return arith.truncf(x.elem, r) if half else r

    def stats() -> tuple[TensorVal, TensorVal]:
        def inv_std(vs: ir.Value) -> ir.Value:
            c = partial(emit.fconst, acc_t)
            return arith.divf(c(1.0), math.sqrt(arith.addf(arith.mulf(vs, c(1.0 / count)), c(eps))))

        mean = elementwise(imp, [sum_v, first], mean_of, elem=acc_t)
        inv = elementwise(imp, [var], inv_std, elem=acc_t)
        return TensorVal(mean[0], kept, mean[1]), TensorVal(inv[0], kept, inv[1])

    y, perm = elementwise(imp, ops, body, elem=x.elem)
    return y, perm, stats
