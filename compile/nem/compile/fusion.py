"""Fusion in L1 (D-COMPILE-FUSE-L1): a convolution's bias prologue and its
elementwise epilogues run on the tile while it is in L1.

The importer gives an ONNX Conv with a bias as a broadcast of the bias into
the output buffer O followed by the convolution accumulating into O (one
without a bias: a fill of O with zero, the scalar then standing for the
bias below, read at no index); the
ONNX Relu (Clip, residual Add; a BatchNormalization and its Relu, one op
by D-COMPILE-FUSE-CHAIN, its scale and shift broadcast per channel) after
it is an elementwise `linalg.generic` reading O into a buffer P of its
own.  Tiled one op at a time, that is a pass broadcasting the bias
through DDR, a read-back of each output tile before it is convolved into,
and a pass per epilogue reading O again.

Before tiling (`fuse`, on the bufferized function, after the tile plans),
each such group B; C; E1; ..; Ek whose rewrite is sound becomes one
`linalg.generic` F at C's place: the convolution's loops
(n, oh, ow, f, kh, kw, c), inputs (X, W, bias, each epilogue's other
inputs), outputs (O, P1, .., Pk), a body exact on its own (`x * w` added to
the bias at the reduction's first step, to `o` after it; then the
epilogues' bodies on that sum: `structured.promote` stages only the
operands a body reads).  Epilogues are fused as far as the tile, with an
output-sized tile more per epilogue and per other input, stays within the
tile budget, so that fusing does not shrink the convolution's tiles.  F is tiled, staged in L1 and split over
the engines as any op (`nem.compile.transform`), its L1 need measured with
every buffer the fused tile holds and the scratch of the ops it unfolds
into (D-COMPILE-L1, `epilogue_steps`), with tile sizes that
never split the reduction: every tile of F computes final sums.  After
tiling (`finish`) each tile of F becomes, on its L1 buffers,

    broadcast of the bias tile into O's tile  (instead of O's read-back;
                                              a Conv without a bias: the fill)
    the named convolution into O's tile       (as C's tile computed it)
    E1 .. Ek on the tile, each into its P's tile (no read-back of P)

and O's (or an intermediate P's) copy-out goes where nothing else reads the
buffer.  Each op is the unfused op's own (the broadcast's body, C's
convolution, each E's body cloned), on the same values in the same order:
the outputs are bit-identical to the unfused program's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from mlir import ir
from mlir.dialects import arith, linalg, memref

from nem.compile.conv_forms import FORMS, RANK
from nem.compile.fusion_groups import Group, find_groups, other_maps, widen
from nem.compile.fusion_prologue import compose_map, prologue_tile
from nem.compile.fusion_tiles import (
    FUSE,
    Staged,
    broadcast_tile,
    copies_of,
    generic,
    slice_of,
    staging_copy,
    yield_first,
)
from nem.compile.hoist import hoist_op
from nem.compile.linalg_ir import (
    body_of,
    clone_ops,
    identity_map,
    map_strings,
    operand_segments,
    users_of,
)
from nem.compile.nest_ir import owner_op
from nem.compile.plan import Plan


def _width(g: Group) -> int:
    """Bytes of an element of the group's one type (f32 4, f16 2)."""
    width: int = ir.MemRefType(g.conv.operands[1].type).element_type.width // 8
    return width


def _tile_bytes(g: Group, sizes: Sequence[int], tiles: int, bias: int) -> int:
    """Bytes of a convolution's tile of `sizes` (n, oh, ow, the output
    channels' loops, whole reduction): its input window, weights, `tiles`
    output-sized tiles and `bias` bias slices, in the group's element size
    (the tiling's footprint model: D-COMPILE-TILES counts the output twice)."""
    conv = g.conv
    kh, kw, c = g.form.kernel(conv.operands[1])
    s = [int(v) for v in ir.DenseIntElementsAttr(conv.attributes["strides"])]
    d = [int(v) for v in ir.DenseIntElementsAttr(conv.attributes["dilations"])]
    n, oh, ow = sizes[:3]
    f = math.prod(sizes[3 : g.form.rank])
    window = n * ((oh - 1) * s[0] + (kh - 1) * d[0] + 1) * ((ow - 1) * s[1] + (kw - 1) * d[1] + 1)
    cin = g.form.input_channels(list(sizes), c)
    weights = g.form.weight_bytes(kh, kw, c, f, _width(g))
    return _width(g) * (window * cin + tiles * n * oh * ow * f + bias * f) + weights


