"""The ONNX converters of everything but softmax and layer normalization
(`norms`); `converters.CONVERTERS[op_type](importer, node)` is the table.

A converter reads its inputs from the importer (`imp.tensor`, `imp.const`),
builds linalg on tensors with `emit`, and binds its outputs with
`imp.define`.  Unsupported attribute values raise `imp.error(...)` (a
located `OnnxImportError`).  Decisions: docs/compile.md and
docs/spec-decisions.md (D-COMPILE-*).

Float16 transcendental functions (`exp`, `tanh`, `erf`, sigmoid, softmax's
exponentials) and normalization statistics are computed in f32 and rounded
once to f16 (D-COMPILE-F16): the value NEM's own f16 ops produce (computed
wide, rounded once, D-NUM-FLOAT) and what onnxruntime computes.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, math

from nem.frontends.onnx import emit
from nem.frontends.onnx.diagnostics import OnnxImportError
from nem.frontends.onnx.graph import Importer, Node, TensorVal

Scalar = Callable[..., ir.Value]

# --------------------------------------------------------------------------
# elementwise with numpy broadcasting


def broadcast_shape(imp: Importer, shapes: Sequence[Sequence[int]]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(rank):
        dims = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0} - {1}
        if len(dims) > 1:
            raise imp.error(f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def elementwise(
    imp: Importer,
    operands: Sequence[TensorVal | float],
    body: Scalar,
    elem: ir.Type | None = None,
    scalar_elem: ir.Type | None = None,
) -> tuple[ir.Value, tuple[int, ...]]:
    """`body(*scalars)` over the broadcast of `operands` (floats are inlined
    constants of `scalar_elem`, default the first tensor's type: Where's
    condition is not).  The result takes the layout of the first operand of
    full rank, so NHWC activations stay NHWC; returns (value, perm)."""
    tensors = [o for o in operands if isinstance(o, TensorVal)]
    shape = broadcast_shape(imp, [t.shape for t in tensors])
    rank = len(shape)
    perm = next(
        (t.perm for t in tensors if t.rank == rank and t.shape == shape), tuple(range(rank))
    )
    inv = [0] * rank
    for i, p in enumerate(perm):
        inv[p] = i
    phys_out = [shape[p] for p in perm]
    ins = []
    for t in tensors:
        dims = [inv[p + rank - t.rank] for p in t.perm]
        ins.append((t.value, emit.broadcast_map(emit.shape_of(t.value), dims, phys_out)))
    elem = elem or tensors[0].elem
    const_elem = scalar_elem or tensors[0].elem

    def scalar_body(*xs: ir.Value) -> ir.Value:
        it = iter(xs)
        args = [
            next(it) if isinstance(o, TensorVal) else emit.scalar(const_elem, o) for o in operands
        ]
        return body(*args)

    out = emit.generic(
        ins, emit.empty(phys_out, elem), emit.identity(rank), [emit.PARALLEL] * rank, scalar_body
    )
    return out, perm


def operand(imp: Importer, name: str) -> TensorVal | float:
    """An elementwise operand: a one-element constant is inlined as a scalar,
    an integer one as the weight it would be (`Importer.check_data`: an int64
    outside int32's range is a located error, D-COMPILE-I64; an outside
    user's `Add(idx, 3000000000)` wrapped to -1294967296 without a word, and
    int64's maximum, torch's sentinel, was an internal error, session 55)."""
    c = imp.const(name)
    if c is not None and c.size == 1 and c.ndim == 0:
        if c.dtype.kind in "iub":
            return int(imp.check_data(c, name).reshape(()))
        return float(c.reshape(()))
    return imp.tensor(name)


def define_elementwise(
    imp: Importer,
    node: Node,
    operands: Sequence[TensorVal | float],
    body: Scalar,
    elem: ir.Type | None = None,
    scalar_elem: ir.Type | None = None,
) -> None:
    """`node`'s output: `elementwise(...)` of its operands (`elem`,
    `scalar_elem` as there), at least one of which is computed at run time."""
    if not any(isinstance(o, TensorVal) for o in operands):
        raise _all_constants(imp)
    value, perm = elementwise(imp, operands, body, elem=elem, scalar_elem=scalar_elem)
    imp.define(node.outputs[0], value, perm)


def _all_constants(imp: Importer) -> OnnxImportError:
    return imp.error(
        "not supported: an elementwise op whose operands are all constants",
        fix="fold the constant subgraph: nem-compile's simplifier does (unless --no-simplify, "
        "or where it refuses its graph: a note says why), or onnx-simplifier",
    )


def is_f16(x: ir.Value) -> bool:
    """Whether `x` (a scalar, or a tensor by its element type) is f16."""
    t = x.type
    return isinstance(
        ir.ShapedType(t).element_type if isinstance(t, ir.ShapedType) else t, ir.F16Type
    )


def wide(fn: Callable[[ir.Value], ir.Value]) -> Callable[[ir.Value], ir.Value]:
    """`fn` evaluated in f32 for an f16 scalar, rounded once (D-COMPILE-F16)."""

    def apply(x: ir.Value) -> ir.Value:
        if not is_f16(x):
            return fn(x)
        f32 = ir.F32Type.get()
        return arith.truncf(x.type, fn(arith.extf(f32, x)))

    return apply


def sigmoid(x: ir.Value) -> ir.Value:
    one = emit.fconst(x.type, 1.0)
    return arith.divf(one, arith.addf(one, math.exp(arith.negf(x))))


def _gelu(approximate: str) -> Callable[[ir.Value], ir.Value]:
    def erf_form(x: ir.Value) -> ir.Value:
        c = partial(emit.fconst, x.type)
        inner = math.erf(arith.mulf(x, c(1.0 / pymath.sqrt(2.0))))
        return arith.mulf(arith.mulf(c(0.5), x), arith.addf(c(1.0), inner))

    def tanh_form(x: ir.Value) -> ir.Value:
        c = partial(emit.fconst, x.type)
        cube = arith.mulf(arith.mulf(x, x), x)
        inner = arith.mulf(
            c(pymath.sqrt(2.0 / pymath.pi)), arith.addf(x, arith.mulf(c(0.044715), cube))
        )
        return arith.mulf(arith.mulf(c(0.5), x), arith.addf(c(1.0), math.tanh(inner)))

    return tanh_form if approximate == "tanh" else erf_form


def unary(fn: Callable[[ir.Value], ir.Value]) -> Callable[[Importer, Node], None]:
    def convert(imp: Importer, node: Node) -> None:
        if imp.const(node.input(0)) is not None:  # (as a weight, a 0-d one
            raise _all_constants(imp)  # came out of shape [1]: session 65)
        define_elementwise(imp, node, [imp.tensor(node.input(0))], fn)

    return convert


def relu(x: ir.Value) -> ir.Value:
    return arith.maximumf(x, emit.fconst(x.type, 0.0))


def leaky_relu(imp: Importer, node: Node) -> None:
    alpha = float(node.attrs.get("alpha", 0.01))

    def body(x: ir.Value) -> ir.Value:
        neg = arith.cmpf(arith.CmpFPredicate.OLT, x, emit.fconst(x.type, 0.0))
        return arith.select(neg, arith.mulf(x, emit.fconst(x.type, alpha)), x)

    define_elementwise(imp, node, [imp.tensor(node.input(0))], body)


def clip(imp: Importer, node: Node) -> None:
    if imp.opset < 11:
        lo, hi = node.attrs.get("min"), node.attrs.get("max")
    else:
        late = [name for name in node.inputs[1:3] if name and imp.const(name) is None]
        if len(late) == 2:  # (not one now, the other on the next compile: session 62)
            raise imp.error(
                f"not supported: Clip bounds '{late[0]}' and '{late[1]}' computed at run time",
                fix="; ".join(imp.run_time_fix(name, "bound") for name in late),
            )
        lo, hi = imp.const_scalar(node, 1, "bound"), imp.const_scalar(node, 2, "bound")
    # bounds of -inf and +inf clip nothing, NaN included (max/min keep it)
    lo = None if lo is not None and float(lo) == -pymath.inf else lo
    hi = None if hi is not None and float(hi) == pymath.inf else hi
    if lo is None and hi is None:  # the identity, as ONNX defines it (an outside user, session 62)
        identity(imp, node)
        return

    def body(x: ir.Value) -> ir.Value:
        # integers as Max and Min take them (`by_type`; session 55)
        if lo is not None:
            x = by_type(arith.maximumf)(x, emit.scalar(x.type, lo))
        if hi is not None:
            x = by_type(arith.minimumf)(x, emit.scalar(x.type, hi))
        return x

    define_elementwise(imp, node, [imp.tensor(node.input(0))], body)


def gelu(imp: Importer, node: Node) -> None:
    approximate = text(node, "approximate", "none")
    if approximate not in ("none", "tanh"):
        raise imp.error(f"not supported: Gelu approximate='{approximate}'")
    define_elementwise(imp, node, [imp.tensor(node.input(0))], wide(_gelu(approximate)))


INTEGER_OPS: dict[Callable[..., ir.Value], Callable[..., ir.Value]] = {
    arith.addf: arith.addi,
    arith.subf: arith.subi,
    arith.mulf: arith.muli,
    arith.divf: arith.divsi,
    arith.maximumf: arith.maxsi,
    arith.minimumf: arith.minsi,
}
"""The integer op of each float op an integer tensor may take (D-COMPILE-I64):
ONNX's integer Div truncates, as `divsi` does."""


