"""Shape typing rules of compute opcodes (SPEC §5 typing rules).

One function per opcode category; each yields `(rule, message, fix)`.
Shapes come from the region types (static entries); a dynamic entry skips
the comparison it takes part in.  Attribute defaults come from the registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

from xdsl.dialects.builtin import ArrayAttr
from xdsl.ir import Attribute, SSAValue

from nem.dialect.attributes import DYNAMIC, ArgRefAttr, RegionType
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import ComputeOp

Finding = tuple[str, str, str]


def window_reach(out: int, stride: int, kernel: int, dilation: int) -> int:
    """How many input elements along a spatial axis `out` windows read: one
    past the last, `(out - 1) * stride + (kernel - 1) * dilation + 1`.  The
    one formula of a windowed op's reach, shared by the ONNX front end
    (auto_pad's total padding), the padded tensors written in place (the
    border they fill, D-COMPILE-PAD-IN-PLACE) and the lowering's raising of
    windowed loop nests (the input extent)."""
    return (out - 1) * stride + (kernel - 1) * dilation + 1


def attr_int(op: ComputeOp, name: str, ev: Evaluator) -> int | None:
    """The value of `int` attribute `name`, defaulted from the registry; None
    when it is not a compile-time integer."""
    v = _attr_value(op, name, ev)
    return v if isinstance(v, int) else None


def attr_ints(op: ComputeOp, name: str, ev: Evaluator) -> list[int] | None:
    """The value of `int_list` attribute `name`, defaulted from the registry;
    None when it is absent or an entry is not a compile-time integer."""
    v = _attr_value(op, name, ev)
    if not isinstance(v, list):
        return None
    ints = [x for x in v if isinstance(x, int)]
    return ints if len(ints) == len(v) else None


def _attr_value(op: ComputeOp, name: str, ev: Evaluator) -> object:
    """The value of attribute `name` (an int, a list, None where not static),
    defaulted from the registry."""
    a = op.attrs.data.get(name)
    if a is None:
        spec = op.SPEC.attributes.get(name)
        return spec.default if spec is not None else None
    return _eval_attr(a, tuple(op.args), ev)


def _eval_attr(a: Attribute, args: Sequence[SSAValue], ev: Evaluator) -> object:
    if isinstance(a, ArgRefAttr):
        return ev.static(args[a.index.data])
    if isinstance(a, ArrayAttr):
        return [_eval_attr(x, args, ev) for x in a.data]
    return None


def _shape(value: SSAValue) -> tuple[int, ...]:
    rtype = value.type
    assert isinstance(rtype, RegionType)  # compute operands are regions
    return rtype.shape_values or ()


def _known(*shapes: tuple[int, ...]) -> bool:
    return all(DYNAMIC not in s for s in shapes)


def check_shapes(op: ComputeOp, ev: Evaluator) -> Iterator[Finding]:
    cat = op.SPEC.category
    fn = _CHECKS.get(cat)
    if fn is not None:
        yield from fn(op, ev)


def _same_shapes(op: ComputeOp, ev: Evaluator) -> Iterator[Finding]:
    shapes = [_shape(v) for v in (*op.ins, *op.outs)]
    if _known(*shapes) and len(set(shapes)) > 1:
        rule = {"elementwise": "FAM-13", "softmax": "FAM-19"}.get(op.SPEC.category, "FAM-13")
        if op.SPEC.category == "normalization":
            x, z = _shape(op.ins[0]), _shape(op.outs[0])
            if x != z:
                yield (
                    "FAM-18",
                    f"{op.opcode} output shape {list(z)} differs from input {list(x)}",
                    "normalization keeps the shape",
                )
            return
        yield (
            rule,
            f"{op.opcode} operand shapes differ: " + ", ".join(str(list(s)) for s in shapes),
            "elementwise operands have identical shapes",
        )


def _linear(op: ComputeOp, ev: Evaluator) -> Iterator[Finding]:
    a, b, y = _shape(op.ins[0]), _shape(op.ins[1]), _shape(op.outs[0])
    if not _known(a, b, y):
        return
    if len(a) < 2 or len(b) < 2 or len(y) < 2:
        yield (
            "FAM-25",
            f"{op.opcode} needs operands of rank >= 2, got {list(a)} x {list(b)} -> {list(y)}",
            "gemm is [M,K] x [K,N] -> [M,N]",
        )
        return
    ta, tb = attr_int(op, "trans_a", ev), attr_int(op, "trans_b", ev)
    m, k = (a[-1], a[-2]) if ta else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if tb else (b[-2], b[-1])
    if k != k2:
        yield (
            "FAM-25",
            f"{op.opcode} inner dimensions differ: A is {list(a)}, B is {list(b)}",
            "A's K must equal B's K",
        )
    elif (y[-2], y[-1]) != (m, n):
        yield (
            "FAM-25",
            f"{op.opcode} output is {list(y)} but A x B gives [{m}, {n}]",
            f"declare Y with shape [{m}, {n}]",
        )
    if len(op.ins) > 2:
        c = _shape(op.ins[2])
        if DYNAMIC not in c and c[-1:] != (n,) and tuple(c) != tuple(y):
            yield (
                "FAM-25",
                f"{op.opcode} bias C is {list(c)}, expected [{n}] or {list(y)}",
                "the bias broadcasts along N",
            )


def _conv(op: ComputeOp, ev: Evaluator) -> Iterator[Finding]:
    """NHWC input, HWIO weights (D-CONV-LAYOUT); pads are [top, left, bottom, right]
    for 2-D (begin values then end values, ONNX order, decision D-PADS)."""
    x, w, y = _shape(op.ins[0]), _shape(op.ins[1]), _shape(op.outs[0])
    nsp = op.SPEC.spatial_rank
    assert nsp is not None  # `_CHECKS` calls this for convolutions only
    rank = nsp + 2
    if not _known(x, w, y):
        return
    for label, s in (("input", x), ("weight", w), ("output", y)):
        if len(s) != rank:
            yield (
                "FAM-24",
                f"{op.opcode} {label} has rank {len(s)}, needs {rank}",
                f"use {rank}-D regions (N, spatial..., C) / (spatial..., Cin, Cout)",
            )
            return
    pads, strides, dil = (attr_ints(op, k, ev) for k in ("pads", "strides", "dilations"))
    groups = attr_int(op, "groups", ev)
    if groups is None or pads is None or strides is None or dil is None:
        return
    if len(pads) != 2 * nsp or len(strides) != nsp or len(dil) != nsp:
        yield (
            "FAM-24",
            f"{op.opcode} needs {2 * nsp} pads, {nsp} strides, {nsp} dilations",
            "fix the attribute lengths",
        )
        return
    out = [x[0]]
    for i in range(nsp):
        k_eff = dil[i] * (w[i] - 1) + 1
        span = x[1 + i] + pads[i] + pads[nsp + i] - k_eff
        if strides[i] <= 0 or span < 0:
            yield ("FAM-24", f"{op.opcode} window does not fit the input", "check pads/strides")
            return
        out.append(span // strides[i] + 1)
    cout = w[-1] * (x[-1] if op.opcode == "depthwise_conv2d" else 1)
    out.append(cout)
    if (
        x[-1] != w[-2] * (groups if op.opcode != "depthwise_conv2d" else 1)
        and op.opcode != "depthwise_conv2d"
    ):
        yield (
            "FAM-24",
            f"{op.opcode} input has {x[-1]} channels but the weight expects "
            f"{w[-2]} x groups={groups}",
            "match Cin between X and W",
        )
        return
    if list(y) != out:
        yield (
            "FAM-24",
            f"{op.opcode} output shape is {list(y)} but input {list(x)}, kernel "
            f"{list(w)}, pads={pads}, strides={strides}, dilations={dil} give {out}",
            f"declare the output as shape={out} or change pads",
        )
        return
    if len(op.ins) > 2:  # D-CONV-BIAS: per output channel, or an accumulator of Y's shape
        c = _shape(op.ins[2])
        if DYNAMIC not in c and list(c) != [cout] and list(c) != out:
            yield (
                "FAM-24",
                f"{op.opcode} bias B is {list(c)}, expected [{cout}] or {out}",
                "the bias is one value per output channel, or the output's shape",
            )


def _pool(op: ComputeOp, ev: Evaluator) -> Iterator[Finding]:
    x, y = _shape(op.ins[0]), _shape(op.outs[0])
    ks, pads, strides = (attr_ints(op, k, ev) for k in ("kernel_shape", "pads", "strides"))
    if not _known(x, y) or ks is None or pads is None or strides is None:
        return
    nsp = len(ks)
    if len(x) != nsp + 2 or len(y) != nsp + 2 or len(pads) != 2 * nsp or len(strides) != nsp:
        yield (
            "FAM-23",
            f"{op.opcode}: rank {len(x)} input with kernel_shape {ks}, pads {pads}, "
            f"strides {strides}",
            "NHWC regions with 2 spatial dims, 4 pads, 2 strides",
        )
        return
    out = [x[0]]
    for i in range(nsp):
        span = x[1 + i] + pads[i] + pads[nsp + i] - ks[i]
        if strides[i] <= 0 or ks[i] <= 0 or span < 0:
            yield (
                "FAM-23",
                f"{op.opcode} window does not fit the input: kernel_shape {ks}, "
                f"pads {pads}, strides {strides} on input {list(x)}",
                "use positive kernel sizes and strides, and a kernel no larger than the "
                "padded input",
            )
            return
        out.append(span // strides[i] + 1)
    out.append(x[-1])
    if list(y) != out:
        yield (
            "FAM-23",
            f"{op.opcode} output shape is {list(y)} but the pooling attributes give {out}",
            f"declare the output as shape={out}",
        )


def _view(op: ComputeOp, ev: Evaluator) -> Iterator[Finding]:
    if op.opcode == "reshape":
        x, y = _shape(op.ins[0]), _shape(op.outs[0])
        if _known(x, y) and math.prod(x) != math.prod(y):
            yield (
                "FAM-16",
                f"reshape changes the element count: {list(x)} ({math.prod(x)}) -> "
                f"{list(y)} ({math.prod(y)})",
                "keep the element count",
            )
    elif op.opcode == "transpose":
        x, y, perm = _shape(op.ins[0]), _shape(op.outs[0]), attr_ints(op, "perm", ev)
        if _known(x, y) and perm:
            if sorted(perm) != list(range(len(x))):
                yield (
                    "FAM-15",
                    f"transpose perm {perm} is not a permutation of rank {len(x)}",
                    "list every axis once",
                )
            elif list(y) != [x[p] for p in perm]:
                yield (
                    "FAM-15",
                    f"transpose output {list(y)} != {[x[p] for p in perm]}",
                    "declare the permuted shape",
                )


def _reduce(op: ComputeOp, ev: Evaluator) -> Iterator[Finding]:
    x, y = _shape(op.ins[0]), _shape(op.outs[0])
    if "axes" in op.SPEC.attributes:
        axes = attr_ints(op, "axes", ev)
    else:
        axis = attr_int(op, "axis", ev)
        axes = None if axis is None else [axis]
    keep = attr_int(op, "keepdims", ev)
    if not _known(x, y) or axes is None or keep is None:
        return
    if any(not 0 <= a < len(x) for a in axes):
        yield ("FAM-26", f"{op.opcode} axes {axes} out of range for rank {len(x)}", "fix axes")
        return
    want = (
        [1 if i in axes else d for i, d in enumerate(x)]
        if keep
        else [d for i, d in enumerate(x) if i not in axes]
    )
    if list(y) != want and not (not want and list(y) == [1]):
        yield (
            "FAM-26",
            f"{op.opcode} output shape {list(y)} but axes={axes}, keepdims={keep} give {want}",
            f"declare the output as shape={want or [1]}",
        )


_CHECKS: dict[str, Callable[[ComputeOp, Evaluator], Iterator[Finding]]] = {
    "elementwise": _same_shapes,
    "softmax": _same_shapes,
    "normalization": _same_shapes,
    "linear_algebra": _linear,
    "convolution": _conv,
    "pooling": _pool,
    "view": _view,
    "reduction": _reduce,
}
