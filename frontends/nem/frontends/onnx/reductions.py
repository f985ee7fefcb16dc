"""ONNX reductions over chosen axes, ArgMax/ArgMin and `Pow` (D-COMPILE-REDUCE).

`ReduceSum`, `ReduceMean`, `ReduceMax` and `ReduceMin` are one
`linalg.generic` with reduction iterators (`emit.reduce`), the reduced
dimensions kept with size 1 in the tensor's physical layout, then removed
by a reshape when `keepdims=0`.  `ArgMax`/`ArgMin` are two such
reductions: the extreme value along the axis (NaN if the row has one, as
`maximumf` propagates it), then the least (`select_last_index`: the
greatest) position holding it (a NaN holds a NaN row's extreme), the
positions an i32 iota weight rather than `linalg.index`, which the
runtime's kernel interpreter lacks; the indices are i32, ONNX's int64
demoted (D-COMPILE-I64).  `CumSum` is a reduction over a second index
along the axis: output position i adds, j ascending, the inputs at the
positions j it covers (j <= i; `exclusive`: j < i; `reverse`: j >= i,
`exclusive`: j > i), the others adding 0: a forward sum is rounded as
onnxruntime's sequential scan, a reverse one in the other order (within
D-COMPILE-TOL; linalg's verifier refuses a map walking j down, `n - 1 -
j`, as the only use of j, and MLIR aborted on it beside a plain one).  f16 sums and means accumulate in f32 and
round once, as the global pools do (D-COMPILE-F16); a mean multiplies the
sum by `1/n`.  `Pow` is an elementwise `math.powf` (f16 evaluated in f32),
what exporters write for a layer norm's `(x - mean)^2` before opset 17.
`ReduceLogSumExp` is `m + log(sum(exp(x - m)))` with m the max over the
axes (`log_sum_exp`): onnx's own body overflows here (float64 is f32).
`ReduceSumSquare`, `ReduceL1`, `ReduceL2` and `ReduceLogSum` are the sum
with an elementwise op before it (a square, an absolute value) or after it
(a square root, a log), f16 in f32 (onnx's bodies square an f16 in f16: a
sum of squares past 65,504 was inf where onnxruntime gives the norm).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from mlir import ir
from mlir.dialects import arith, math

from nem.frontends.onnx import emit
from nem.frontends.onnx.graph import Importer, Node, TensorVal
from nem.frontends.onnx.ops import binary, elementwise, is_f16

COMBINE = {
    "sum": (0.0, arith.addf),
    "mean": (0.0, arith.addf),
    "max": (-np.inf, arith.maximumf),
    "min": (np.inf, arith.minimumf),
    "sumsquare": (0.0, arith.addf),
    "l1": (0.0, arith.addf),
    "l2": (0.0, arith.addf),
    "logsum": (0.0, arith.addf),
}
"""Reduction kind -> (initial value, combiner)."""

PROLOGUE: dict[str, Callable[[ir.Value], ir.Value]] = {
    "sumsquare": lambda e: arith.mulf(e, e),
    "l2": lambda e: arith.mulf(e, e),
    "l1": math.absf,
}
"""The elementwise op before a kind's sum (an op of its own, raised; f16 in
f32): ReduceSumSquare's, ReduceL2's square, ReduceL1's absolute value."""

FINISH: dict[str, Callable[[ir.Value, int], ir.Value]] = {
    "mean": lambda t, n: arith.mulf(t, emit.fconst(t.type, 1.0 / n)),
    "l2": lambda t, n: math.sqrt(t),
    "logsum": lambda t, n: math.log(t),
}
"""The elementwise op after a kind's reduction of n elements (f16 in f32)."""