def by_type(fn: Callable[..., ir.Value]) -> Callable[..., ir.Value]:
    """`fn`, applied as its integer counterpart (INTEGER_OPS) to integers."""

    def apply(a: ir.Value, *rest: ir.Value) -> ir.Value:
        return INTEGER_OPS[fn](a, *rest) if isinstance(a.type, ir.IntegerType) else fn(a, *rest)

    return apply


def binary(fn: Callable[[ir.Value, ir.Value], ir.Value]) -> Callable[[Importer, Node], None]:
    def convert(imp: Importer, node: Node) -> None:
        define_elementwise(
            imp, node, [operand(imp, node.input(0)), operand(imp, node.input(1))], by_type(fn)
        )

    return convert


def identity(imp: Importer, node: Node) -> None:
    imp.vals[node.outputs[0]] = imp.tensor(node.input(0))


def dropout(imp: Importer, node: Node) -> None:
    """Inference Dropout: the identity, its mask (an optional second output)
    all true (D-COMPILE-BOOL: i32 ones).  Training mode with a nonzero
    ratio draws random numbers: not supported.  `ratio` and
    `training_mode` (inputs 1 and 2 from opset 12, D-COMPILE-BIND; the
    `ratio` attribute before) are read at compile time."""
    given = imp.const_scalar(node, 1, "ratio")
    ratio = float(node.attrs.get("ratio", 0.5)) if given is None else given
    training = bool(imp.const_scalar(node, 2, "training_mode"))
    if training and ratio != 0.0:
        raise imp.error(
            f"not supported: Dropout in training mode with ratio {ratio:g}: its output is random",
            fix="export the model for inference (training_mode false), or use ratio 0",
        )
    x = imp.tensor(node.input(0))
    imp.vals[node.outputs[0]] = x
    if len(node.outputs) > 1 and node.outputs[1]:
        i32 = ir.IntegerType.get_signless(32)
        imp.define(node.outputs[1], emit.fill(list(x.shape), i32, 1))


