"""Convolutions and max pooling over a window (D-LOW-WINDOW): a pure analysis.

What graph compilers emit for a convolution or a pooling is a loop nest
(`convert-linalg-to-affine-loops`, tiled or not) or a `linalg.generic`
(what a named op generalizes to) whose accesses are skewed: the input is
indexed by `stride * out + dilation * window`.  `match_window` recognizes

    Y[n, oh, ow, co] += X[n, s*oh + d*kh, s*ow + d*kw, ci] * W[kh, kw, ci, co]   -> conv2d
    Y[n, oh, ow, c]   = max(Y[n, oh, ow, c], X[n, s*oh + kh, s*ow + kw, c])       -> maxpool
    Y[n, oh, ow, c]  += X[n, s*oh + kh, s*ow + kw, c]                            -> sumpool

with the memref dimensions in any order (NCHW / FCHW included: each
logical axis of the NEM region steps along the memref dimension that
carries it, so a layout is only strides), any dimension absent when its
extent is 1 (a tile of one output row has no `oh` loop), and at most two
spatial axes.  The plan names, per logical axis of X / W / Y (NHWC, HWIO,
NHWC: D-CONV-LAYOUT), the memref dimension and the size.  A window sum
(`sumpool`: the sum half of an average pooling, `pooling_nhwc_sum`) has no
NEM opcode (`avgpool` divides by the window size); its plan is emitted as
one `add` per window offset (D-LOW-SUMPOOL).  A convolution may also have
a group loop indexing X, W and Y (`conv_2d_nhwgc_gfhwc`, depthwise): the
plan's `group`, one `conv2d groups=G` (D-LOW-GROUPCONV).  Anything else
raises `NotRaisable` with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects import affine, arith, linalg, memref
from xdsl.dialects.builtin import AffineMapAttr, MemRefType
from xdsl.ir import BlockArgument, Operation, SSAValue

from nem.dialect.shape_rules import window_reach
from nem.passes.lowering.affine_algebra import Aff, Dim, eval_map
from nem.passes.lowering.nest_analysis import Nest, NotRaisable, access_indices

ADD_OPS = ("arith.addf", "arith.addi")
MUL_OPS = ("arith.mulf", "arith.muli")
MAX_OPS = ("arith.maximumf", "arith.maxsi")  # not maxnumf (D-LOW-MAXNUM)
POOLS = ("maxpool", "sumpool")
"""Window plans without weights: a max or a sum of the window's elements."""


class NotWindow(NotRaisable):
    """The body is not a window update at all (the caller keeps its own reason)."""


@dataclass(frozen=True)
class Index:
    """One index of an access: `sum(coeff * dim) + rest`."""

    terms: tuple[tuple[int, int], ...]
    rest: Aff


@dataclass(frozen=True)
class WAccess:
    memref: SSAValue
    index: tuple[Index, ...]

    def plain(self) -> dict[int, int]:
        """Dim -> memref dimension, for indices that are one dim with coefficient 1."""
        return {
            ix.terms[0][0]: k
            for k, ix in enumerate(self.index)
            if len(ix.terms) == 1 and ix.terms[0][1] == 1
        }


@dataclass(frozen=True)
class Axis:
    """A logical axis of an operand's region: the memref dimension it
    steps along (None: a unit axis) and its size."""

    mdim: int | None
    size: int


@dataclass(frozen=True)
class WindowPlan:
    kind: str
    """`conv2d`, `maxpool` or `sumpool`."""
    x: WAccess
    w: WAccess | None
    y: WAccess
    x_axes: tuple[Axis, ...]
    """N, H, W, C."""
    w_axes: tuple[Axis, ...]
    """KH, KW, I, O (conv2d)."""
    y_axes: tuple[Axis, ...]
    """N, OH, OW, C."""
    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    h_first: bool = True
    """Whether the window's H loop runs outside its W loop: the order in
    which a sum over window offsets adds them (the nest's rounding)."""
    group: Group | None = None
    """A grouped convolution's group loop (D-LOW-GROUPCONV)."""

    def batched_matmul(self) -> bool:
        """Whether the plan is a batch of matmuls (`linalg.batch_matmul`,
        an ONNX MatMul with batch dimensions) matched as a convolution with
        a group loop: a 1x1 window, the group the outermost dimension of
        X, W and Y.  Named so in the reasons (D-LOW-GROUPCONV)."""
        g = self.group
        return (
            self.kind == "conv2d"
            and g is not None
            and (g.x, g.w, g.y) == (0, 0, 0)
            and self.kernel == (1, 1)
            and self.strides == (1, 1)
        )