def reduction(kind: str) -> Callable[[Importer, Node], None]:
    """The converter of `Reduce<Kind>` (module docstring)."""
    init, combine = COMBINE[kind]

    def convert(imp: Importer, node: Node) -> None:
        x = imp.tensor(node.input(0))
        axes = _axes(imp, node, x.rank)
        keepdims = int(node.attrs.get("keepdims", 1))
        v, perm = x.value, x.perm
        wide = combine is arith.addf and is_f16(v)
        f32 = ir.F32Type.get()
        if not axes:  # noop_with_empty_axes=1 and no axes: no reduction, whatever keepdims
            if kind not in PROLOGUE and (kind not in FINISH or kind == "mean"):
                imp.vals[node.outputs[0]] = x  # (a sum, mean, max or min of one element)
                return
            # the elementwise ops still apply (onnx's bodies: ReduceLogSum is
            # Log(ReduceSum(x)), the graph fuzzer found x returned, session 54)

            def pointwise(e: ir.Value) -> ir.Value:
                t = arith.extf(f32, e) if wide else e
                t = PROLOGUE[kind](t) if kind in PROLOGUE else t
                t = FINISH[kind](t, 1) if kind in FINISH else t
                return arith.truncf(x.elem, t) if wide else t

            imp.define(node.outputs[0], *elementwise(imp, [x], pointwise))
            return
        if kind in PROLOGUE:
            pro = PROLOGUE[kind]
            v, perm = elementwise(
                imp,
                [x],
                lambda e: pro(arith.extf(f32, e) if wide else e),
                elem=f32 if wide else None,
            )
            wide_in = False  # (the prologue's output is f32 already)
        else:
            wide_in = wide
        s = emit.reduce(
            v,
            [perm.index(a) for a in axes],
            init,
            combine,
            elem=f32 if wide_in else None,
            prologue=(lambda e: arith.extf(f32, e)) if wide_in else None,
        )
        kept = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
        y = TensorVal(s, kept, perm)
        if kind in FINISH or wide:
            n = int(np.prod([x.shape[a] for a in axes]))

            def finish(t: ir.Value) -> ir.Value:
                if kind in FINISH:
                    t = FINISH[kind](t, n)
                return arith.truncf(x.elem, t) if wide else t

            value, fperm = elementwise(imp, [y], finish, elem=x.elem if wide else None)
            y = TensorVal(value, kept, fperm)
        _define_reduced(imp, node, y, x.shape, axes, keepdims)

    return convert


def _define_reduced(
    imp: Importer,
    node: Node,
    y: TensorVal,
    shape: tuple[int, ...],
    axes: list[int],
    keepdims: int,
) -> None:
    """`node`'s output: `y`, a reduction of a tensor of `shape` over `axes`
    whose reduced dimensions are kept with size 1, those removed by a
    reshape unless `keepdims`."""
    if keepdims:
        imp.define(node.outputs[0], y.value, y.perm)
    else:
        imp.define(
            node.outputs[0],
            emit.reshape(imp.logical(y), [n for d, n in enumerate(shape) if d not in axes]),
        )


def log_sum_exp(imp: Importer, node: Node) -> None:
    """ReduceLogSumExp as `m + log(sum(exp(x - m)))`, m the max over the
    axes clamped to f32's finite range (a row of -inf gives -inf, one
    holding +inf gives +inf, as onnxruntime), in f32 for f16 (D-COMPILE-F16; session 54, an outside
    review: onnx's body, `log(sum(exp(x)))` in float64, computed here in f32
    by D-COMPILE-F64, was inf for an input of 100 where onnxruntime gives
    100.00676)."""
    x = imp.tensor(node.input(0))
    axes = _axes(imp, node, x.rank)
    if not axes:  # noop_with_empty_axes=1 and no axes: the input unchanged
        imp.vals[node.outputs[0]] = x
        return
    phys = [x.perm.index(a) for a in axes]
    f32 = ir.F32Type.get()
    half = is_f16(x.value)
    kept = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    top = TensorVal(emit.reduce(x.value, phys, -np.inf, arith.maximumf), kept, x.perm)

    def wide(v: ir.Value) -> ir.Value:
        return arith.extf(f32, v) if half else v

    def shift(m: ir.Value) -> ir.Value:
        """m clamped to f32's finite range (a clamp, D-LOW-CLAMP): an
        infinite max shifts by the largest finite value instead, so that
        x - shift is still -inf or +inf, never NaN."""
        big = float(np.finfo(np.float32).max)
        return arith.minimumf(arith.maximumf(m, emit.fconst(f32, -big)), emit.fconst(f32, big))

    exps, perm = elementwise(
        imp, [x, top], lambda v, m: math.exp(arith.subf(wide(v), shift(wide(m)))), elem=f32
    )
    sums = TensorVal(emit.reduce(exps, [perm.index(a) for a in axes], 0.0, arith.addf), kept, perm)

    def finish(s: ir.Value, m: ir.Value) -> ir.Value:
        r = arith.addf(math.log(s), shift(wide(m)))
        return arith.truncf(x.elem, r) if half else r

    value, perm = elementwise(imp, [sums, top], finish, elem=x.elem)
    keepdims = int(node.attrs.get("keepdims", 1))
    _define_reduced(imp, node, TensorVal(value, kept, perm), x.shape, axes, keepdims)


