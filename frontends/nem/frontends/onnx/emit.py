"""Building linalg-on-tensors IR with the upstream MLIR Python bindings.

The ONNX importer (`graph.py`, `ops.py`) describes each node in terms of
these few builders: elementwise `linalg.generic`s with broadcasting indexing
maps, reductions, transposes, reshapes (`tensor.collapse_shape` /
`expand_shape`), padding and fills.  Every builder takes and returns MLIR
tensor values in their *physical* shape; what a logical (ONNX) dimension is
physically is the importer's business (`graph.TensorVal.perm`).

All builders insert at the current `InsertionPoint` with the current
`Location`, so the importer sets both once per node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, linalg, tensor

PARALLEL = "parallel"
REDUCTION = "reduction"

"""Builds the scalar body of a generic: gets the input scalars (not the
output's), returns the value to yield."""


def value_of(x: ir.Value | ir.OpView | ir.OpResultList) -> ir.Value:
    """The result of a builder that returns the op (`linalg.transpose`, ...)."""
    if isinstance(x, ir.OpView):
        return x.operation.results[0]
    if isinstance(x, ir.OpResultList):
        return x[0]
    return x


def elem_type(value: ir.Value) -> ir.Type:
    return ir.RankedTensorType(value.type).element_type


def shape_of(value: ir.Value) -> tuple[int, ...]:
    return tuple(ir.RankedTensorType(value.type).shape)


def tensor_type(shape: Sequence[int], elem: ir.Type) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), elem)


def fconst(elem: ir.Type, x: float) -> ir.Value:
    """A float scalar constant (`x` may be +-inf)."""
    return arith.constant(elem, float(x))


def scalar(elem: ir.Type, x: float) -> ir.Value:
    """A scalar constant of `elem`, float or integer."""
    if isinstance(elem, ir.IntegerType):
        return arith.constant(elem, int(x))
    return fconst(elem, x)


def scalar_value(v: ir.Value) -> float | None:
    """The value of a scalar `arith.constant` such as `scalar` makes (a
    constant the elementwise bodies inline), else None: the importer's
    constant exponents and the L1 planner's clamp bounds read it here."""
    owner = v.owner
    op = owner.operation if isinstance(owner, ir.OpView) else owner
    if not isinstance(op, ir.Operation) or op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if isinstance(attr, ir.FloatAttr):
        return float(ir.FloatAttr(attr).value)
    return float(ir.IntegerAttr(attr).value) if isinstance(attr, ir.IntegerAttr) else None


def empty(shape: Sequence[int], elem: ir.Type) -> ir.Value:
    return tensor.empty(list(shape), elem)


def fill(shape: Sequence[int], elem: ir.Type, x: float) -> ir.Value:
    return value_of(linalg.fill(scalar(elem, x), outs=[empty(shape, elem)]))