CONSTANT_FORMS = {
    "value": None,
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
}
"""Constant's attributes the importer takes, with the dtype ONNX gives the
scalar and list forms (FLOAT, INT64); `value` is a tensor of its own type."""


def constant(imp: Importer, node: Node) -> None:
    from onnx import numpy_helper

    form = next((a for a in CONSTANT_FORMS if a in node.attrs), None)
    if form is None:
        given = ", ".join(f"'{a}'" for a in node.attrs) or "none"
        raise imp.error(
            f"not supported: Constant with attribute {given} (the importer "
            "takes " + ", ".join(f"'{a}'" for a in CONSTANT_FORMS) + ")",
            fix="give the constant as a float or integer tensor ('value') or an "
            "initializer (sparse and string constants have no NEM form)",
        )
    v = node.attrs[form]
    imp.set_const(
        node.outputs[0],
        numpy_helper.to_array(v) if form == "value" else np.array(v, dtype=CONSTANT_FORMS[form]),
    )


def ints(node: Node, key: str, default: Sequence[int]) -> list[int]:
    return [int(v) for v in node.attrs.get(key, default)]


def text(node: Node, key: str, default: str) -> str:
    """A string attribute: onnx's helper reads it as bytes."""
    value = node.attrs.get(key, default)
    return value.decode() if isinstance(value, bytes) else str(value)


