"""The graph fuzzer's entries for the ops that move, index, reshape or
retype data, and for sequences (docs/compile.md "Supported ONNX": Cast,
ConstantOfShape, Expand, Gather, Pad, Shape, Size, Squeeze, Unsqueeze,
Tile, DepthToSpace, SpaceToDepth, Sequence*, SplitToSequence,
ConcatFromSequence).

An entry that makes a value the model's float values are not (an int64
shape or index, a tensor of the other float precision, a sequence) also
consumes it (`Builder.other`): a Shape's output becomes a Reshape's or an
Expand's shape, a sequence is read back by SequenceAt, ConcatFromSequence
or SequenceLength.  The importer folds most of these at compile time
(D-COMPILE-SIMPLIFY, D-COMPILE-SEQ): what is tested is that what it folds
and what it converts computes what onnxruntime does.
"""

from __future__ import annotations

import numpy as np
from graph_gen import Builder, Skip, Val
from graph_operands import RARE, axis, broadcasts, nchw, op, partner_shape
from onnx import TensorProto, numpy_helper


def shape_of(b: Builder, x: Val, start: int | None = None, end: int | None = None) -> str:
    """A Shape node of `x` (its `start`/`end` slice), its value known to
    shape inference."""
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    (s,) = b.add("Shape", [x.name], **attrs)
    b.known(s.name, list(x.shape)[slice(start, end)])
    return s.name


def other_float(b: Builder) -> int:
    return TensorProto.FLOAT16 if b.elem == TensorProto.FLOAT else TensorProto.FLOAT


def constant(v: Val) -> Val:
    """`v`, a value computed from constants and shapes only (folded at
    compile time): never another op's only operand nor a graph output."""
    v.const = True
    return v


def combine(b: Builder, x: Val, c: Val) -> None:
    """An elementwise op of `x` and a value made from constants (`c`), in
    either order."""
    name = b.rng.choice(("Add", "Mul", "Sub", "Max"))
    a, d = (x, c) if b.rng.random() < 0.6 else (c, x)
    b.add(name, [a.name, d.name])


# ---------------------------------------------------------------------------
# types and shapes


@op("Cast")
def cast(b: Builder) -> None:
    """Through the other float precision and back, to an integer (truncation)
    and back, an integer constant to float, or to its own type.  What is
    rounded or truncated is a graph input (read bit for bit): a value one ulp
    apart upstream could round to another f16 or integer."""
    r = b.rng.random()
    if r < 0.35:
        x = (
            b.pick_input(b.shape)
            if b.elem == TensorProto.FLOAT
            else b.pick_or_new(lambda v: True, b.shape)
        )
        (m,) = b.add("Cast", [x.name], to=other_float(b))
        b.add("Cast", [m.name], pos=x.pos, to=b.elem)
    elif r < 0.6:
        x = b.pick_input(b.shape)
        (m,) = b.add("Cast", [x.name], to=b.rng.choice((TensorProto.INT32, TensorProto.INT64)))
        b.add("Cast", [m.name], to=b.elem)
    elif r < 0.8:
        x = b.pick_or_new(lambda v: True, b.shape)
        arr = np.random.default_rng(b.rng.getrandbits(32)).integers(
            -3, 4, partner_shape(b, x.shape), dtype=np.int64
        )
        k = b.fresh("k")
        b.inits.append(numpy_helper.from_array(arr, k))
        b.consts[k] = b.inits[-1]
        combine(b, x, constant(b.add("Cast", [k], to=b.elem)[0]))
    else:
        x = b.pick_or_new(lambda v: True, b.shape)
        b.add("Cast", [x.name], pos=x.pos, to=b.elem)