def _fitting(g: Group, sizes: list[int], budget: int) -> Group | None:
    """`g` with the epilogues fused where fusing does not hurt the
    convolution's tiles, the bias always (None: a one-pixel tile with the
    whole reduction does not fit half the budget).  Each epilogue adds an output-sized tile
    to the convolution's, each of its other inputs one more; the L1 fit then
    shrinks the tile (D-COMPILE-L1), which costs little while the weight
    tile is under half the budget.  A larger weight tile takes the epilogues
    that keep the tile within the budget (or within the convolution's own
    size, when that is over) only: shrinking would split its output
    channels, the input window then read once per part (ResNet-50's 1x1
    128 -> 512 convolutions with their Add and Relu moved 6.6x the bytes)."""
    if _tile_bytes(g, [1] * g.form.rank, 2, 1) * 2 > budget:
        return None
    kh, kw, c = g.form.kernel(g.conv.operands[1])
    if g.form.weight_bytes(kh, kw, c, math.prod(sizes[3 : g.form.rank]), _width(g)) * 2 < budget:
        return g
    room = max(budget, _tile_bytes(g, sizes, 2, 0))
    for n in range(len(g.epilogues), 0, -1):
        tiles = 2 + n + sum(len(o) for o in g.others[:n])
        if _tile_bytes(g, sizes, tiles, 1) <= room:
            return g.first(n)
    return g.first(0)  # (the bias slice: one channel's word per output channel)


def fuse(
    fn: ir.Operation,
    ops: list[ir.Operation],
    plans: list[Plan | None],
    budget: int,
    prologues: bool = True,
) -> tuple[list[ir.Operation], list[Plan | None]]:
    """Fuse each group of `fn` whose convolution's plan keeps its reduction
    whole into one op (module doc); returns `fn`'s linalg ops and their
    plans after it (the fused op takes the convolution's plan, with sizes
    that keep the reduction whole at every L1 budget).  Without
    `prologues` (`--no-hoist`: a prologue's broadcast tiles would be built
    again in every tile, not once per engine part) no group takes one."""
    index = {op: k for k, op in enumerate(ops)}
    gone: set[int] = set()
    fused: dict[int, tuple[ir.Operation, Plan]] = {}
    for g in find_groups(fn):
        k = index[g.conv]
        plan = plans[k]
        red = g.form.reduction
        if (
            plan is None
            or plan.partials
            or len(plan.extents) != g.form.loops
            or any(plan.sizes[r] < plan.extents[r] for r in red)
            or (len(plan.engines) > 1 and plan.split_dim in red)
        ):
            continue
        if g.prologue is not None and (
            not prologues
            or index[g.prologue] in gone
            or (len(plan.engines) > 1 and plan.split_dim == g.form.out_channels)
        ):
            # (not hoisted; an earlier group's epilogue; or each engine's part of the
            # output channels would run the prologue on the whole input:
            # ResNet-50's last 1x1 convolutions, 2,000 cycles slower each)
            g = g.without_prologue()
        fitting = _fitting(g, plan.sizes, budget)
        if fitting is None:
            continue
        g = fitting
        f = _build(g)
        fused[k] = (f, _whole_reduction(plan, red))
        pro = [] if g.prologue is None else [g.prologue]
        x = owner_op(g.conv.operands[0])  # (with a prologue, X's allocation)
        gone.update(index[e] for e in [*pro, g.bias, *g.epilogues])
        for e in [*reversed(g.epilogues), g.conv, g.bias, *pro]:
            e.erase()
        if pro and x is not None:  # (X: nothing reads or writes it any more)
            x.erase()
    out_ops: list[ir.Operation] = []
    out_plans: list[Plan | None] = []
    for k, (op, plan) in enumerate(zip(ops, plans)):
        if k in gone:
            continue
        op, plan = fused.get(k, (op, plan))  # (the convolution is erased)
        out_ops.append(op)
        out_plans.append(plan)
    return out_ops, out_plans