def x_dtype(imp: Importer, x: TensorVal) -> np.dtype:
    """The numpy dtype of `x`'s elements (f16 or f32)."""
    return np.dtype(np.float16) if isinstance(x.elem, ir.F16Type) else np.dtype(np.float32)


# --------------------------------------------------------------------------
# matrix products


def _matmul2d(a: ir.Value, b: ir.Value, init: ir.Value) -> ir.Value:
    return emit.value_of(linalg.matmul(a, b, outs=[init]))


def _matmul_nt(a: ir.Value, b_nk: ir.Value, init: ir.Value) -> ir.Value:
    """`init + a @ b_nk^T` with `b_nk` [N, K] read in place (the lowering
    raises it to a NEM matmul with trans_b = 1), no transpose materialized."""
    d = [ir.AffineExpr.get_dim(i) for i in range(3)]
    maps = [ir.AffineMap.get(3, 0, [d[0], d[2]]), ir.AffineMap.get(3, 0, [d[1], d[2]])]
    return emit.generic(
        list(zip([a, b_nk], maps)),
        init,
        ir.AffineMap.get(3, 0, d[:2]),
        [emit.PARALLEL, emit.PARALLEL, emit.REDUCTION],
        lambda x, y, acc: arith.addf(acc, arith.mulf(x, y)),
        pass_output=True,
    )


def _transposed_view(b: TensorVal) -> bool:
    """Whether `b` is a view (ONNX Transpose) of a tensor laid out [..., N, K]:
    its last two logical dimensions swapped in its value, the others in place."""
    r = b.rank
    return r >= 2 and tuple(b.perm) == (*range(r - 2), r - 1, r - 2)


def matmul(imp: Importer, node: Node) -> None:
    a, b = imp.tensor(node.input(0)), imp.tensor(node.input(1))
    ash, bsh = list(a.shape), list(b.shape)
    if (
        len(bsh) >= 2
        and _transposed_view(b)
        and int(np.prod(bsh[:-2])) == 1
        and (len(bsh) == 2 or int(np.prod(ash[:-2])) == 1)
        and ash[-1] == bsh[-2]
    ):
        # A @ K^T (attention's scores): K read transposed by the matmul
        rows, (k, n) = int(np.prod(ash[:-1])), bsh[-2:]
        y = _matmul_nt(
            emit.reshape(imp.logical(a), [rows, k]),
            emit.reshape(b.value, [n, k]),
            emit.fill([rows, n], a.elem, 0.0),
        )
        batch = list(broadcast_shape(imp, [ash[:-2], bsh[:-2]]))
        imp.define(node.outputs[0], emit.reshape(y, [*batch, ash[-2], n]))
        return
    av, bv = imp.logical(a), imp.logical(b)
    if len(ash) == 1:
        av, ash = emit.reshape(av, [1, ash[0]]), [1, ash[0]]
    if len(bsh) == 1:
        bv, bsh = emit.reshape(bv, [bsh[0], 1]), [bsh[0], 1]
    m, k = ash[-2:]
    k2, n = bsh[-2:]
    if k != k2:
        raise imp.error(f"MatMul of {a.shape} and {b.shape}: inner dimensions differ")
    elem = a.elem
    if len(bsh) == 2:  # [..., M, K] x [K, N]: one 2-D matmul over the rows
        rows = int(np.prod(ash[:-1]))
        y = _matmul2d(emit.reshape(av, [rows, k]), bv, emit.fill([rows, n], elem, 0.0))
        out = [*ash[:-1], n]
    else:
        batch = list(broadcast_shape(imp, [ash[:-2], bsh[:-2]]))
        nb = int(np.prod(batch))
        av = _broadcast_batch(av, ash, batch)
        bv = _broadcast_batch(bv, bsh, batch)
        if nb == 1:  # a batch of one is a 2-D matmul (the form the lowering raises)
            y = _matmul2d(
                emit.reshape(av, [m, k]), emit.reshape(bv, [k, n]), emit.fill([m, n], elem, 0.0)
            )
        else:
            y = emit.value_of(
                linalg.batch_matmul(
                    emit.reshape(av, [nb, m, k]),
                    emit.reshape(bv, [nb, k, n]),
                    outs=[emit.fill([nb, m, n], elem, 0.0)],
                )
            )
        out = [*batch, m, n]
    if len(a.shape) == 1:
        out.pop(-2)
    if len(b.shape) == 1:
        out.pop(-1)
    imp.define(node.outputs[0], emit.reshape(y, out))