@op("Shape")
def shape(b: Builder) -> None:
    """Reshape x to the shape of another value of its size, or Expand x to
    (a slice of) a shape it broadcasts with; else Reshape x to its own."""
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    r = b.rng.random()
    if r < 0.5:
        try:
            y = b.pick(lambda v: v.size == x.size and v.shape != x.shape)
            b.add("Reshape", [x.name, shape_of(b, y)], pos=x.pos)
            return
        except Skip:
            pass
    elif r < 0.85:
        try:
            y = b.pick(lambda v: v.rank >= 1 and v.name != x.name)
        except Skip:
            y = x
        start = b.rng.randint(0, y.rank - 1)
        end = b.rng.choice((None, y.rank, -1 if start < y.rank - 1 else None))
        target = list(y.shape)[slice(start, end)]
        if not broadcasts(x.shape, tuple(target)):
            raise Skip
        spelled = start - y.rank if start and b.rng.random() < 0.3 else start
        b.add("Expand", [x.name, shape_of(b, y, spelled or None, end)], pos=x.pos)
        return
    b.add("Reshape", [x.name, shape_of(b, x)], pos=x.pos)


@op("Size")
def size(b: Builder) -> None:
    """Flatten x by Reshape(x, Unsqueeze(Size(x))), or divide by the size of
    a value."""
    x = b.pick_or_new(lambda v: True, b.shape)
    if b.rng.random() < 0.5:
        (n,) = b.add("Size", [x.name])
        b.known(n.name, x.size)
        (s,) = b.add("Unsqueeze", [n.name, b.ints([0])])
        b.known(s.name, [x.size])
        b.add("Reshape", [x.name, s.name], pos=x.pos)
        return
    y = b.pick_or_new(lambda v: True, b.shape)
    (n,) = b.add("Size", [y.name])
    b.known(n.name, y.size)
    f = constant(b.add("Cast", [n.name], pos=True, to=b.elem)[0])
    b.add("Div", [x.name, f.name], pos=x.pos)


@op("ConstantOfShape")
def constant_of_shape(b: Builder) -> None:
    """A splat of a constant shape or of (a suffix of) a value's Shape,
    combined with the value."""
    x = b.pick_or_new(lambda v: True, b.shape)
    if x.rank and b.rng.random() < 0.5:
        dims = shape_of(b, x, b.rng.randint(0, x.rank - 1) or None)
    else:
        dims = b.ints(partner_shape(b, x.shape))
    value = b.rng.choice((None, 0.0, 1.0, -0.5, 2.0))
    if value is None and b.elem != TensorProto.FLOAT:
        value = 0.0  # the default is an f32 zero
    attrs = (
        {}
        if value is None
        else {"value": numpy_helper.from_array(np.asarray([value], dtype=b.np_dtype), "v")}
    )
    combine(b, x, constant(b.add("ConstantOfShape", [dims], **attrs)[0]))


@op("Expand")
def expand(b: Builder) -> None:
    """To a shape where x's 1s grow, x's dimensions are kept or spelled 1,
    and leading dimensions are added."""
    x = b.pick_or_new(lambda v: v.size <= 1024, b.shape)
    dims = [
        b.size(2, 5) if d == 1 and b.rng.random() < 0.5 else d if b.rng.random() < 0.8 else 1
        for d in x.shape
    ]
    dims = [b.size(1, 4) for _ in range(b.rng.choice((0, 0, 1, 2)))] + dims
    b.add("Expand", [x.name, b.ints(dims)], pos=x.pos)


@op("Tile")
def tile(b: Builder) -> None:
    x = b.pick_or_new(lambda v: 1 <= v.rank and v.size <= 1024, b.shape)
    b.add("Tile", [x.name, b.ints([b.rng.choice((1, 1, 2, 3)) for _ in x.shape])], pos=x.pos)