def _whole_reduction(plan: Plan, reduction: tuple[int, ...]) -> Plan:
    """`plan` with sizes (its own and at any smaller budget) that tile no
    reduction loop (`reduction`)."""
    extents, resize = plan.extents, plan.resize
    assert resize is not None

    def whole(sizes: list[int]) -> list[int]:
        return [e if i in reduction else s for i, (s, e) in enumerate(zip(sizes, extents))]

    return replace(plan, sizes=whole(plan.sizes), resize=lambda b: whole(resize(b)))


def _build(g: Group) -> ir.Operation:
    """The fused op of `g`, before its convolution (module doc)."""
    conv = g.conv
    x, w, o = list(conv.operands)
    keep = g.keep()  # (before the fused op is one more user of each output)
    ys = [y for group in g.others for y in group]
    outs = g.outputs()
    for p in outs[1:]:  # the epilogues' buffers, allocated before the fused op
        alloc = owner_op(p)
        if alloc is not None and conv.is_before_in_block(alloc):
            alloc.move_before(conv)
    s = [int(v) for v in ir.DenseIntElementsAttr(conv.attributes["strides"])]
    d = [int(v) for v in ir.DenseIntElementsAttr(conv.attributes["dilations"])]
    form = g.form
    ip = ir.InsertionPoint(conv)
    groups = int(ir.MemRefType(o.type).shape[3])  # (the grouped form's: its views')
    with conv.location:
        split = [
            form.split(y, m, ip, groups)
            for e, p, others in zip(g.epilogues, g.prevs, g.others)
            for y, m in zip(others, other_maps(e, p))
        ]
        ident = identity_map(RANK)
        outs = [o, *(form.split(v, ident, ip, groups)[0] for v in outs[1:])]
        if g.filled():
            b = g.start()  # (a scalar: read at no index)
        else:
            b, _ = form.split(g.start(), "affine_map<(d0, d1, d2, d3) -> (d3)>", ip, groups)
    ys = [y for y, _ in split]
    n = form.loops
    pys = g.pro_others()
    pro_maps = [] if g.prologue is None else other_maps(g.prologue, g.source)
    maps = [
        form.input_map(s, d),
        form.weight_map(),
        _scalar_map(n) if g.filled() else form.channel_map(n),
        *[widen(m, n) for _, m in split],
        *[compose_map(m, form.input_map(s, d)) for m in pro_maps],
        *[widen(identity_map(form.rank), n)] * len(outs),
    ]
    if g.source is not None:
        x = g.source
    iters = ["parallel"] * form.rank + ["reduction"] * len(form.reduction)
    elem = ir.MemRefType(x.type).element_type  # the group's one (`linalg_ir.FUSED_TYPES`)
    with conv.location:
        op = linalg.GenericOp(
            [],
            [x, w, b, *ys, *pys],
            outs,
            ir.ArrayAttr.get([ir.AffineMapAttr(ir.Attribute.parse(m)) for m in maps]),
            ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{t}>") for t in iters]),
            ip=ir.InsertionPoint(conv),
        )
        block = op.regions[0].blocks.append(*([elem] * (3 + len(ys) + len(pys) + len(outs))))
        args = list(block.arguments)
        y_args = args[3 : 3 + len(ys)]
        o_arg = args[3 + len(ys) + len(pys)]
        with ir.InsertionPoint(block):
            xv = args[0]
            if g.prologue is not None:  # X's element, computed from the source's
                theirs = iter(args[3 + len(ys) : 3 + len(ys) + len(pys)])
                feed = [
                    xv if v == g.source else next(theirs) for v in operand_segments(g.prologue)[0]
                ]
                xv = _clone_body(body_of(g.prologue), feed)
            first = _init(args[2], o_arg, form.reduction)
            total = form.accumulate(first, xv, args[1])
            results, cur = [total], total
            for e, others, prev in zip(g.epilogues, g.others, g.prevs):
                mine, y_args = y_args[: len(others)], y_args[len(others) :]
                theirs = iter(mine)
                feed = [cur if v == prev else next(theirs) for v in operand_segments(e)[0]]
                cur = _clone_body(body_of(e), feed)
                results.append(cur)
            linalg.YieldOp(results)
    op.operation.attributes[FUSE] = ir.DictAttr.get(
        {
            "conv": ir.StringAttr.get(form.name),
            "strides": conv.attributes["strides"],
            "dilations": conv.attributes["dilations"],
            "weight": ir.DenseI64ArrayAttr.get(ir.MemRefType(w.type).shape),
            "ins": ir.DenseI64ArrayAttr.get([len(o) for o in g.others]),
            "keep": ir.DenseI64ArrayAttr.get([int(k) for k in keep]),
            "prologue": ir.ArrayAttr.get([ir.StringAttr.get(m) for m in pro_maps]),
            "pro": ir.BoolAttr.get(g.prologue is not None),
        }
    )
    return op.operation