def _axes(imp: Importer, node: Node, rank: int) -> list[int]:
    """The reduced axes, sorted: the `axes` attribute (before opset 18; 13
    for ReduceSum) or the constant second input; none given means all axes,
    or none with `noop_with_empty_axes=1`."""
    given = node.attrs.get("axes")
    if given is None:
        given = imp.const_ints(node, 1, "axes")
    if given is None or len(given) == 0:
        return [] if int(node.attrs.get("noop_with_empty_axes", 0)) else list(range(rank))
    return sorted({imp.axis(int(a), rank) for a in given})


def _powf(a: ir.Value, b: ir.Value) -> ir.Value:
    """`a ** b`, f16 evaluated in f32 and rounded once (D-COMPILE-F16).  The
    exponent may have another float type than the base (ONNX types it T1,
    not T): it is widened to f32 on its own; an integer one (a constant
    tensor: one computed at run time is refused before) is converted to the
    float type the power is computed in (`math.powf` of an i32 was an
    internal error, an outside user, session 55).  A constant exponent of
    2 or 3 is products (`_small_power`)."""
    k = emit.scalar_value(b)
    if k in SMALL_POWERS:
        return _small_power(a, int(k))
    if isinstance(b.type, ir.IntegerType):
        b = arith.sitofp(ir.F32Type.get() if is_f16(a) else a.type, b)
    if not is_f16(a) and not is_f16(b):
        return math.powf(a, b)
    f32 = ir.F32Type.get()
    y = math.powf(*(arith.extf(f32, v) if is_f16(v) else v for v in (a, b)))
    return arith.truncf(a.type, y) if is_f16(a) else y


SMALL_POWERS = (2.0, 3.0)
"""The constant exponents `Pow` computes as products (D-COMPILE-POW-SMALL)."""


def _small_power(a: ir.Value, k: int) -> ir.Value:
    """`a ** k` for k = 2 or 3 as `a * a (* a)`, which NEM's `mul` computes,
    where `math.powf` has no NEM opcode of a constant exponent (an escape-
    hatch kernel for the whole fused chain: the tanh GELU's x ** 3, an
    outside user, session 62).  onnxruntime computes these exponents as
    products too; the same values at NaN and infinities; f16 in f32,
    rounded once (D-COMPILE-POW-SMALL)."""
    half = is_f16(a)
    w = arith.extf(ir.F32Type.get(), a) if half else a
    y = arith.mulf(w, w)
    if k == 3:
        y = arith.mulf(y, w)
    return arith.truncf(a.type, y) if half else y


pow_ = binary(_powf)
"""`Pow`: the exponent a float tensor (of any float type) or a constant (inlined)."""


def arg_extreme(kind: str) -> Callable[[Importer, Node], None]:
    """The converter of `ArgMax` (`kind` "max") or `ArgMin` (module docstring)."""
    init, combine = COMBINE[kind]

    def convert(imp: Importer, node: Node) -> None:
        x = imp.tensor(node.input(0))
        if not isinstance(x.elem, ir.FloatType):
            raise imp.error(
                f"not supported: {node.op_type} of {x.elem} values (float only)",
                fix=f"Cast the input to FLOAT before the {node.op_type} (exact for integers "
                "of up to 24 bits)",
            )
        axis = imp.axis(int(node.attrs.get("axis", 0)), x.rank)
        last = bool(int(node.attrs.get("select_last_index", 0)))
        v = imp.logical(x)
        extreme = emit.reduce(v, [axis], init, combine)
        rank, n = x.rank, x.shape[axis]
        i32 = ir.IntegerType.get_signless(32)
        iota = imp.weight(np.arange(n, dtype=np.int32), f"{node.name}_positions")
        kept = [1 if d == axis else s for d, s in enumerate(x.shape)]
        dims = [ir.AffineDimExpr.get(d) for d in range(rank)]
        at_axis = ir.AffineMap.get(rank, 0, [dims[axis]])
        reduced = ir.AffineMap.get(
            rank, 0, [ir.AffineConstantExpr.get(0) if d == axis else e for d, e in enumerate(dims)]
        )
        pick = arith.maxsi if last else arith.minsi

        def body(e: ir.Value, m: ir.Value, k: ir.Value, acc: ir.Value) -> ir.Value:
            nan = arith.andi(
                arith.cmpf(arith.CmpFPredicate.UNO, e, e), arith.cmpf(arith.CmpFPredicate.UNO, m, m)
            )
            hit = arith.ori(arith.cmpf(arith.CmpFPredicate.OEQ, e, m), nan)
            return pick(acc, arith.select(hit, k, emit.scalar(i32, -1 if last else n)))

        index = emit.generic(
            [(v, emit.identity(rank)), (extreme, reduced), (iota.value, at_axis)],
            emit.fill(kept, i32, -1 if last else n),
            reduced,
            [emit.REDUCTION if d == axis else emit.PARALLEL for d in range(rank)],
            body,
            pass_output=True,
        )
        if int(node.attrs.get("keepdims", 1)):
            imp.define(node.outputs[0], index)
        else:
            imp.define(
                node.outputs[0],
                emit.reshape(index, [s for d, s in enumerate(x.shape) if d != axis]),
            )

    return convert