def _broadcast_batch(v: ir.Value, shape: Sequence[int], batch: Sequence[int]) -> ir.Value:
    """`v` ([..., R, C]) with its batch dimensions broadcast to `batch`."""
    if list(shape[:-2]) == list(batch):
        return v
    pad = len(batch) + 2 - len(shape)
    return emit.broadcast(v, [d + pad for d in range(len(shape))], [*batch, *shape[-2:]])


def gemm(imp: Importer, node: Node) -> None:
    alpha = float(node.attrs.get("alpha", 1.0))
    beta = float(node.attrs.get("beta", 1.0))
    ta, tb = int(node.attrs.get("transA", 0)), int(node.attrs.get("transB", 0))
    a = imp.tensor(node.input(0))
    if a.rank != 2:
        raise imp.error(f"Gemm input A has rank {a.rank}, not 2")
    av = imp.in_perm(a, (1, 0) if ta else (0, 1))
    bc = imp.const(node.input(1))
    if bc is not None:  # weights stored [K, N]
        bv = imp.weight(bc.T if tb else bc, node.input(1), perm=(1, 0) if tb else (0, 1)).value
        kb, n = (bc.shape[1], bc.shape[0]) if tb else bc.shape
    else:
        b = imp.tensor(node.input(1))
        bv = imp.in_perm(b, (1, 0) if tb else (0, 1))
        kb, n = emit.shape_of(bv)
    m, k = emit.shape_of(av)
    if k != kb:
        raise imp.error(f"Gemm inner dimensions differ: A gives {k}, B gives {kb}")
    elem = a.elem
    cname = node.input(2)
    c = imp.const(cname) if cname else None
    if c is not None and alpha == 1.0:  # Y = A B + beta C: the matmul accumulates into beta C
        scaled = np.atleast_1d(c.astype(np.float64) * beta).astype(x_dtype(imp, a))
        ct = imp.weight(scaled, cname)
        rank = scaled.ndim
        init = emit.broadcast(ct.value, [d + 2 - rank for d in range(rank)], [m, n])
        imp.define(node.outputs[0], _matmul2d(av, bv, init))
        return
    y = _matmul2d(av, bv, emit.fill([m, n], elem, 0.0))
    if not cname and alpha == 1.0:
        imp.define(node.outputs[0], y)
        return
    prod = TensorVal(y, (m, n), (0, 1))
    ops: list[TensorVal | float] = [prod]
    if cname:
        ops.append(imp.tensor(cname))

    def body(p: ir.Value, cv: ir.Value | None = None) -> ir.Value:
        r = arith.mulf(p, emit.fconst(p.type, alpha)) if alpha != 1.0 else p
        if cv is not None:
            cs = arith.mulf(cv, emit.fconst(cv.type, beta)) if beta != 1.0 else cv
            r = arith.addf(r, cs)
        return r

    define_elementwise(imp, node, ops, body)


# --------------------------------------------------------------------------
# shapes


def flatten(imp: Importer, node: Node) -> None:
    x = imp.tensor(node.input(0))
    axis = int(node.attrs.get("axis", 1))  # in [-r, r] (r: rows of one), -1 is r - 1
    if not -x.rank <= axis <= x.rank:
        raise imp.error(f"axis {axis} out of range for Flatten of a rank-{x.rank} tensor")
    axis = axis + x.rank if axis < 0 else axis
    rows = int(np.prod(x.shape[:axis]))
    imp.define(node.outputs[0], emit.reshape(imp.logical(x), [rows, int(np.prod(x.shape[axis:]))]))