def _scalar_map(n: int) -> str:
    """The map of a scalar operand over `n` loops (a fill's constant)."""
    return f"affine_map<({', '.join(f'd{i}' for i in range(n))}) -> ()>"


def _init(bias: ir.Value, out: ir.Value, reduction: tuple[int, ...]) -> ir.Value:
    """What the convolution adds the first product to: the bias at the first
    step of the reduction (kh = kw = c = 0: the loops `reduction`), the sum
    so far after it."""
    zero = arith.ConstantOp(ir.IndexType.get(), 0).result
    first = None
    for d in reduction:
        at = arith.CmpIOp(arith.CmpIPredicate.eq, linalg.IndexOp(d).result, zero).result
        first = at if first is None else arith.AndIOp(first, at).result
    return arith.SelectOp(first, bias, out).result


def _clone_body(block: ir.Block, ins: list[ir.Value]) -> ir.Value:
    """Clone the ops of an elementwise op's body at the insertion point, its
    input arguments replaced by `ins`; returns the value it yields."""
    mapping = list(zip(list(block.arguments)[: len(ins)], ins))
    ops = [o.operation for o in block.operations]
    clone_ops(ops[:-1], mapping)
    y = ops[-1].operands[0]
    return next((new for old, new in mapping if old == y), y)


def finish(fn: ir.Operation, hoist: bool = True) -> int:
    """Rewrite each tile of a fused op in `fn` into the broadcast, the
    convolution and the epilogues on its L1 buffers (module doc), each
    broadcast epilogue input made a tile once per channel tile when `hoist`
    (`broadcast_tile`); returns how many tiles were rewritten."""
    tiles: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.generic" and FUSE in op.attributes:
            tiles.append(op)
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    for t in tiles:
        _unfold(t, hoist)
    return len(tiles)