@dataclass(frozen=True)
class Group:
    """The group loop of a grouped convolution (`conv_2d_nhwgc_gfhwc`,
    depthwise when a group has one input channel): its extent and the
    memref dimension it indexes in X, W and Y.  Each operand's channel
    axis (X's C, W's O, Y's C) is the group dimension outside its own
    channel dimension: channel `g * per_group + c` (D-NUM-CONV)."""

    size: int
    x: int
    w: int
    y: int


@dataclass(frozen=True)
class _Spatial:
    xdim: int
    out: int | None
    stride: int
    win: int | None
    dilation: int


def access_of(memref_value: SSAValue, idx: Sequence[Aff]) -> WAccess:
    out = []
    for a in idx:
        dims, rest = a.split_dims()
        if rest.has_dims():
            raise NotRaisable("a nest index inside mod/floordiv")
        out.append(Index(tuple(sorted((d.k, c) for d, c in dims if c)), rest))
    return WAccess(memref_value, tuple(out))


def match_window(
    kind: str, ext: Mapping[int, int], x: WAccess, w: WAccess | None, y: WAccess
) -> WindowPlan:
    """The plan of `Y (+)= X (*) W` over dims with extents `ext`."""
    ydims = y.plain()
    if any(ix.terms and (len(ix.terms) > 1 or ix.terms[0][1] != 1) for ix in y.index) or len(
        ydims
    ) != sum(1 for ix in y.index if ix.terms):
        raise NotRaisable("the output is not indexed by one loop per dimension")
    out = set(ydims)
    # a loop of one iteration that indexes no operand (`affine-loop-tile`'s
    # loop of tile size 1 left inside the point loops) changes nothing
    used = {d for a in (x, w, y) if a is not None for ix in a.index for d, _ in ix.terms}
    red = {d for d in set(ext) - out if d in used or ext[d] != 1}
    wdims: dict[int, int] = {}
    if w is not None:
        wdims = w.plain()
        if len(wdims) != sum(1 for ix in w.index if ix.terms) or any(
            ix.terms and len(ix.terms) > 1 for ix in w.index
        ):
            raise NotRaisable("the weights are not indexed by one loop per dimension")
    xplain = x.plain()
    # a reduction loop indexing one dimension of X and of W is the input
    # channel, or a window loop over an input as tall as the window (one
    # output row): either reading is exact; the innermost such X dimension
    # is taken as the channel
    groups = [d for d in out if d in wdims and d in xplain]  # D-LOW-GROUPCONV
    if len(groups) > 1:
        raise NotRaisable("more than one group loop")
    group = (
        Group(ext[groups[0]], xplain[groups[0]], wdims[groups[0]], ydims[groups[0]])
        if groups
        else None
    )
    contracted = sorted((xplain[d], d) for d in red if d in wdims and d in xplain)
    cin = [contracted[-1][1]] if contracted else []
    cout = [d for d in out if d in wdims and d not in xplain]
    if len(cout) > 1:
        raise NotRaisable("more than one output channel loop")
    wins = red - set(cin)
    spatial: list[_Spatial] = []
    through: list[tuple[int, int]] = []  # (x memref dim, out dim) passed through
    for k, ix in enumerate(x.index):
        t = dict(ix.terms)
        o = [d for d in t if d in out]
        r = [d for d in t if d in wins]
        if (
            not t
            or (cin and list(t) == cin and t[cin[0]] == 1)
            or (groups and list(t) == groups and t[groups[0]] == 1)
        ):
            continue
        if len(o) + len(r) != len(t) or len(o) > 1 or len(r) > 1:
            raise NotRaisable("an input index that is not stride * output + dilation * window")
        if r:
            spatial.append(_Spatial(k, o[0] if o else None, t[o[0]] if o else 1, r[0], t[r[0]]))
        elif t[o[0]] == 1:
            through.append((k, o[0]))
        else:
            spatial.append(_Spatial(k, o[0], t[o[0]], None, 1))
    if kind == "sumpool" and not any(s.out is not None and s.win is not None for s in spatial):
        # (first: a ReduceSum over a 4-D tensor's last axis was told of
        # "more than two batch/channel dimensions", an outside user, session 62)
        raise NotRaisable(
            "a sum over whole axes, not a sliding window (a reduction: one add "
            "per element along them is a serial chain of tasks; D-LOW-SUMPOOL)"
        )
    if kind in POOLS:
        if len(through) > 2:
            raise NotRaisable("more than two batch/channel dimensions around the window")
        n_dim, c_dim = (
            (through[0] if len(through) == 2 else None),
            (through[-1] if through else None),
        )
    else:
        if len(through) > 1:
            spatial += [_Spatial(k, o, 1, None, 1) for k, o in through[1:]]
        n_dim, c_dim = (through[0] if through else None), None
    if len(spatial) > 2:
        raise NotRaisable("a window of more than two spatial dimensions")
    if (
        len({s.win for s in spatial if s.win is not None})
        != sum(1 for s in spatial if s.win is not None)
        or {s.win for s in spatial} - {None} != wins
    ):
        raise NotRaisable("window loops that do not each index one input dimension")
    uses = [s.out for s in spatial if s.out is not None] + [d for _, d in through] + cout + groups
    if len(uses) != len(set(uses)):
        raise NotRaisable("an output loop indexing two input dimensions")
    used_out = set(uses)
    if used_out != out:
        raise NotRaisable("an output loop the input does not use (a broadcast)")
    spatial.sort(key=lambda s: s.xdim)
    while len(spatial) < 2:
        spatial.insert(0, _Spatial(-1, None, 1, None, 1))

    def e(d: int | None) -> int:
        return ext[d] if d is not None else 1

    def xsize(s: _Spatial) -> int:
        return window_reach(e(s.out), s.stride, e(s.win), s.dilation)

    def ax(dims: Mapping[int, int], d: int | None) -> Axis:
        if d is None:
            return Axis(None, 1)
        if d not in dims:  # e.g. a sum over a loop only the input indexes (an Einsum's)
            raise NotRaisable(f"loop d{d} indexes no dimension of an operand it must")
        return Axis(dims[d], e(d))

    xn = Axis(n_dim[0], e(n_dim[1])) if n_dim else Axis(None, 1)
    if kind in POOLS:
        xc = Axis(c_dim[0], e(c_dim[1])) if c_dim else Axis(None, 1)
        yc = ax(ydims, c_dim[1] if c_dim else None)
    else:
        xc = Axis(x.plain()[cin[0]], e(cin[0])) if cin else Axis(None, 1)
        yc = ax(ydims, cout[0] if cout else None)
    x_axes = (xn, *(Axis(s.xdim if s.xdim >= 0 else None, xsize(s)) for s in spatial), xc)
    y_axes = (ax(ydims, n_dim[1] if n_dim else None), *(ax(ydims, s.out) for s in spatial), yc)
    w_axes: tuple[Axis, ...] = ()
    if w is not None:
        w_axes = (
            *(ax(wdims, s.win) for s in spatial),
            ax(wdims, cin[0] if cin else None),
            ax(wdims, cout[0] if cout else None),
        )
        if ({a.mdim for a in w_axes} | ({group.w} if group else set())) - {None} != set(
            wdims.values()
        ):
            raise NotRaisable("a weight dimension that is not a window or channel loop")
    if kind in POOLS and any(s.dilation != 1 for s in spatial):
        raise NotRaisable("a dilated pooling window (NEM pooling has no dilations)")
    h_win, w_win = spatial[0].win, spatial[1].win
    return WindowPlan(
        kind,
        x,
        w,
        y,
        x_axes,
        w_axes,
        y_axes,
        (e(h_win), e(w_win)),
        (spatial[0].stride, spatial[1].stride),
        (spatial[0].dilation, spatial[1].dilation),
        h_win is None or w_win is None or h_win < w_win,
        group,
    )


