"""The op table of the graph fuzzer: one entry per ONNX op type nem-compile
supports (docs/compile.md "Supported ONNX").

An entry is a function `(Builder) -> None` registered with `@op("Type")`:
it picks its operands among the graph's values (`b.pick`, `b.pick_or_new`)
or makes new ones (graph inputs, weights, Constant nodes, int64 index
operands), chooses attributes across the op's legal ONNX range, and calls
`b.add(...)`, whose shape inference rejects what the op does not accept (a
`Skip`: the generator tries another op).  Output shapes are never computed
here; what an entry encodes is the operand shapes and attribute ranges that
make the node valid and interesting (broadcasting, odd windows, negative
axes, clamped slice bounds, ...).  A few legal forms the importer does not
take are generated on purpose, rarely (`RARE`), so that REJECTED counts per
op say what is missing.  To add an op: write its entry, give it a weight in
`WEIGHTS` if it should be drawn more or less often than 1.

This module holds the compute entries (elementwise, linear, normalizations,
windows, reductions) and the data movement of the first front end;
`graph_ops_data` the shape, index, cast and sequence ops, whose entries
also make and consume values of other types (int64 shapes, sequences);
`graph_ops_logic` the comparisons, logical ops and Where (bools).
`OPS` (from `graph_operands`) is the whole table once this is imported.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import graph_ops_data  # registers the shape, index, cast and sequence entries
import graph_ops_logic  # noqa: F401  registers the comparison, logical and Where entries
import graph_ops_select  # noqa: F401  registers the TopK, GatherElements and Einsum entries
import numpy as np
from graph_gen import Builder, Skip, Val
from graph_operands import (
    OPS,
    RARE,
    axis,
    broadcasts,
    factorize,
    nchw,
    op,
    operand_like,
    partner_shape,
    window,
)
from onnx import numpy_helper

__all__ = ["OPS", "UNFUZZED", "WEIGHTS"]

WEIGHTS: dict[str, float] = {
    "Identity": 0.3,
    "Dropout": 0.3,
    "Neg": 0.5,
    "Erf": 0.5,
    "GlobalMaxPool": 0.6,
    "GlobalAveragePool": 0.6,
    "Conv": 3.0,
    "MaxPool": 1.5,
    "AveragePool": 1.5,
    "MatMul": 1.5,
    "Add": 1.5,
    "Mul": 1.5,
    "Transpose": 1.5,
    "Slice": 1.5,
    "Concat": 1.5,
    "Reshape": 1.2,
    "ConvTranspose": 1.5,
    "Gather": 1.2,
    "Pad": 1.2,
    # a sequence entry adds three or four sequence ops (the others at random)
    **{name: 0.3 for name in graph_ops_data.SEQUENCE_OPS},
}
RUN_TIME = 0.1
"""Probability of a convolution's weights (and, apart, its bias) being a
graph input rather than an initializer."""
UNFUZZED: frozenset[str] = frozenset()
"""Op types the importer converts that have no entry yet (the campaign does
not draw them; a new converter goes here until its entry is written, and
the entry moves its op out of this set)."""


# ---------------------------------------------------------------------------
# elementwise


def _unary(
    name: str,
    pos_out: Callable[[Val], bool],
    need_pos: bool = False,
    **attrs: Callable[[Builder], object],
) -> None:
    @op(name)
    def entry(b: Builder) -> None:
        x = b.pick_or_new(lambda v: v.pos or not need_pos, b.shape, pos=need_pos)
        given = {k: f(b) for k, f in attrs.items()}
        b.add(name, [x.name], pos=pos_out(x), **{k: v for k, v in given.items() if v is not None})


_unary("Relu", lambda x: x.pos)
_unary("Sigmoid", lambda x: True)
_unary("Tanh", lambda x: False)
_unary("Erf", lambda x: False)
_unary("Exp", lambda x: True)
_unary("Sqrt", lambda x: True, need_pos=True)
_unary("Neg", lambda x: False)
_unary("Abs", lambda x: x.pos)
_unary("Identity", lambda x: x.pos)
_unary("LeakyRelu", lambda x: x.pos, alpha=lambda b: b.rng.choice((None, 0.01, 0.1, 0.3, 1.5)))
_unary("Gelu", lambda x: False, approximate=lambda b: b.rng.choice((None, "none", "tanh")))
_unary("Log", lambda x: False, need_pos=True)
_unary("Reciprocal", lambda x: True, need_pos=True)
_unary("Softplus", lambda x: x.pos)  # of a positive x, >= log 2: relative accuracy kept
_unary("Softsign", lambda x: x.pos)
_unary("HardSwish", lambda x: False)
_unary(
    "HardSigmoid",
    lambda x: False,
    alpha=lambda b: b.rng.choice((None, 0.2, 0.5, 1.0)),
    beta=lambda b: b.rng.choice((None, 0.5, 0.25, -0.5)),
)
_unary("Elu", lambda x: x.pos, alpha=lambda b: b.rng.choice((None, 0.5, 1.0, 2.0)))
_unary(
    "Selu",
    lambda x: x.pos,
    alpha=lambda b: b.rng.choice((None, 1.0, 1.5)),
    gamma=lambda b: b.rng.choice((None, 1.0, 2.0)),
)


def _exact_unary(name: str, **attrs: Callable[[Builder], object]) -> None:
    """A unary op that is discontinuous (a jump at 0 or at +-lambd): its
    operand is a graph input, which both sides read bit for bit, so that a
    rounding difference upstream cannot flip a comparison."""

    @op(name)
    def entry(b: Builder) -> None:
        x = b.pick_input(b.shape)
        given = {k: f(b) for k, f in attrs.items()}
        b.add(name, [x.name], **{k: v for k, v in given.items() if v is not None})


_exact_unary("Sign")
# steps at every integer (Round's at every half): as Sign, of a graph input
_exact_unary("Floor")
_exact_unary("Ceil")
_exact_unary("Round")
_exact_unary(
    "Shrink",
    bias=lambda b: b.rng.choice((None, 0.0, 0.5, -1.0)),
    lambd=lambda b: b.rng.choice((None, 0.25, 0.5, 1.0, 1.5)),
)
_exact_unary("ThresholdedRelu", alpha=lambda b: b.rng.choice((None, 0.0, 0.5, -0.25)))


@op("Dropout")
def dropout(b: Builder) -> None:
    x = b.pick_or_new(lambda v: True, b.shape)
    ins = [x.name]
    if b.rng.random() < 0.3:
        ins.append(b.scalar(b.rng.choice((0.1, 0.5)), as_node=False).name)
    b.add("Dropout", ins, pos=x.pos)


@op("Clip")
def clip(b: Builder) -> None:
    x = b.pick_or_new(lambda v: True, b.shape)
    lo, hi = sorted(b.rng.uniform(-1.5, 1.5) for _ in range(2))
    ins = [
        [x.name],
        [x.name, b.scalar(lo).name],
        [x.name, "", b.scalar(hi).name],
        [x.name, b.scalar(lo).name, b.scalar(hi).name],
    ][b.rng.randrange(4)]
    b.add("Clip", ins)


def _binary(name: str) -> None:
    @op(name)
    def entry(b: Builder) -> None:
        x = b.pick_or_new(lambda v: True, b.shape)
        if b.rng.random() < 0.35:  # two values of the graph that broadcast
            try:
                y = b.pick(lambda v: broadcasts(v.shape, x.shape) and v.name != x.name)
            except Skip:
                y = operand_like(b, partner_shape(b, x.shape))
        else:
            y = operand_like(b, partner_shape(b, x.shape))
        if b.rng.random() < 0.08:
            y = x  # Add(x, x): one value read twice
        both = x.pos and y.pos
        pos = {"Add": both, "Mul": both, "Max": x.pos or y.pos, "Min": both}.get(name, False)
        a, c = (x, y) if b.rng.random() < 0.7 else (y, x)
        b.add(name, [a.name, c.name], pos=pos)


for _name in ("Add", "Sub", "Mul", "Max", "Min"):
    _binary(_name)


def _variadic(name: str) -> None:
    """Sum, Mean: one to four operands broadcasting together."""

    @op(name)
    def entry(b: Builder) -> None:
        x = b.pick_or_new(lambda v: True, b.shape)
        parts = [x]
        for _ in range(b.rng.choice((0, 1, 1, 2, 3))):
            r = b.rng.random()
            if r < 0.1:
                parts.append(x)
                continue
            if r < 0.4:
                try:
                    parts.append(
                        b.pick(lambda v: broadcasts(v.shape, x.shape) and v.name != x.name)
                    )
                    continue
                except Skip:
                    pass
            parts.append(operand_like(b, partner_shape(b, x.shape)))
        b.rng.shuffle(parts)
        if all(p.const for p in parts):
            raise Skip
        b.add(name, [p.name for p in parts], pos=all(p.pos for p in parts))


_variadic("Sum")
_variadic("Mean")


@op("PRelu")
def prelu(b: Builder) -> None:
    """The slope broadcasts to x one way: per channel [C,1,..], a scalar, or
    a suffix of x's shape with some dimensions 1."""
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    r = b.rng.random()
    if r < 0.35 and x.rank >= 2:
        shape = (x.shape[1],) + (1,) * (x.rank - 2)
    elif r < 0.5:
        shape = b.rng.choice(((), (1,)))
    else:
        shape = tuple(
            d if b.rng.random() < 0.6 else 1 for d in x.shape[b.rng.randint(0, x.rank - 1) :]
        )
    slope = b.weight(shape, scale=0.5) if b.rng.random() < 0.75 else operand_like(b, shape)
    b.add("PRelu", [x.name, slope.name], pos=x.pos)