@op("Resize")
def resize(b: Builder) -> None:
    """Nearest upsampling by whole factors (D-COMPILE-RESIZE), given as int64
    `sizes` (float `scales` would be a float value of another type than
    the model's), in the default coordinate mode or asymmetric + floor; or
    on a 4-D value, linear or cubic to any sizes of its last two axes (the
    forms onnxruntime takes), a product per axis with ONNX's weights."""
    weighted = b.rng.random() < 0.4
    if weighted:
        x = b.pick_or_new(lambda v: v.rank == 4 and v.size <= 1024, lambda: nchw(b))
    else:
        x = b.pick_or_new(lambda v: 1 <= v.rank and v.size <= 512, b.shape)
    sizes = [d * b.rng.choice((1, 1, 2, 3)) for d in x.shape]
    modes = {}
    if weighted:
        sizes = [*x.shape[:2], *(b.rng.choice((max(1, d // 2), d + 1, 2 * d)) for d in x.shape[2:])]
        modes = {"mode": b.rng.choice(("linear", "cubic"))}
        if b.rng.random() < 0.3:
            modes["coordinate_transformation_mode"] = "align_corners"
    elif b.rng.random() < 0.3:
        modes = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    b.add("Resize", [x.name, "", "", b.ints(sizes)], pos=x.pos, **modes)


@op("DepthToSpace")
def depth_to_space(b: Builder) -> None:
    """Channels to blocks of pixels, in either mode (D-COMPILE-SHAPES)."""
    k = b.rng.choice((2, 3))
    x = b.pick_or_new(
        lambda v: v.rank == 4 and v.shape[1] % (k * k) == 0 and v.size <= 1024,
        lambda: (1, k * k * b.rng.randint(1, 2), b.rng.randint(1, 4), b.rng.randint(1, 4)),
        p_new=0.3,  # few values have k² channels
    )
    b.add("DepthToSpace", [x.name], pos=x.pos, blocksize=k, mode=b.rng.choice(("DCR", "CRD")))


@op("SpaceToDepth")
def space_to_depth(b: Builder) -> None:
    k = b.rng.choice((2, 3))
    x = b.pick_or_new(
        lambda v: v.rank == 4 and v.shape[2] % k == 0 and v.shape[3] % k == 0 and v.size <= 1024,
        lambda: (1, b.rng.randint(1, 3), k * b.rng.randint(1, 2), k * b.rng.randint(1, 2)),
        p_new=0.3,
    )
    b.add("SpaceToDepth", [x.name], pos=x.pos, blocksize=k)


@op("Squeeze")
def squeeze(b: Builder) -> None:
    x = b.pick_or_new(
        lambda v: 1 in v.shape and v.rank >= 2,
        lambda: tuple(1 if b.rng.random() < 0.4 else d for d in b.shape(b.rng.randint(2, 4))),
    )
    ones = [k for k, d in enumerate(x.shape) if d == 1]
    if not ones:
        raise Skip
    if b.rng.random() < 0.3 and len(ones) < x.rank:
        b.add("Squeeze", [x.name], pos=x.pos)  # every unit dimension
        return
    axes = b.rng.sample(ones, b.rng.randint(1, len(ones)))
    if len(axes) == x.rank:
        raise Skip  # a 0-d result
    b.add(
        "Squeeze",
        [x.name, b.ints([a - x.rank if b.rng.random() < 0.3 else a for a in axes])],
        pos=x.pos,
    )


@op("Unsqueeze")
def unsqueeze(b: Builder) -> None:
    x = b.pick_or_new(lambda v: v.rank <= 4, b.shape)
    k = b.rng.choice((1, 1, 2))
    out = x.rank + k
    axes = b.rng.sample(range(out), k)
    b.add(
        "Unsqueeze",
        [x.name, b.ints([a - out if b.rng.random() < 0.3 else a for a in axes])],
        pos=x.pos,
    )


# ---------------------------------------------------------------------------
# indexing


@op("Gather")
def gather(b: Builder) -> None:
    """Constant indices (a scalar, an arithmetic progression, any with
    repeats and negatives, 1-D or 2-D), or indices computed at run time
    (the truncation of a positive input: 0 or 1)."""
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    a = axis(b, x.rank)
    d = x.shape[a]
    r = b.rng.random()
    if r < 0.15 and d >= 2:
        u = b.new_input(b.rng.choice(((b.size(1, 5),), (2, b.size(1, 3)))), pos=True)
        (idx,) = b.add("Cast", [u.name], to=TensorProto.INT64)
        index = idx.name
    elif r < 0.35:
        if x.rank == 1 and b.rng.random() < 0.9:
            raise Skip  # a 0-d result
        index = b.ints([b.rng.randint(-d, d - 1)], scalar=True)
    elif r < 0.65:
        step = b.rng.choice((1, 1, 2, 3, -1))
        start = b.rng.randrange(d)
        stop = d if step > 0 else -1
        seq = list(range(start, stop, step))[: b.rng.randint(1, 8)]
        index = b.ints([i - d if b.rng.random() < 0.2 else i for i in seq])
    else:
        index = constant_indices(b, b.rng.choice(((b.size(1, 6),), (2, b.size(1, 4)))), d)
    b.add("Gather", [x.name, index], pos=x.pos, axis=a)


def constant_indices(b: Builder, shape: tuple[int, ...], d: int) -> str:
    """Constant int64 indices of `shape` into an axis of size `d`, negative
    ones too: an initializer, reshaped by a node (whose value shape inference
    is told) when not 1-D."""
    vals = [b.rng.randint(-d, d - 1) for _ in range(int(np.prod(shape)))]
    index = b.ints(vals)
    if len(shape) == 1:
        return index
    (shaped,) = b.add("Reshape", [index, b.ints(list(shape))])
    b.known(shaped.name, vals)
    return shaped.name


@op("Pad")
def pad(b: Builder) -> None:
    """constant (with a value, negative pads cropping), reflect (pads below
    the size), edge; over every axis or an `axes` input; `wrap` rarely (not
    supported)."""
    x = b.pick_or_new(lambda v: v.rank >= 1, b.shape)
    mode = (
        "wrap"
        if b.rng.random() < RARE
        else b.rng.choice(("constant", "constant", "constant", "reflect", "edge"))
    )
    axes = (
        list(range(x.rank))
        if b.rng.random() < 0.6
        else sorted(b.rng.sample(range(x.rank), b.rng.randint(1, x.rank)))
    )
    lo, hi = [], []
    for a in axes:
        d = x.shape[a]
        top = d - 1 if mode == "reflect" else 3
        low = -((d - 1) // 2) if mode == "constant" and b.rng.random() < 0.3 else 0
        lo.append(b.rng.randint(low, top))
        hi.append(b.rng.randint(low, top))
    ins = [x.name, b.ints(lo + hi)]
    if mode == "constant" and b.rng.random() < 0.5:
        ins.append(b.scalar(b.rng.choice((0.0, 1.5, -2.0)), as_node=False).name)
    if len(axes) < x.rank or b.rng.random() < 0.2:
        ins += [""] * (3 - len(ins))
        ins.append(b.ints([a - x.rank if b.rng.random() < 0.3 else a for a in axes]))
    b.add("Pad", ins, pos=x.pos and mode != "constant", mode=mode)


# ---------------------------------------------------------------------------
# sequences (D-COMPILE-SEQ: resolved at compile time)

SEQUENCE_OPS = (
    "SequenceEmpty",
    "SequenceConstruct",
    "SplitToSequence",
    "SequenceInsert",
    "SequenceErase",
    "SequenceAt",
    "SequenceLength",
    "ConcatFromSequence",
)
MAKERS = ("SequenceEmpty", "SequenceConstruct", "SplitToSequence")
READERS = ("SequenceAt", "SequenceLength", "ConcatFromSequence")


def like(b: Builder, x: Val) -> Val:
    """Another value of x's shape: of the graph, a new input or a weight."""
    try:
        return b.pick(lambda v: v.shape == x.shape and v.name != x.name)
    except Skip:
        return b.new_input(x.shape) if b.rng.random() < 0.5 else b.weight(x.shape)


def make_sequence(b: Builder, how: str, x: Val) -> tuple[str, list[Val]]:
    """A sequence holding x (or its parts), by `how`; its elements."""
    if how == "SplitToSequence":
        a = axis(b, x.rank)
        d = x.shape[a]
        q = b.rng.random()
        if q < 0.35:  # pieces of 1, the axis kept or dropped
            keep = b.rng.randint(0, 1)
            if d > 6 or (not keep and x.rank == 1):
                raise Skip
            (s,) = b.add("SplitToSequence", [x.name], axis=a, keepdims=keep)
            shape = tuple(e for k, e in enumerate(x.shape) if k != a % x.rank or keep)
            parts = [shape] * d
        else:
            if q < 0.65 and d > 1:  # a scalar chunk: the last one may be shorter
                chunk = b.rng.randint(1, d - 1)
                sizes = [chunk] * (d // chunk) + ([d % chunk] if d % chunk else [])
                split = b.ints([chunk], scalar=True)
            else:
                cuts = sorted(b.rng.sample(range(1, d), min(d - 1, b.rng.randint(0, 3))))
                sizes = [e - s for s, e in zip([0, *cuts], [*cuts, d])]
                split = b.ints(sizes)
            if len(sizes) > 6:
                raise Skip
            (s,) = b.add("SplitToSequence", [x.name, split], axis=a)
            parts = [
                tuple(n if k == a % x.rank else e for k, e in enumerate(x.shape)) for n in sizes
            ]
        return s.name, [Val(f"{s.name}[{k}]", p, pos=x.pos) for k, p in enumerate(parts)]
    if how == "SequenceConstruct":
        elems = [x] + [like(b, x) for _ in range(b.rng.randint(0, 3))]
        b.rng.shuffle(elems)
        (s,) = b.add("SequenceConstruct", [e.name for e in elems])
        return s.name, elems
    (s,) = b.add("SequenceEmpty", [], dtype=b.elem)
    (s,) = b.add("SequenceInsert", [s.name, x.name])
    return s.name, [x]


def read_sequence(b: Builder, how: str, seq: str, elems: list[Val], x: Val) -> None:
    n = len(elems)
    if how == "SequenceAt":
        p = b.rng.randint(-n, n - 1)
        e = elems[p]
        b.add("SequenceAt", [seq, b.ints([p], scalar=True)], pos=e.pos, shapes=[e.shape])
    elif how == "SequenceLength":
        (m,) = b.add("SequenceLength", [seq])
        b.known(m.name, n)
        f = constant(b.add("Cast", [m.name], pos=True, to=b.elem)[0])
        b.add("Mul", [x.name, f.name], pos=x.pos)
    else:
        rank = elems[0].rank
        same = all(e.shape == elems[0].shape for e in elems)
        new = int(same and b.rng.random() < 0.4)
        diff = {k for e in elems for k in range(rank) if e.shape[k] != elems[0].shape[k]}
        if len(diff) > 1 or (new and rank >= 4):
            raise Skip
        a = diff.pop() if diff else b.rng.randrange(rank + new)
        if new:
            out = elems[0].shape[:a] + (n,) + elems[0].shape[a:]
        else:
            out = tuple(
                sum(e.shape[a] for e in elems) if k == a else s
                for k, s in enumerate(elems[0].shape)
            )
        spelled = a - rank - new if b.rng.random() < 0.3 else a
        b.add(
            "ConcatFromSequence",
            [seq],
            pos=all(e.pos for e in elems),
            shapes=[out],
            axis=spelled,
            **({"new_axis": 1} if new else {}),
        )


def _sequence(need: str) -> None:
    """A sequence made, maybe changed (SequenceInsert, SequenceErase) and
    read back, by ops that include `need`."""

    @op(need)
    def entry(b: Builder) -> None:
        x = b.pick_or_new(lambda v: 1 <= v.rank <= 4, b.shape)
        seq, elems = make_sequence(b, need if need in MAKERS else b.rng.choice(MAKERS), x)
        if need == "SequenceInsert" or b.rng.random() < 0.25:
            t = like(b, b.rng.choice(elems))
            n = len(elems)
            p = b.rng.choice((None, b.rng.randint(-n, n)))
            ins = [seq, t.name] + ([] if p is None else [b.ints([p], scalar=True)])
            (s,) = b.add("SequenceInsert", ins)
            seq = s.name
            elems.insert(n if p is None else p + n if p < 0 else p, t)
        if (need == "SequenceErase" or b.rng.random() < 0.2) and len(elems) >= 2:
            n = len(elems)
            p = b.rng.choice((None, b.rng.randint(-n, n - 1)))
            ins = [seq] + ([] if p is None else [b.ints([p], scalar=True)])
            (s,) = b.add("SequenceErase", ins)
            seq = s.name
            del elems[-1 if p is None else p]
        elif need == "SequenceErase":
            raise Skip
        read_sequence(b, need if need in READERS else b.rng.choice(READERS), seq, elems, x)


for _name in SEQUENCE_OPS:
    _sequence(_name)