def cumsum(imp: Importer, node: Node) -> None:
    """`CumSum` (module docstring): one `linalg.generic` over the output and
    a reduction dimension j along `axis`."""
    x = imp.tensor(node.input(0))
    axes = imp.const_ints(node, 1, "axis")
    if axes is None or len(axes) != 1:
        raise imp.error("not supported: CumSum's axis must be one constant integer")
    axis = imp.axis(int(axes[0]), x.rank)
    exclusive = bool(int(node.attrs.get("exclusive", 0)))
    reverse = bool(int(node.attrs.get("reverse", 0)))
    rank, n = x.rank, x.shape[axis]
    # f16 sums run in f32 and round once, as the reductions' (D-COMPILE-F16;
    # an outside user's running sum of 2,100 f16 ones stopped at 2048, 2048 + 1
    # rounding back to it, session 55)
    wide = is_f16(x.value)
    elem = ir.F32Type.get() if wide else x.elem
    add = arith.addf if isinstance(elem, ir.FloatType) else arith.addi
    dims = [ir.AffineDimExpr.get(d) for d in range(rank + 1)]
    j = dims[rank]
    iota = imp.weight(np.arange(n, dtype=np.int32), f"{node.name}_positions")
    at_j = [j if d == axis else dims[d] for d in range(rank)]
    operands = [
        (imp.logical(x), ir.AffineMap.get(rank + 1, 0, at_j)),
        (iota.value, ir.AffineMap.get(rank + 1, 0, [dims[axis]])),
        (iota.value, ir.AffineMap.get(rank + 1, 0, [j])),
    ]
    pred = {
        (False, False): arith.CmpIPredicate.sle,
        (True, False): arith.CmpIPredicate.slt,
        (False, True): arith.CmpIPredicate.sge,
        (True, True): arith.CmpIPredicate.sgt,
    }[(exclusive, reverse)]

    def body(e: ir.Value, i: ir.Value, k: ir.Value, acc: ir.Value) -> ir.Value:
        e = arith.extf(elem, e) if wide else e
        return add(acc, arith.select(arith.cmpi(pred, k, i), e, emit.scalar(elem, 0)))

    value = emit.generic(
        operands,
        emit.fill(x.shape, elem, 0),
        ir.AffineMap.get(rank + 1, 0, dims[:rank]),
        [emit.PARALLEL] * rank + [emit.REDUCTION],
        body,
        pass_output=True,
    )
    if wide:
        sums = TensorVal(value, x.shape, tuple(range(rank)))
        imp.define(
            node.outputs[0], *elementwise(imp, [sums], lambda t: arith.truncf(x.elem, t), x.elem)
        )
        return
    imp.define(node.outputs[0], value)