@op("Div")
def div(b: Builder) -> None:
    x = b.pick_or_new(lambda v: True, b.shape)
    if b.rng.random() < 0.5:
        try:
            y = b.pick(lambda v: v.pos and broadcasts(v.shape, x.shape) and v.name != x.name)
        except Skip:
            y = operand_like(b, partner_shape(b, x.shape), pos=True)
    else:
        y = operand_like(b, partner_shape(b, x.shape), pos=True)
    b.add("Div", [x.name, y.name], pos=x.pos)


@op("Pow")
def pow_(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.pos, b.shape, pos=True)
    if b.rng.random() < 0.7:
        e = b.scalar(b.rng.choice((2.0, 3.0, 0.5, -1.0, 1.5)))
    else:
        e = operand_like(b, partner_shape(b, x.shape), pos=True)
    b.add("Pow", [x.name, e.name], pos=True)


# ---------------------------------------------------------------------------
# linear


@op("MatMul")
def matmul(b: Builder) -> None:
    a = b.pick_or_new(lambda v: 1 <= v.rank <= 4 and v.shape[-1] <= 64, b.shape)
    k = a.shape[-1]
    n = b.size(1, 17)
    r = b.rng.random()
    if a.rank == 1 or r < 0.55:
        shape: tuple[int, ...] = (k, n)
    elif r < 0.7:
        shape = (k,)  # matrix-vector
    else:  # batched, broadcast batch
        batch = tuple(d if b.rng.random() < 0.7 else 1 for d in a.shape[:-2])
        shape = batch[b.rng.randint(0, len(batch)) :] + (k, n)
    if b.rng.random() < 0.65:
        w = b.weight(shape, scale=1 / math.sqrt(k))
    else:
        w = b.pick_or_new(lambda v: v.shape == shape, lambda: shape, p_new=0.5)
    if b.rng.random() < 0.15 and len(shape) == 2 and a.rank == 2 and not w.const:
        a, w = w, a  # the weight first
        if w.shape[-1] != a.shape[0]:
            raise Skip
    b.add("MatMul", [a.name, w.name], pos=a.pos and w.pos)


