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
"""

from __future__ import annotations

import math
from collections.abc import Callable

from graph_gen import Builder, Skip, Val

OPS: dict[str, Callable[[Builder], None]] = {}
WEIGHTS: dict[str, float] = {
    "Identity": 0.3, "Dropout": 0.3, "Neg": 0.5, "Erf": 0.5, "GlobalMaxPool": 0.6,
    "GlobalAveragePool": 0.6, "Conv": 3.0, "MaxPool": 1.5, "AveragePool": 1.5,
    "MatMul": 1.5, "Add": 1.5, "Mul": 1.5,
    "Transpose": 1.5, "Slice": 1.5, "Concat": 1.5, "Reshape": 1.2,
}
RARE = 0.04
"""Probability of a legal form the importer is known not to take."""
UNFUZZED = frozenset({
    "Cast", "ConcatFromSequence", "ConstantOfShape", "ConvTranspose", "Elu", "Expand", "Gather",
    "HardSigmoid", "HardSwish", "InstanceNormalization", "LRN", "Log", "LogSoftmax", "Mean",
    "PRelu", "Pad", "Reciprocal", "Selu", "SequenceAt", "SequenceConstruct", "SequenceEmpty",
    "SequenceErase", "SequenceInsert", "SequenceLength", "Shape", "Shrink", "Sign", "Size",
    "Softplus", "Softsign", "SplitToSequence", "Squeeze", "Sum", "Tile", "Unsqueeze"})
"""Op types the importer converts (issue 32's front end) that have no entry
yet: the campaign does not draw them (their op tests compare each with
onnxruntime, test_onnx_ops.py); an entry moves its op out of this set."""


def op(name: str) -> Callable[[Callable[[Builder], None]], Callable[[Builder], None]]:
    def register(fn: Callable[[Builder], None]) -> Callable[[Builder], None]:
        OPS[name] = fn
        return fn
    return register


# ---------------------------------------------------------------------------
# helpers


def nchw(b: Builder) -> tuple[int, ...]:
    """A new NCHW activation shape: small channels, odd spatial sizes."""
    return (b.rng.choice((1, 2, 3)), b.size(1, 8), b.size(1, 13), b.size(1, 13))


def partner_shape(b: Builder, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with `shape` (ONNX multidirectional rules)."""
    r = b.rng.random()
    if r < 0.3 or not shape:
        return shape
    if r < 0.45:
        return ()
    if r < 0.65:                                   # drop leading dimensions
        return shape[b.rng.randint(1, len(shape)):]
    dims = list(shape)
    for k in range(len(dims)):                     # some dimensions 1
        if b.rng.random() < 0.5:
            dims[k] = 1
    if r > 0.9:                                    # the other way: a 1 grows
        dims = [b.size(2, 5) if s == 1 and b.rng.random() < 0.5 else d
                for s, d in zip(shape, dims)]
    return tuple(dims)


def broadcasts(a: tuple[int, ...], c: tuple[int, ...]) -> bool:
    for x, y in zip(reversed(a), reversed(c)):
        if x != y and 1 not in (x, y):
            return False
    return True


def operand_like(b: Builder, shape: tuple[int, ...], pos: bool = False) -> Val:
    """A second operand of `shape`: an existing value, a new input, an
    initializer or a Constant node."""
    r = b.rng.random()
    if r < 0.4:
        try:
            return b.pick(lambda v: v.shape == shape and (v.pos or not pos))
        except Skip:
            pass
    if r < 0.55:
        return b.new_input(shape, pos)
    if not shape and r < 0.75:
        return b.scalar(b.rng.uniform(0.5, 2.0) if pos else b.rng.choice((-1.5, 0.25, 3.0)))
    return b.weight(shape, pos=pos, as_node=r > 0.9)


def axis(b: Builder, rank: int, inclusive: bool = False) -> int:
    """An axis in [-rank, rank) (or [-rank, rank] with `inclusive`), spelled
    negative half of the time."""
    a = b.rng.randrange(rank + (1 if inclusive else 0))
    return a - rank if b.rng.random() < 0.4 and a < rank else a


def window(b: Builder, size: int, kmax: int) -> tuple[int, int, int, int]:
    """(kernel, stride, dilation, pad_begin, ...) for one spatial axis: a
    kernel that fits the padded input."""
    k = b.rng.randint(1, max(1, min(kmax, size + 2)))
    return k, b.rng.choice((1, 1, 2, 3)), b.rng.choice((1, 1, 1, 2)), b.rng.randint(0, k - 1)


# ---------------------------------------------------------------------------
# elementwise


def _unary(name: str, pos_out: Callable[[Val], bool], need_pos: bool = False,
           **attrs: Callable[[Builder], object]) -> None:
    @op(name)
    def entry(b: Builder) -> None:
        x = b.pick_or_new(lambda v: v.pos or not need_pos, b.shape, pos=need_pos)
        given = {k: f(b) for k, f in attrs.items()}
        b.add(name, [x.name], pos=pos_out(x), **{k: v for k, v in given.items()
                                                if v is not None})


_unary("Relu", lambda x: x.pos)
_unary("Sigmoid", lambda x: True)
_unary("Tanh", lambda x: False)
_unary("Erf", lambda x: False)
_unary("Exp", lambda x: True)
_unary("Sqrt", lambda x: True, need_pos=True)
_unary("Neg", lambda x: False)
_unary("Abs", lambda x: x.pos)
_unary("Identity", lambda x: x.pos)
_unary("LeakyRelu", lambda x: x.pos,
       alpha=lambda b: b.rng.choice((None, 0.01, 0.1, 0.3, 1.5)))
_unary("Gelu", lambda x: False, approximate=lambda b: b.rng.choice((None, "none", "tanh")))


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
    ins = [[x.name], [x.name, b.scalar(lo).name], [x.name, "", b.scalar(hi).name],
           [x.name, b.scalar(lo).name, b.scalar(hi).name]][b.rng.randrange(4)]
    b.add("Clip", ins)


def _binary(name: str) -> None:
    @op(name)
    def entry(b: Builder) -> None:
        x = b.pick_or_new(lambda v: True, b.shape)
        if b.rng.random() < 0.35:      # two values of the graph that broadcast
            try:
                y = b.pick(lambda v: broadcasts(v.shape, x.shape) and v.name != x.name)
            except Skip:
                y = operand_like(b, partner_shape(b, x.shape))
        else:
            y = operand_like(b, partner_shape(b, x.shape))
        if b.rng.random() < 0.08:
            y = x                      # Add(x, x): one value read twice
        both = x.pos and y.pos
        pos = {"Add": both, "Mul": both, "Max": x.pos or y.pos, "Min": both}.get(name, False)
        a, c = (x, y) if b.rng.random() < 0.7 else (y, x)
        b.add(name, [a.name, c.name], pos=pos)


for _name in ("Add", "Sub", "Mul", "Max", "Min"):
    _binary(_name)


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
        shape = (k,)                                   # matrix-vector
    else:                                              # batched, broadcast batch
        batch = tuple(d if b.rng.random() < 0.7 else 1 for d in a.shape[:-2])
        shape = batch[b.rng.randint(0, len(batch)):] + (k, n)
    if b.rng.random() < 0.65:
        w = b.weight(shape, scale=1 / math.sqrt(k))
    else:
        w = b.pick_or_new(lambda v: v.shape == shape, lambda: shape, p_new=0.5)
    if b.rng.random() < 0.15 and len(shape) == 2 and a.rank == 2 and not w.const:
        a, w = w, a                                    # the weight first
        if w.shape[-1] != a.shape[0]:
            raise Skip
    b.add("MatMul", [a.name, w.name], pos=a.pos and w.pos)


@op("Gemm")
def gemm(b: Builder) -> None:
    a = b.pick_or_new(lambda v: v.rank == 2 and v.shape[1] <= 64,
                      lambda: (b.size(1, 13), b.size(1, 17)))
    trans_a = b.rng.random() < 0.2
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    n = b.size(1, 17)
    trans_b = b.rng.random() < 0.35
    wshape = (n, k) if trans_b else (k, n)
    w = b.weight(wshape, scale=1 / math.sqrt(k)) if b.rng.random() < 0.75 else \
        b.new_input(wshape)
    ins = [a.name, w.name]
    if b.rng.random() < 0.7:
        cshape = b.rng.choice(((), (n,), (1, n), (m, 1), (m, n)))
        ins.append(b.weight(cshape, scale=0.5).name)
    attrs = {k2: v for k2, v in (("transA", int(trans_a)), ("transB", int(trans_b)),
                                 ("alpha", b.rng.choice((None, 1.0, 0.5, -2.0))),
                                 ("beta", b.rng.choice((None, 1.0, 0.25))))
             if v}
    b.add("Gemm", ins, **attrs)


@op("Conv")
def conv(b: Builder) -> None:
    rank = 3 if b.rng.random() < RARE else 4           # 1-D: not supported
    x = b.pick_or_new(lambda v: v.rank == rank and v.shape[1] <= 16,
                      lambda: nchw(b)[:rank])
    c, spatial = x.shape[1], x.shape[2:]
    groups = b.rng.choice([g for g in range(1, c + 1) if c % g == 0]) \
        if b.rng.random() < 0.4 else 1
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
    wshape = (f, c // groups, *kernel)
    w = b.new_input(wshape) if b.rng.random() < RARE else \
        b.weight(wshape, scale=1 / math.sqrt(fan_in))
    ins = [x.name, w.name]
    if b.rng.random() < 0.6:
        ins.append(b.weight((f,), scale=0.5).name)
    b.add("Conv", ins, **attrs)


@op("BatchNormalization")
def batchnorm(b: Builder) -> None:
    x = b.pick_or_new(lambda v: 2 <= v.rank <= 4 and v.size <= 4096, lambda: nchw(b))
    c = x.shape[1]
    params = [b.weight((c,), scale=1.0), b.weight((c,), scale=0.5),
              b.weight((c,), scale=0.5), b.weight((c,), pos=True)]
    eps = b.rng.choice((None, 1e-5, 1e-3))
    b.add("BatchNormalization", [x.name, *(p.name for p in params)],
          **({"epsilon": eps} if eps else {}))


@op("LayerNormalization")
def layernorm(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    a = axis(b, x.rank)
    norm = x.shape[a:] if a >= 0 else x.shape[x.rank + a:]
    ins = [x.name, b.weight(norm, scale=1.0).name]
    if b.rng.random() < 0.6:
        ins.append(b.weight(norm, scale=0.5).name)
    attrs: dict[str, object] = {"axis": a} if a != -1 or b.rng.random() < 0.5 else {}
    if b.rng.random() < 0.3:
        attrs["epsilon"] = 1e-3
    b.add("LayerNormalization", ins, **attrs)


# ---------------------------------------------------------------------------
# windows and reductions


def _pool(name: str) -> None:
    @op(name)
    def entry(b: Builder) -> None:
        rank = 3 if b.rng.random() < RARE else 4       # 1-D: not supported
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


for _name in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"):
    _reduce(_name)


@op("Softmax")
def softmax(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    attrs = {"axis": axis(b, x.rank)} if b.rng.random() < 0.7 else {}
    b.add("Softmax", [x.name], pos=True, **attrs)


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


def factorize(b: Builder, n: int, parts: int) -> list[int]:
    """`n` as a product of `parts` factors in random order."""
    dims = [1] * parts
    m = n
    p = 2
    while m > 1:
        while m % p:
            p += 1
        dims[b.rng.randrange(parts)] *= p
        m //= p
    return dims


@op("Reshape")
def reshape(b: Builder) -> None:
    x = b.pick_or_new(lambda v: True, b.shape)
    dims = factorize(b, x.size, b.rng.randint(1, 4))
    if b.rng.random() < 0.3:
        dims[b.rng.randrange(len(dims))] = -1
    for k in range(min(len(dims), x.rank)):
        if dims[k] == x.shape[k] and b.rng.random() < 0.3:
            dims[k] = 0                                # copy the input's dimension
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
            parts.append(b.pick(lambda v: v.rank == x.rank and v.name != x.name and all(
                d == e for k, (d, e) in enumerate(zip(v.shape, x.shape)) if k != ax)))
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
        step = -1 if a == reverse else b.rng.choice((1, 1, 1, 2, 3))   # -1: not supported
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
            raise Skip                                  # an empty last part
        b.add("Split", [x.name], n_out=n, pos=x.pos, axis=a, num_outputs=n)