def _iterators(kinds: Sequence[str]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{k}>") for k in kinds])


def generic(
    inputs: Sequence[tuple[ir.Value, ir.AffineMap]],
    init: ir.Value,
    out_map: ir.AffineMap,
    iterators: Sequence[str],
    body: Callable[..., ir.Value],
    pass_output: bool = False,
) -> ir.Value:
    """One `linalg.generic` with a single tensor output.  `body(*ins)` (or
    `body(*ins, out)` with `pass_output`, for reductions) returns the yielded
    scalar.  An input given twice at one map is one operand, its block
    argument passed for both: `Mul(x, x)` read x twice, every tile loaded
    twice (an outside review, session 63; upstream's canonicalization keeps
    both)."""
    out_t = init.type
    operands: list[tuple[ir.Value, ir.AffineMap]] = []
    slot: list[int] = []  # input -> its operand
    for v, m in inputs:
        at = next((k for k, (w, n) in enumerate(operands) if w == v and n == m), None)
        if at is None:
            at = len(operands)
            operands.append((v, m))
        slot.append(at)
    maps = [ir.AffineMapAttr.get(m) for _, m in operands] + [ir.AffineMapAttr.get(out_map)]
    op = linalg.GenericOp(
        [out_t], [v for v, _ in operands], [init], ir.ArrayAttr.get(maps), _iterators(iterators)
    )
    types = [elem_type(v) for v, _ in operands] + [elem_type(init)]
    block = op.regions[0].blocks.append(*types)
    with ir.InsertionPoint(block):
        args = list(block.arguments)
        ins = [args[k] for k in slot]
        result = body(*ins, args[-1]) if pass_output else body(*ins)
        linalg.YieldOp([result])
    return op.result


def broadcast_map(
    in_shape: Sequence[int], in_dims: Sequence[int | None], out_shape: Sequence[int]
) -> ir.AffineMap:
    """The indexing map of an operand whose dimension j is output loop
    dimension `in_dims[j]` (None: a dimension the output does not have, size
    1); a size-1 dimension against a larger output dimension is broadcast
    (constant 0)."""
    exprs = []
    for j, d in enumerate(in_dims):
        if d is None or (in_shape[j] == 1 and out_shape[d] != 1):
            exprs.append(ir.AffineConstantExpr.get(0))
        else:
            exprs.append(ir.AffineDimExpr.get(d))
    return ir.AffineMap.get(len(out_shape), 0, exprs)


def broadcast(
    value: ir.Value,
    dims: Sequence[int | None],
    out_shape: Sequence[int],
    out: ir.Value | None = None,
) -> ir.Value:
    """`value` broadcast to `out_shape`, its dimension j along output
    dimension `dims[j]` (a generic copy: the form of a bias accumulator),
    into `out` where given (a tensor of that shape), else a new one."""
    rank = len(out_shape)
    bmap = broadcast_map(shape_of(value), dims, out_shape)
    return generic(
        [(value, bmap)],
        empty(out_shape, elem_type(value)) if out is None else out,
        identity(rank),
        [PARALLEL] * rank,
        lambda v: v,
    )


def identity(rank: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(rank)


def transpose(value: ir.Value, perm: Sequence[int]) -> ir.Value:
    """`result[i...] = value[...]` with result dimension k = value dimension perm[k]."""
    shape = shape_of(value)
    out = empty([shape[p] for p in perm], elem_type(value))
    return value_of(linalg.transpose(value, outs=[out], permutation=list(perm)))


ORDER_FREE = (arith.maximumf, arith.minimumf)
"""The combiners whose result does not depend on the order of the elements
(`reduce` takes a max or min over several axes one axis at a time)."""


LONG_AXIS = 64
"""An order-free reduction over one axis at least this long is taken as
two (`long_axis_split`)."""


@dataclass(frozen=True)
class LongAxisSplit:
    """A long reduced axis as two (`long_axis_split`): the value padded by
    `pad` elements of the reduction's initial value at the end of the axis,
    reshaped to `shape`, whose axes `at` (m) and `at + 1` (k) stand for it."""

    shape: list[int]
    at: int
    pad: int


def long_axis_split(shape: Sequence[int], axis: int) -> LongAxisSplit | None:
    """An order-free reduction over one axis of `shape` at least LONG_AXIS
    long, its extent n taken as [m, k], reduced inner then outer: m the
    divisor of n nearest sqrt(n) from below where it is at least half of
    sqrt(n), else m = ceil(sqrt(n)), k = ceil(n / m) and the axis padded
    with the reduction's initial value to m k (a prime n: the padding is
    -inf for a max, which changes no maximum); the axes before it merged
    into one and those after it too (the lowering raises a window between at
    most two other axes, D-LOW-WINDOW); None for a shorter axis, or axes
    both before and after it of more than one element.  The lowering raises
    a max reduction to one `max` task per point of the reduced axis
    (D-COMPILE-REDUCE): a Softmax's row max over 3,136 elements was 3,136
    serial tasks, 21 s of compile CPU, quadratic in the row (311 s over
    12,544; an outside review, session 54); split, it is 56 + 56, and a
    prime 20,011 (15.4 s over 10,007, 42.5 s over 20,011: the same review)
    142 + 141."""
    n = shape[axis]
    before, after = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    if n < LONG_AXIS or (before > 1 and after > 1):
        return None
    root = math.isqrt(n)
    m = next((d for d in range(root, 1, -1) if n % d == 0), 1)
    if 2 * m < root:
        m = root + (root * root < n)
    k = -(-n // m)
    outer = [before] if before > 1 else []
    return LongAxisSplit([*outer, m, k, *([after] if after > 1 else [])], len(outer), m * k - n)


def reduce(
    value: ir.Value,
    axes: Sequence[int],
    init: float,
    combine: Callable[[ir.Value, ir.Value], ir.Value],
    keep_dims: bool = True,
    elem: ir.Type | None = None,
    prologue: Callable[[ir.Value], ir.Value] | None = None,
) -> ir.Value:
    """Reduce `value` over `axes` with `combine(acc, x)` starting from `init`;
    the reduced dimensions are kept with size 1 when `keep_dims`.  `elem`
    sets the accumulator's type (e.g. f32 for an f16 input); `prologue`
    maps each element before it is combined (e.g. an `extf`).

    A max or min over several axes is reduced one axis at a time, the
    innermost first (D-COMPILE-REDUCE, session 47): the lowering raises such
    a reduction to one `max`/`min` task per point of the reduced axes (max
    pooling over window offsets), so a `GlobalMaxPool` over 64x64 was 4,096
    tasks, 79 s of `nem-synthesize-deps` and `nem-verify`, and a `ReduceMax`
    over axes [1, 3] of [1, 64, 32, 64] ran out of memory; one axis at a
    time it is 64 + 64.  Exact: the two are order-free (`maximumf` and
    `minimumf` return a NaN operand whichever the order)."""
    shape = shape_of(value)
    rank = len(shape)
    axes = sorted(a % rank for a in axes)
    order_free = keep_dims and combine in ORDER_FREE and elem is None and not prologue
    if len(axes) > 1 and order_free:
        for axis in reversed(axes):
            value = reduce(value, [axis], init, combine)
        return value
    # a max only: the lowering raises it per point of the axis, a min not at all (one kernel)
    if (
        len(axes) == 1
        and order_free
        and combine is arith.maximumf
        and (split := long_axis_split(shape, axes[0])) is not None
    ):
        if split.pad:
            ends = [split.pad if d == axes[0] else 0 for d in range(rank)]
            value = pad(value, [0] * rank, ends, init)
        rows = reshape(value, split.shape)
        rows = reduce(reduce(rows, [split.at + 1], init, combine), [split.at], init, combine)
        return reshape(rows, [1 if d == axes[0] else s for d, s in enumerate(shape)])
    elem = elem or elem_type(value)
    if keep_dims:
        out_shape = [1 if d in axes else s for d, s in enumerate(shape)]
        out_map = ir.AffineMap.get(
            rank,
            0,
            [
                ir.AffineConstantExpr.get(0) if d in axes else ir.AffineDimExpr.get(d)
                for d in range(rank)
            ],
        )
    else:
        out_shape = [s for d, s in enumerate(shape) if d not in axes]
        out_map = ir.AffineMap.get(
            rank, 0, [ir.AffineDimExpr.get(d) for d in range(rank) if d not in axes]
        )
    kinds = [REDUCTION if d in axes else PARALLEL for d in range(rank)]

    def body(x: ir.Value, acc: ir.Value) -> ir.Value:
        return combine(acc, prologue(x) if prologue else x)

    return generic(
        [(value, identity(rank))],
        fill(out_shape, elem, init),
        out_map,
        kinds,
        body,
        pass_output=True,
    )


def reassociation(src: Sequence[int], dst: Sequence[int]) -> list[list[int]] | None:
    """Groups of consecutive `src` dimensions whose products are the `dst`
    dimensions (`dst` is a collapse of `src`), or None.  Trailing size-1
    dimensions join the last group."""
    groups: list[list[int]] = []
    i = 0
    for d in dst:
        group: list[int] = []
        prod = 1
        while i < len(src) and (not group or prod < d):
            prod *= src[i]
            group.append(i)
            i += 1
        if prod != d or not group:  # (a trailing 1 of dst after src ran out)
            return None
        groups.append(group)
    if not groups:
        return None
    while i < len(src):
        if src[i] != 1:
            return None
        groups[-1].append(i)
        i += 1
    return groups


def reshape(value: ir.Value, dst: Sequence[int]) -> ir.Value:
    """A row-major reshape as one `tensor.collapse_shape` or `expand_shape`
    when the shapes allow, else a collapse to 1-D and an expand (both are
    views of the same bytes)."""
    src = shape_of(value)
    dst = list(dst)
    if list(src) == dst:
        return value
    elem = elem_type(value)
    if not dst:  # a scalar (MatMul of two vectors): collapse every size-1 dimension
        return tensor.collapse_shape(tensor_type([], elem), value, [])
    if not src:  # a scalar to size-1 dimensions (Unsqueeze of a 0-d value): no groups
        return tensor.expand_shape(tensor_type(dst, elem), value, [], [], dst)
    if len(dst) < len(src) and (groups := reassociation(src, dst)) is not None:
        return tensor.collapse_shape(tensor_type(dst, elem), value, groups)
    if len(dst) > len(src) and (groups := reassociation(dst, src)) is not None:
        return tensor.expand_shape(tensor_type(dst, elem), value, groups, [], dst)
    n = 1
    for s in src:
        n *= s
    flat = (
        value
        if len(src) == 1
        else tensor.collapse_shape(tensor_type([n], elem), value, [list(range(len(src)))])
    )
    if len(dst) == 1:
        return flat
    return tensor.expand_shape(tensor_type(dst, elem), flat, [list(range(len(dst)))], [], dst)


def pad(value: ir.Value, low: Sequence[int], high: Sequence[int], x: float) -> ir.Value:
    """`tensor.pad` with the constant `x` (zero for convolutions, -inf for max pooling)."""
    if not any(low) and not any(high):
        return value
    shape = shape_of(value)
    elem = elem_type(value)
    out_shape = [s + a + b for s, a, b in zip(shape, low, high)]
    op = tensor.PadOp(tensor_type(out_shape, elem), value, [], [], list(low), list(high))
    block = op.regions[0].blocks.append(*([ir.IndexType.get()] * len(shape)))
    with ir.InsertionPoint(block):
        tensor.YieldOp(scalar(elem, x))  # (an integer tensor's Pad: D-COMPILE-I64)
    return op.result


def concat(values: Sequence[ir.Value], axis: int) -> ir.Value:
    """Concatenation along `axis` as `tensor.insert_slice`s into one `tensor.empty`."""
    shapes = [shape_of(v) for v in values]
    out_shape = list(shapes[0])
    out_shape[axis] = sum(s[axis] for s in shapes)
    acc = empty(out_shape, elem_type(values[0]))
    offset = 0
    for v, s in zip(values, shapes):
        offsets = [offset if d == axis else 0 for d in range(len(s))]
        acc = tensor.insert_slice(v, acc, [], [], [], offsets, list(s), [1] * len(s))
        offset += s[axis]
    return acc