@op("Gemm")
def gemm(b: Builder) -> None:
    a = b.pick_or_new(
        lambda v: v.rank == 2 and v.shape[1] <= 64, lambda: (b.size(1, 13), b.size(1, 17))
    )
    trans_a = b.rng.random() < 0.2
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    n = b.size(1, 17)
    trans_b = b.rng.random() < 0.35
    wshape = (n, k) if trans_b else (k, n)
    w = b.weight(wshape, scale=1 / math.sqrt(k)) if b.rng.random() < 0.75 else b.new_input(wshape)
    ins = [a.name, w.name]
    if b.rng.random() < 0.7:
        cshape = b.rng.choice(((), (n,), (1, n), (m, 1), (m, n)))
        ins.append(b.weight(cshape, scale=0.5).name)
    attrs = {
        k2: v
        for k2, v in (
            ("transA", int(trans_a)),
            ("transB", int(trans_b)),
            ("alpha", b.rng.choice((None, 1.0, 0.5, -2.0))),
            ("beta", b.rng.choice((None, 1.0, 0.25))),
        )
        if v
    }
    b.add("Gemm", ins, **attrs)


@op("Conv")
def conv(b: Builder) -> None:
    r = b.rng.random()
    rank = 3 if r < 0.04 else 5 if r < 0.08 else 4  # 1-D and 3-D: rarer
    x = b.pick_or_new(
        lambda v: v.rank == rank and v.shape[1] <= 16 and (rank < 5 or v.size <= 1024),
        lambda: (nchw(b) + (b.size(1, 3),))[:rank] if rank == 5 else nchw(b)[:rank],
    )
    c, spatial = x.shape[1], x.shape[2:]
    groups = b.rng.choice([g for g in range(1, c + 1) if c % g == 0]) if b.rng.random() < 0.4 else 1
    f = groups * b.rng.randint(1, max(1, 8 // groups))
    wins = [window(b, s, 5) for s in spatial]
    kernel = [w[0] for w in wins]
    attrs: dict[str, object] = {"kernel_shape": kernel}
    if b.rng.random() < 0.6:
        attrs["strides"] = [w[1] for w in wins]
    if b.rng.random() < 0.3:
        attrs["dilations"] = [w[2] for w in wins]
    if b.rng.random() < 0.15:
        attrs["auto_pad"] = b.rng.choice(("SAME_UPPER", "SAME_LOWER", "VALID"))
    elif b.rng.random() < 0.6:
        attrs["pads"] = [w[3] for w in wins] + [b.rng.randint(0, k - 1) for k in kernel]
    if groups > 1:
        attrs["group"] = groups
    fan_in = c // groups * math.prod(kernel)
    b.add("Conv", kernel_operands(b, x, (f, c // groups, *kernel), fan_in, f), **attrs)


def kernel_operands(
    b: Builder, x: Val, wshape: tuple[int, ...], fan_in: int, channels: int
) -> list[str]:
    """A convolution's operands: x, the weights (scaled by 1/sqrt(fan-in);
    sometimes a graph input: computed at run time) and, often, a bias (the
    same, as often)."""
    w = (
        b.new_input(wshape)
        if b.rng.random() < RUN_TIME
        else b.weight(wshape, scale=1 / math.sqrt(fan_in))
    )
    ins = [x.name, w.name]
    r = b.rng.random()
    if r < 0.6:
        ins.append(
            (
                b.new_input((channels,)) if r < 0.6 * RUN_TIME else b.weight((channels,), scale=0.5)
            ).name
        )
    return ins


@op("BatchNormalization")
def batchnorm(b: Builder) -> None:
    x = b.pick_or_new(lambda v: 2 <= v.rank <= 4 and v.size <= 4096, lambda: nchw(b))
    c = x.shape[1]
    params = [
        b.weight((c,), scale=1.0),
        b.weight((c,), scale=0.5),
        b.weight((c,), scale=0.5),
        b.weight((c,), pos=True),
    ]
    eps = b.rng.choice((None, 1e-5, 1e-3))
    b.add(
        "BatchNormalization",
        [x.name, *(p.name for p in params)],
        **({"epsilon": eps} if eps else {}),
    )


@op("LayerNormalization")
def layernorm(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    a = axis(b, x.rank)
    norm = x.shape[a:] if a >= 0 else x.shape[x.rank + a :]
    ins = [x.name, b.weight(norm, scale=1.0).name]
    if b.rng.random() < 0.6:
        ins.append(b.weight(norm, scale=0.5).name)
    attrs: dict[str, object] = {"axis": a} if a != -1 or b.rng.random() < 0.5 else {}
    if b.rng.random() < 0.3:
        attrs["epsilon"] = 1e-3
    b.add("LayerNormalization", ins, **attrs)


@op("ConvTranspose")
def conv_transpose(b: Builder) -> None:
    """1-D, 2-D and 3-D: groups, strides, dilations, pads, output_padding,
    output_shape or auto_pad, bias."""
    r = b.rng.random()
    rank = 5 if r < 0.1 else 3 if r < 0.3 else 4
    x = b.pick_or_new(
        lambda v: v.rank == rank and v.shape[1] <= 16 and v.size <= 1024,
        lambda: (nchw(b) + (b.size(1, 3),))[:rank],
    )
    c, spatial = x.shape[1], x.shape[2:]
    groups = b.rng.choice([g for g in range(1, c + 1) if c % g == 0]) if b.rng.random() < 0.3 else 1
    m = groups * b.rng.randint(1, max(1, 6 // groups))
    kernel = [b.rng.randint(1, 4) for _ in spatial]
    strides = [b.rng.choice((1, 1, 2, 3)) for _ in spatial]
    dil = [b.rng.choice((1, 1, 1, 2)) for _ in spatial]
    attrs: dict[str, object] = {"kernel_shape": kernel}
    if any(s > 1 for s in strides) or b.rng.random() < 0.3:
        attrs["strides"] = strides
    if any(d > 1 for d in dil):
        attrs["dilations"] = dil
    q = b.rng.random()
    if q < 0.1:
        attrs["auto_pad"] = b.rng.choice(("SAME_UPPER", "SAME_LOWER", "VALID"))
    elif q < 0.2:  # output_shape: the pads follow (as SAME_UPPER places them)
        full = [s * (n - 1) + (k - 1) * d + 1 for s, n, k, d in zip(strides, spatial, kernel, dil)]
        attrs["output_shape"] = [
            max(1, f - b.rng.randint(0, (k - 1) * d)) for f, k, d in zip(full, kernel, dil)
        ]
    else:
        if b.rng.random() < 0.6:
            attrs["pads"] = [b.rng.randint(0, (k - 1) * d) for k, d in zip(kernel, dil)] + [
                b.rng.randint(0, (k - 1) * d) for k, d in zip(kernel, dil)
            ]
        if b.rng.random() < 0.3:
            attrs["output_padding"] = [
                b.rng.randint(0, max(s, d) - 1) for s, d in zip(strides, dil)
            ]
    if groups > 1:
        attrs["group"] = groups
    b.add(
        "ConvTranspose",
        kernel_operands(b, x, (c, m // groups, *kernel), c // groups * math.prod(kernel), m),
        **attrs,
    )


@op("InstanceNormalization")
def instancenorm(b: Builder) -> None:
    """Over at least 4 spatial elements: over one (a constant row), exact
    arithmetic gives the bias, which the program computes, while
    onnxruntime's result is 9.7e-5 off it (f32, scale 1.5: a rounding of
    x - mean times 1/sqrt(eps); campaign seed 3333, m9): the reference, not
    the program, would be wrong."""
    x = b.pick_or_new(
        lambda v: 3 <= v.rank <= 4 and math.prod(v.shape[2:]) >= 4,
        lambda: nchw(b)[: b.rng.choice((3, 4))],
    )
    if math.prod(x.shape[2:]) < 4:
        raise Skip
    c = x.shape[1]
    eps = b.rng.choice((None, 1e-5, 1e-3))
    b.add(
        "InstanceNormalization",
        [x.name, b.weight((c,), scale=1.0).name, b.weight((c,), scale=0.5).name],
        **({"epsilon": eps} if eps else {}),
    )


@op("LRN")
def lrn(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.rank == 4, lambda: nchw(b))
    attrs = {
        k: v
        for k, v in (
            ("alpha", b.rng.choice((None, 1e-3, 0.1, 1.0))),
            ("beta", b.rng.choice((None, 0.5, 1.0))),
            ("bias", b.rng.choice((None, 2.0, 0.5))),
        )
        if v is not None
    }
    b.add("LRN", [x.name], pos=x.pos, size=b.rng.choice((1, 3, 5)), **attrs)


# ---------------------------------------------------------------------------
# windows and reductions


def _pool(name: str) -> None:
    @op(name)
    def entry(b: Builder) -> None:
        rank = 3 if b.rng.random() < RARE else 4  # 1-D: not supported
        x = b.pick_or_new(lambda v: v.rank == rank, lambda: nchw(b)[:rank])
        wins = [window(b, s, 4) for s in x.shape[2:]]
        kernel = [w[0] for w in wins]
        attrs: dict[str, object] = {"kernel_shape": kernel}
        if b.rng.random() < 0.7:
            attrs["strides"] = [w[1] for w in wins]
        if name == "MaxPool" and b.rng.random() < 0.3:
            attrs["dilations"] = [w[2] for w in wins]
        if b.rng.random() < 0.1:
            attrs["auto_pad"] = b.rng.choice(("SAME_UPPER", "SAME_LOWER", "VALID"))
        elif b.rng.random() < 0.5:
            attrs["pads"] = [w[3] for w in wins] + [b.rng.randint(0, k - 1) for k in kernel]
        if b.rng.random() < 0.2:
            attrs["ceil_mode"] = 1
        if name == "AveragePool" and b.rng.random() < 0.3:
            attrs["count_include_pad"] = 1
        b.add(name, [x.name], pos=x.pos, **attrs)


_pool("MaxPool")
_pool("AveragePool")


def _global_pool(name: str) -> None:
    @op(name)
    def entry(b: Builder) -> None:
        rank = 3 if b.rng.random() < RARE else 4
        x = b.pick_or_new(lambda v: v.rank == rank, lambda: nchw(b)[:rank])
        b.add(name, [x.name], pos=x.pos)


_global_pool("GlobalAveragePool")
_global_pool("GlobalMaxPool")


def _reduce(name: str) -> None:
    @op(name)
    def entry(b: Builder) -> None:
        x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
        attrs: dict[str, object] = {}
        if b.rng.random() < 0.5:
            attrs["keepdims"] = b.rng.randint(0, 1)
        ins = [x.name]
        if b.rng.random() < 0.85:
            chosen = b.rng.sample(range(x.rank), b.rng.randint(1, x.rank))
            ins.append(b.ints([a - x.rank if b.rng.random() < 0.3 else a for a in chosen]))
        elif b.rng.random() < 0.3:
            attrs["noop_with_empty_axes"] = 1
        b.add(name, ins, pos=x.pos, **attrs)


for _name in (
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceSumSquare",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",  # (a negative sum: NaN, where onnxruntime's is too)
    "ReduceLogSumExp",
):
    _reduce(_name)


def _arg_extreme(name: str) -> None:
    @op(name)
    def entry(b: Builder) -> None:
        """On a graph input (read by both sides bit for bit: a value one ulp
        apart upstream could move the extreme), its index cast back to the
        model's float type."""
        x = b.pick_input(b.shape)
        if x.rank == 0:
            raise Skip  # ONNX's ArgMax takes rank >= 1
        attrs: dict[str, object] = {"axis": axis(b, x.rank)}
        if b.rng.random() < 0.5:
            attrs["keepdims"] = b.rng.randint(0, 1)
        if b.rng.random() < 0.3:
            attrs["select_last_index"] = 1
        (k,) = b.add(name, [x.name], **attrs)
        b.add("Cast", [k.name], to=b.elem)


for _name in ("ArgMax", "ArgMin"):
    _arg_extreme(_name)


@op("CumSum")
def cumsum(b: Builder) -> None:
    """Along one axis (a scalar constant), forward or reverse, inclusive or
    exclusive."""
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    k = b.fresh("axis")
    b.inits.append(numpy_helper.from_array(np.array(axis(b, x.rank), np.int64), k))
    b.consts[k] = b.inits[-1]
    attrs = {a: 1 for a in ("exclusive", "reverse") if b.rng.random() < 0.4}
    b.add("CumSum", [x.name, k], **attrs)


def _softmax(name: str, pos: bool) -> None:
    @op(name)
    def entry(b: Builder) -> None:
        x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
        attrs = {"axis": axis(b, x.rank)} if b.rng.random() < 0.7 else {}
        b.add(name, [x.name], pos=pos, **attrs)


_softmax("Softmax", True)
_softmax("LogSoftmax", False)


# ---------------------------------------------------------------------------
# data movement


@op("Transpose")
def transpose(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.rank >= 2, b.shape)
    perm = list(range(x.rank))
    b.rng.shuffle(perm)
    attrs = {"perm": perm} if b.rng.random() < 0.9 else {}
    b.add("Transpose", [x.name], pos=x.pos, **attrs)


@op("Flatten")
def flatten(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    attrs = {"axis": axis(b, x.rank, inclusive=True)} if b.rng.random() < 0.8 else {}
    b.add("Flatten", [x.name], pos=x.pos, **attrs)


@op("Reshape")
def reshape(b: Builder) -> None:
    x = b.pick_or_new(lambda v: True, b.shape)
    dims = factorize(b, x.size, b.rng.randint(1, 4))
    if b.rng.random() < 0.3:
        dims[b.rng.randrange(len(dims))] = -1
    for k in range(min(len(dims), x.rank)):
        if dims[k] == x.shape[k] and b.rng.random() < 0.3:
            dims[k] = 0  # copy the input's dimension
    b.add("Reshape", [x.name, b.ints(dims)], pos=x.pos)


@op("Concat")
def concat(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    a = axis(b, x.rank)
    ax = a % x.rank
    parts = [x]
    for _ in range(b.rng.randint(1, 3)):
        if b.rng.random() < 0.15:
            parts.append(x)
            continue
        try:
            parts.append(
                b.pick(
                    lambda v: (
                        v.rank == x.rank
                        and v.name != x.name
                        and all(d == e for k, (d, e) in enumerate(zip(v.shape, x.shape)) if k != ax)
                    )
                )
            )
        except Skip:
            shape = list(x.shape)
            shape[ax] = b.size(1, 9)
            parts.append(operand_like(b, tuple(shape)))
    b.rng.shuffle(parts)
    if all(p.const for p in parts):
        raise Skip
    b.add("Concat", [p.name for p in parts], pos=all(p.pos for p in parts), axis=a)


@op("Slice")
def slice_(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.rank >= 1 and max(v.shape) > 1, b.shape)
    axes = b.rng.sample(range(x.rank), b.rng.randint(1, x.rank))
    starts, ends, steps = [], [], []
    reverse = b.rng.choice(axes) if b.rng.random() < RARE else None
    for a in axes:
        d = x.shape[a]
        step = -1 if a == reverse else b.rng.choice((1, 1, 1, 2, 3))  # -1: not supported
        lo = b.rng.randint(0, d - 1)
        hi = b.rng.randint(lo + 1, d)
        if step < 0:
            lo, hi = hi - 1, lo - 1 if lo > 0 else -d - 1
        # spell some bounds negative or out of range (ONNX clamps them)
        if b.rng.random() < 0.25:
            lo -= d
        if b.rng.random() < 0.2 and step > 0:
            hi = b.rng.choice((hi - d if hi < d else hi, d + 5, 2**62))
        starts.append(lo)
        ends.append(hi)
        steps.append(step)
    ins = [x.name, b.ints(starts), b.ints(ends)]
    in_order = axes == sorted(axes) and len(axes) == x.rank
    if not in_order or b.rng.random() < 0.7:
        ins.append(b.ints([a - x.rank if b.rng.random() < 0.3 else a for a in axes]))
        if any(s != 1 for s in steps) or b.rng.random() < 0.4:
            ins.append(b.ints(steps))
    elif any(s != 1 for s in steps):
        raise Skip
    b.add("Slice", ins, pos=x.pos)


@op("Split")
def split(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.rank >= 1 and max(v.shape) > 1, b.shape)
    if max(x.shape, default=1) <= 1:  # a new input of ones (pick_or_new's shape())
        raise Skip
    ax = b.rng.choice([k for k, d in enumerate(x.shape) if d > 1])
    d = x.shape[ax]
    a = ax - x.rank if b.rng.random() < 0.3 else ax
    if b.rng.random() < 0.5:
        n = b.rng.randint(2, min(4, d))
        cuts = sorted(b.rng.sample(range(1, d), n - 1))
        sizes = [e - s for s, e in zip([0, *cuts], [*cuts, d])]
        b.add("Split", [x.name, b.ints(sizes)], n_out=n, pos=x.pos, axis=a)
    else:
        n = b.rng.randint(2, min(4, d))
        if -(-d // n) * (n - 1) >= d:
            raise Skip  # an empty last part
        b.add("Split", [x.name], n_out=n, pos=x.pos, axis=a, num_outputs=n)