# ---------------------------------------------------------------------------
# Bodies: the update `Y = Y + X * W` or `Y = max(Y, X)`
# ---------------------------------------------------------------------------


def classify(
    op_name: str, lhs: SSAValue, rhs: SSAValue, is_acc: Callable[[SSAValue], bool]
) -> tuple[str, list[SSAValue]]:
    """(kind, [x] or [a, b]) of an update `acc OP value`."""
    for acc, val in ((lhs, rhs), (rhs, lhs)):
        if not is_acc(acc):
            continue
        if op_name in MAX_OPS:
            return "maxpool", [val]
        if op_name in ADD_OPS:
            return "conv2d", [val]
    raise NotWindow("not an accumulation into the output")


def match_window_nest(nest: Nest, outer: Mapping[SSAValue, Aff]) -> WindowPlan:
    """A perfect nest whose one store is a window update."""
    stores = [o for o in nest.body if isinstance(o, affine.StoreOp | memref.StoreOp)]
    if len(stores) != 1:
        raise NotWindow(f"{len(stores)} stores in the nest body")
    st = stores[0]
    y = _nest_access(nest, outer, st)

    def load(v: SSAValue) -> WAccess | None:
        owner = v.owner
        if isinstance(owner, affine.LoadOp | memref.LoadOp) and owner in nest.body:
            return _nest_access(nest, outer, owner)
        return None

    upd = st.value.owner
    if not isinstance(upd, Operation) or upd not in nest.body or len(upd.operands) != 2:
        raise NotWindow("the body is not a window update")
    kind, (val,) = classify(
        upd.name, upd.operands[0], upd.operands[1], lambda v: (a := load(v)) is not None and a == y
    )
    return _finish(
        kind, val, load, {k: e for k, e in nest.extents.items()}, y, lambda v: v.owner in nest.body
    )