def reshape(imp: Importer, node: Node) -> None:
    c = imp.const(node.input(0))
    src = c.shape if c is not None else imp.tensor(node.input(0)).shape
    target = imp.const(node.input(1))
    declared = imp.static_shape(node.outputs[0])
    if target is None and node.input(1) in imp.unread_inputs and declared is not None:
        target = np.array(declared)  # the shape the model declares (D-COMPILE-IFACE)
    if target is None:
        raise imp.error(
            f"not supported: Reshape to a shape '{node.input(1)}' computed at run time",
            fix="make the shape an initializer or Constant",
        )
    allowzero = int(node.attrs.get("allowzero", 0))
    dims = [int(d) for d in target.reshape(-1)]
    dims = [src[i] if d == 0 and not allowzero else d for i, d in enumerate(dims)]
    total = int(np.prod(src))
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        dims[dims.index(-1)] = total // known if known else 0
    if int(np.prod(dims)) != total:
        raise imp.error(f"cannot reshape {list(src)} to {dims}")
    if c is not None:
        imp.set_const(node.outputs[0], c.reshape(dims))
        return
    x = imp.tensor(node.input(0))
    order, out = reshape_orders(x.shape, x.perm, dims)
    imp.define(node.outputs[0], emit.reshape(imp.in_perm(x, order), [dims[d] for d in out]), out)


def reshape_orders(
    shape: Sequence[int], perm: Sequence[int], dims: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """For a Reshape of a value of logical `shape` held in order `perm`
    (D-COMPILE-LAYOUT) to `dims`: the order to hold the source in and the
    order of the result, so that the Reshape is a view of the same bytes.
    The logical dimensions are cut into groups that the Reshape merges or
    splits (each group's product is the same on both sides); each group's
    dimensions are laid out in their logical order, the groups in the
    order their dimensions have in `perm`.  Where every group's dimensions
    already lie so (size-1 dimensions anywhere), the source moves no data:
    ShuffleNet's channel shuffle (NHWC C -> g x C/g, a Transpose, C/g x g
    -> C) made three copies through the logical order; now one, the
    swap of the two channel dimensions, and the result NHWC for the next
    convolution (session 60).  The logical order where `perm` is."""
    ident = tuple(range(len(shape)))
    if tuple(perm) == ident or 0 in shape or 0 in dims:
        return ident, tuple(range(len(dims)))
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(shape) or j < len(dims):
        a, b, pa, pb = [], [], 1, 1
        if i < len(shape):
            a, pa, i = [i], shape[i], i + 1
        if j < len(dims):
            b, pb, j = [j], dims[j], j + 1
        while pa != pb:
            if pa < pb:
                a, pa, i = [*a, i], pa * shape[i], i + 1
            else:
                b, pb, j = [*b, j], pb * dims[j], j + 1
        groups.append((a, b))
    at = {d: k for k, d in enumerate(perm)}

    def first(src: list[int]) -> int:
        big = [at[d] for d in src if shape[d] != 1]
        return min(big or [at[d] for d in src] or [-1])

    groups.sort(key=lambda g: first(g[0]))
    return tuple(d for a, _ in groups for d in a), tuple(d for _, b in groups for d in b)


def transpose(imp: Importer, node: Node) -> None:
    x = imp.tensor(node.input(0))
    perm = ints(node, "perm", list(reversed(range(x.rank))))
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    # a layout change only: no data moves until a consumer needs the order
    imp.vals[node.outputs[0]] = TensorVal(
        x.value, tuple(x.shape[p] for p in perm), tuple(inv[p] for p in x.perm)
    )


def concat(imp: Importer, node: Node) -> None:
    xs = [imp.tensor(n) for n in node.inputs if n]
    axis = imp.axis(int(node.attrs["axis"]), xs[0].rank)
    perm = xs[0].perm
    vals = [imp.in_perm(x, perm) for x in xs]
    imp.define(node.outputs[0], emit.concat(vals, perm.index(axis)), perm)