def _unfold(t: ir.Operation, hoist: bool) -> None:
    """One tile of a fused op, as the ops it fuses (module doc)."""
    from nem.compile.errors import CompileError

    info = ir.DictAttr(t.attributes[FUSE])
    ins_of = list(ir.DenseI64ArrayAttr(info["ins"]))
    keep = [bool(k) for k in ir.DenseI64ArrayAttr(info["keep"])]
    weight = list(ir.DenseI64ArrayAttr(info["weight"]))
    form = FORMS[ir.StringAttr(info["conv"]).value]
    ins, outs = operand_segments(t)
    x, w, b, ys = ins[0], ins[1], ins[2], ins[3 : 3 + sum(ins_of)]
    if any(_box(w)[i] != weight[i] for i in form.weight_reduction):
        raise CompileError(
            "tile",
            f"internal: a tile of a fused convolution splits its reduction ({t.location}): {w.type} {weight}",
        )
    with t.location:
        ip = ir.InsertionPoint(t)
        for v in outs:  # O's tile starts from the bias, each P's is written whole
            for c in copies_of(v)[0]:
                _erase_copy(c, 0)
        unstaged: list[ir.Operation] = []  # (staging copies no longer read)
        freed: list[ir.Operation] = []  # (an out-of-place prologue's buffer)
        if ir.BoolAttr(info["pro"]).value:
            dropped, x, buffer = prologue_tile(t, ins[3 + sum(ins_of) :], hoist)
            unstaged += dropped
            freed += [buffer] if buffer is not None else []
        if isinstance(b.type, ir.MemRefType):
            generic([b], outs[0], [form.channel_map(form.rank)], ip, yield_first)
        else:  # (no bias: the unfused program's fill, on the tile)
            with ip:
                linalg.fill(b, outs=[outs[0]])
        if form.grouped or form.pool:  # (as the tiling generalizes the unfused one's)
            form.generic(x, w, outs[0], map_strings(t)[:2], ip)
        else:
            with ip:  # (the OpDSL builder takes the current insertion point only)
                linalg.conv_2d_nhwc_hwcf(
                    x,
                    w,
                    outs=[outs[0]],
                    strides=[int(v) for v in ir.DenseIntElementsAttr(info["strides"])],
                    dilations=[int(v) for v in ir.DenseIntElementsAttr(info["dilations"])],
                )
        results = list(list(body_of(t).operations)[-1].operands)  # (the yield's)
        prev = outs[0]
        made: list[Staged] = []
        for i, (step, maps) in enumerate(epilogue_steps(t)):
            mine, ys = ys[: len(maps)], ys[len(maps) :]
            args = _f_args(t, i, ins_of)
            others = []
            for y, m in zip(mine, maps):
                tile = None
                if m != identity_map(form.rank):
                    staged = staging_copy(y, t)
                    src = y if staged is None else staged.operands[0]
                    tile = broadcast_tile(src, m, outs[i + 1], ip)
                    if tile is not None and staged is not None:
                        unstaged.append(staged)
                if tile is not None:
                    made.append(tile)
                    y, m = tile.view.results[0], identity_map(form.rank)
                others.append((y, m))
            _epilogue_tile(prev, results[i], others, args, step, results[i + 1], outs[i + 1], ip)
            prev = outs[i + 1]
        for tile in made:  # (freed after the epilogues, hoisted with them)
            memref.DeallocOp(tile.alloc.results[0], ip=ip)
        for alloc in freed:
            memref.DeallocOp(alloc.results[0], ip=ip)
        if hoist:
            for tile in made:
                if hoist_op(tile.bcast) and not list(tile.offset.results[0].uses):
                    tile.offset.erase()  # (the view's moved with a constant of its own)
        for v, kept in zip(outs, keep):
            if not kept:
                for c in copies_of(v)[1]:
                    _erase_copy(c, 1)
    t.erase()
    for cp in unstaged:
        _drop_staging(cp)


def _drop_staging(cp: ir.Operation) -> None:
    """Erase a staging copy that nothing reads (`staging_copy`), its view,
    and its buffer's allocation and deallocation."""
    view = owner_op(cp.operands[1])
    assert view is not None
    alloc = owner_op(view.operands[0])
    assert alloc is not None
    cp.erase()
    view.erase()
    for u in users_of(alloc.results[0]):
        u.erase()
    alloc.erase()