def _unwidened(v: SSAValue, inside: Callable[[SSAValue], bool]) -> SSAValue:
    """The operand of an exact widening cast (`extf`, `extsi`) computing
    `v` in the body, else `v`."""
    owner = v.owner
    if isinstance(owner, arith.ExtFOp | arith.ExtSIOp) and inside(v):
        return owner.operands[0]
    return v


def _finish(
    kind: str,
    val: SSAValue,
    load: Callable[[SSAValue], WAccess | None],
    ext: dict[int, int],
    y: WAccess,
    inside: Callable[[SSAValue], bool],
) -> WindowPlan:
    if kind == "maxpool":
        x = load(val)
        if x is None:
            raise NotRaisable("a max over something other than a load")
        return match_window("maxpool", ext, x, None, y)
    prod = val.owner
    if isinstance(prod, Operation) and inside(val) and prod.name in MUL_OPS:
        # loads widened to the output's type first (linalg's mixed-type
        # convolution: the device's variants decide, D-LOW-LINALG-NAMED)
        a, b = (load(_unwidened(x, inside)) for x in prod.operands)
        if a is None or b is None:
            raise NotRaisable("a product of something other than two loads")
        reasons = []
        for x, w in ((a, b), (b, a)):
            try:
                return match_window("conv2d", ext, x, w, y)
            except NotRaisable as e:
                reasons.append(str(e))
        # the reason of the reading whose weights have the weights' shape
        raise NotRaisable(next((r for r in reasons if not r.startswith("the weights")), reasons[0]))
    x = load(val)
    if x is not None:
        return match_window("sumpool", ext, x, None, y)
    raise NotWindow("the body is not a window update")


def _nest_access(nest: Nest, outer: Mapping[SSAValue, Aff], op: Operation) -> WAccess:
    assert isinstance(op, affine.LoadOp | affine.StoreOp | memref.LoadOp | memref.StoreOp)
    return access_of(op.memref, access_indices(nest, outer, op))


def match_window_generic(
    op: linalg.GenericOp, shape_of: Callable[[SSAValue], Sequence[int]]
) -> WindowPlan:
    """A `linalg.generic` whose body is a window update (what
    `linalg.conv_2d_nchw_fchw` or `linalg.pooling_nhwc_max` generalize to);
    `shape_of`: an operand's static shape (`generic_analysis.ShapeOf`)."""
    maps = [m.data for m in op.indexing_maps.data if isinstance(m, AffineMapAttr)]
    operands = [*op.inputs, *op.outputs]
    if len(op.outputs) != 1 or len(maps) != len(operands):
        raise NotRaisable("not a window update with one output")
    ndims = maps[0].num_dims
    dims = [Aff.atom(Dim(k)) for k in range(ndims)]
    try:
        accesses = [access_of(v, eval_map(m, dims)) for v, m in zip(operands, maps)]
    except ValueError as e:  # e.g. a floordiv by a negative constant
        raise NotRaisable(f"an indexing map that is not affine: {e}") from None
    ext: dict[int, int] = {}
    for v, acc in zip(operands, accesses):
        t = v.type
        if not isinstance(t, MemRefType):
            raise NotRaisable("scalar operands")
        for ix, size in zip(acc.index, shape_of(v)):
            if len(ix.terms) == 1 and ix.terms[0][1] == 1 and ix.rest.is_const():
                ext.setdefault(ix.terms[0][0], size)
    if set(ext) != set(range(ndims)):
        raise NotRaisable("loop ranges that no operand dimension gives")
    block = op.regions[0].block
    y = accesses[-1]
    last = block.last_op
    assert last is not None
    upd = last.operands[0].owner

    def arg(v: SSAValue) -> int | None:
        return v.index if isinstance(v, BlockArgument) and v.block is block else None

    def load(v: SSAValue) -> WAccess | None:
        k = arg(v)
        return accesses[k] if k is not None else None

    if not isinstance(upd, Operation) or upd.parent_block() is not block or len(upd.operands) != 2:
        raise NotWindow("the body is not a window update")
    kind, (val,) = classify(
        upd.name, upd.operands[0], upd.operands[1], lambda v: arg(v) == len(operands) - 1
    )
    return _finish(
        kind,
        val,
        load,
        ext,
        y,
        lambda v: (
            isinstance(v.owner, Operation)
            and v.owner.parent_block() is block
            and not isinstance(v.owner, arith.ConstantOp)
        ),
    )