def topk(imp: Importer, node: Node) -> None:
    """`TopK`: the k largest (`largest=0`: smallest) elements along `axis`
    and their positions, sorted, ties to the lower position as ONNX says.

    Two steps of `linalg.generic` on the runtime's own comparisons, no sort:
    each element's rank along the axis (how many elements come before it:
    greater (smallest: less), or equal at a lower position; a NaN is greater
    than every number, as onnxruntime orders it),
    a reduction over a second position j; then output position p takes the
    element whose rank is p (a `select`, exact: no arithmetic on the value).
    k is a constant, or a graph input read only for its value when the
    model declares the output's shape (D-COMPILE-TOPK)."""
    x = imp.tensor(node.input(0))
    axis = imp.axis(int(node.attrs.get("axis", -1)), x.rank)
    k = _topk_k(imp, node, axis, x.shape[axis])
    largest = bool(int(node.attrs.get("largest", 1)))
    rank, n = x.rank, x.shape[axis]
    elem = x.elem
    i32 = ir.IntegerType.get_signless(32)
    v = imp.logical(x)
    iota = imp.weight(np.arange(n, dtype=np.int32), f"{node.name}_positions")
    d = [ir.AffineDimExpr.get(a) for a in range(rank + 1)]
    j = d[rank]

    def at(exprs: list[ir.AffineExpr]) -> ir.AffineMap:
        return ir.AffineMap.get(rank + 1, 0, exprs)

    def before(a: ir.Value, b: ir.Value, ka: ir.Value, kb: ir.Value) -> ir.Value:
        """Whether element a (at position ka) comes before b (at kb)."""
        if isinstance(elem, ir.FloatType):
            nan_a = arith.cmpf(arith.CmpFPredicate.UNO, a, a)
            nan_b = arith.cmpf(arith.CmpFPredicate.UNO, b, b)
            wins = arith.cmpf(arith.CmpFPredicate.OGT if largest else arith.CmpFPredicate.OLT, a, b)
            ties = arith.ori(arith.cmpf(arith.CmpFPredicate.OEQ, a, b), arith.andi(nan_a, nan_b))
            first, second = (nan_a, nan_b) if largest else (nan_b, nan_a)
            wins = arith.ori(wins, arith.andi(first, arith.xori(second, _true())))
        else:
            wins = arith.cmpi(arith.CmpIPredicate.sgt if largest else arith.CmpIPredicate.slt, a, b)
            ties = arith.cmpi(arith.CmpIPredicate.eq, a, b)
        lower = arith.cmpi(arith.CmpIPredicate.slt, ka, kb)
        return arith.ori(wins, arith.andi(ties, lower))

    def count(xi: ir.Value, xj: ir.Value, ki: ir.Value, kj: ir.Value, acc: ir.Value) -> ir.Value:
        one, zero = emit.scalar(i32, 1), emit.scalar(i32, 0)
        return arith.addi(acc, arith.select(before(xj, xi, kj, ki), one, zero))

    order = emit.generic(
        [
            (v, at(d[:rank])),
            (v, at([j if a == axis else d[a] for a in range(rank)])),
            (iota.value, at([d[axis]])),
            (iota.value, at([j])),
        ],
        emit.fill(x.shape, i32, 0),
        at(d[:rank]),
        [emit.PARALLEL] * rank + [emit.REDUCTION],
        count,
        pass_output=True,
    )
    out = [k if a == axis else s for a, s in enumerate(x.shape)]
    picks = imp.weight(np.arange(k, dtype=np.int32), f"{node.name}_ranks")
    # loop dims: the output's, then j over the input's axis
    along_i = at([j if a == axis else d[a] for a in range(rank)])
    reads = [(order, along_i), (picks.value, at([d[axis]]))]

    def choose(source: ir.Value, src_map: ir.AffineMap, out_elem: ir.Type) -> ir.Value:
        """Output position p along the axis: the `source` element whose rank is p."""

        def body(r: ir.Value, p: ir.Value, s: ir.Value, acc: ir.Value) -> ir.Value:
            return arith.select(arith.cmpi(arith.CmpIPredicate.eq, r, p), s, acc)

        return emit.generic(
            [*reads, (source, src_map)],
            emit.fill(out, out_elem, 0),
            at(d[:rank]),
            [emit.PARALLEL] * rank + [emit.REDUCTION],
            body,
            pass_output=True,
        )

    imp.define(node.outputs[0], choose(v, along_i, elem))
    if len(node.outputs) > 1 and node.outputs[1]:
        imp.define(node.outputs[1], choose(iota.value, at([j]), i32))


def _true() -> ir.Value:
    return arith.constant(ir.IntegerType.get_signless(1), 1)


def _topk_k(imp: Importer, node: Node, axis: int, n: int) -> int:
    """TopK's k: its constant input, else the size along `axis` of the
    values' shape as the model declares or ONNX infers it (the k input is then
    not read, as a Reshape's shape input: D-COMPILE-TOPK)."""
    c = imp.const(node.input(1))
    ks = [int(v) for v in c.reshape(-1)] if c is not None else None
    if ks is None:
        shape = imp.static_shape(node.outputs[0])
        if shape is None:
            raise imp.error(
                "not supported: TopK with a k computed at run time and no declared output "
                "shape (the output's shape would depend on the data)",
                fix=imp.run_time_fix(node.input(1), "k") + ", or declare the output's shape",
            )
        ks = [shape[axis]]
    if len(ks) != 1 or not 1 <= ks[0] <= n:
        raise imp.error(
            f"TopK's k must be one integer in 1..{n} (the size of axis {axis}), not {ks}"
        )
    return int(ks[0])