def epilogue_steps(t: ir.Operation) -> list[tuple[list[ir.Operation], list[str]]]:
    """Each epilogue of the fused op (or tile) `t`: the ops of `t`'s body
    computing it from the previous result and its other inputs, and those
    inputs' maps over the output's 4 loops.  `finish` makes each epilogue's
    op of them, and the L1 measure (`l1_plan`) the scratch its tree takes
    (D-COMPILE-FUSE-L1)."""
    ins_of = list(ir.DenseI64ArrayAttr(ir.DictAttr(t.attributes[FUSE])["ins"]))
    block = body_of(t)
    results = list(list(block.operations)[-1].operands)  # (the yield's)
    rank = _rank(t)
    maps = [widen(m, rank) for m in map_strings(t)[3 : 3 + sum(ins_of)]]
    steps = []
    for i, n_in in enumerate(ins_of):
        args = _f_args(t, i, ins_of)
        steps.append((slice_of(block, results[i + 1], [results[i], *args]), maps[:n_in]))
        maps = maps[n_in:]
    return steps


def broadcast_inputs(t: ir.Operation) -> list[ir.Value]:
    """The epilogue inputs of the fused op (or tile) `t` read at a broadcast
    map (a per-channel scale or shift): `finish` makes each an L1 tile of
    the output's shape (`broadcast_tile`), once outside the tile loops
    its source does not vary in, which the L1 measure (`l1_plan`) counts."""
    ins_of = ir.DenseI64ArrayAttr(ir.DictAttr(t.attributes[FUSE])["ins"])
    ins = operand_segments(t)[0][3 : 3 + sum(ins_of)]
    rank = _rank(t)
    maps = [widen(m, rank) for m in map_strings(t)[3 : 3 + len(ins)]]
    return [y for y, m in zip(ins, maps) if m != identity_map(rank)]


def _rank(t: ir.Operation) -> int:
    """The rank of the fused op's (or tile's) outputs: its form's."""
    rank: int = ir.MemRefType(operand_segments(t)[1][0].type).rank
    return rank


def _erase_copy(copy: ir.Operation, side: int) -> None:
    """Erase a staging copy, and the subviews and allocation of its DDR
    operand (`copy.operands[side]`) that nothing uses any more."""
    v = copy.operands[side]
    copy.erase()
    owner = owner_op(v)
    while owner is not None and owner.name in ("memref.subview", "memref.alloc"):
        if list(v.uses):
            return
        src = owner.operands[0] if owner.name == "memref.subview" else None
        owner.erase()
        if src is None:
            return
        v, owner = src, owner_op(src)


def _box(v: ir.Value) -> list[int]:
    """The shape of the L1 buffer that `v` (a tile operand: the buffer or a
    subview of it, of dynamic sizes before canonicalization) is in."""
    owner = owner_op(v)
    while owner is not None and owner.name == "memref.subview":
        v = owner.operands[0]
        owner = owner_op(v)
    return list(ir.MemRefType(v.type).shape)


def _f_args(t: ir.Operation, i: int, ins_of: list[int]) -> list[ir.Value]:
    """The fused op's body arguments of epilogue `i`'s other inputs."""
    at = 3 + sum(ins_of[:i])
    return list(body_of(t).arguments)[at : at + ins_of[i]]


def _epilogue_tile(
    prev: ir.Value,
    prev_v: ir.Value,
    others: Sequence[tuple[ir.Value, str]],
    other_args: Sequence[ir.Value],
    step: list[ir.Operation],
    result: ir.Value,
    out: ir.Value,
    ip: ir.InsertionPoint,
) -> None:
    """Epilogue ops `step` of the fused body on the tile: reading `prev`'s
    tile (the body's `prev_v`) and `others` (tiles with their maps: the
    body's `other_args`) into `out`'s tile, yielding what the fused body's
    `result` is."""
    ident = identity_map(ir.MemRefType(out.type).rank)

    def body(args: list[ir.Value]) -> list[ir.Value]:
        mapping = list(zip([prev_v, *other_args], args))
        clone_ops(step, mapping)
        return [next((new for old, new in mapping if old == result), result)]

    generic([prev, *(v for v, _ in others)], out, [ident, *(m for _, m in others)], ip, body)
