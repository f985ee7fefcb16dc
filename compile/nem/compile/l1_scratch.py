"""The L1 scratch tiles the lowering declares for one compute op of a tiled
op (decision D-COMPILE-L1): what `nem.compile.l1_plan` adds to the
buffers it measures.  The lowering's accumulators (D-LOW-ACCUM), the inner
values, splats and casts of an elementwise tree (D-LOW-CAST-TREE,
D-LOW-SPLAT), its broadcast operands (D-LOW-BCAST-OPERAND), and the trees
of a fused tile's epilogues and prologue (D-COMPILE-FUSE-L1), as
`fusion.finish` unfolds them.  Apart from `l1_plan`'s liveness and fit:
this is the model of one op's body, that of its buffers' lifetimes."""

from __future__ import annotations

import math

from mlir import ir

from nem.compile.conv_forms import RANK
from nem.compile.fusion import epilogue_steps
from nem.compile.fusion_prologue import in_place, prologue_parts, prologue_step, weight_roots
from nem.compile.fusion_tiles import FUSE
from nem.compile.linalg_ir import body_of, identity_map, operand_segments
from nem.compile.nest_ir import owner_op
from nem.compile.writers import root_of
from nem.dialect.semantics.clamp import clamp_matches_min_max
from nem.frontends.onnx.emit import scalar_value
from nem.passes.lowering.nest_analysis import MAX_OPS, RSQRT, in_place_operand

ALIGN = 64
"""The alignment of the L1 buffers the lowering declares (D-LOW-BUF)."""


REDUCING = ("conv", "matmul", "pooling", "reduce", "softmax")
"""Named linalg ops (by a part of their name) that accumulate into their output."""
COPIES = ("linalg.copy", "linalg.fill", "linalg.transpose", "linalg.broadcast", "linalg.yield")
"""Linalg ops the lowering turns into transfers and fills, with no scratch."""


def temporaries(op: ir.Operation) -> float:
    """How many output-sized scratch tiles the lowering declares for the
    compute op `op` (a linalg op, or an innermost affine loop writing L1),
    in units of the output's element size: one accumulator for a reduction
    (D-LOW-ACCUM: the product or window op into a temporary, then an add
    into the output); for an elementwise body, as `_tree_steps` makes them
    (passes/nem/passes/lowering/compute.py): one per op but the root, which
    writes the output, and those computing in place (`_tree`,
    D-LOW-TREE-INPLACE), one per distinct splat operand (its `clamp`,
    D-LOW-SPLAT), each of its op's result type (D-LOW-CAST-TREE), and one per
    broadcast input (D-LOW-BCAST-OPERAND).  A tile of a fused convolution
    (D-COMPILE-FUSE-L1) is the convolution's accumulator and then each
    epilogue's tree, as `fusion.finish` unfolds it; their scratch tiles are
    all declared, each of the output tile's size.  Its broadcast inputs
    are not scratch of the tile: `finish` broadcasts each into a buffer of
    its own, outside the loops it does not vary in (`measure` counts them
    there, `_broadcast_slots`)."""
    if FUSE in op.attributes:
        inside = _inside(op)
        ins, outs = operand_segments(op)
        trees = ([inner for inner in ops if _scalar(inner)] for ops, _ in epilogue_steps(op))
        # (an epilogue of no scalar op, a copy, declares no tile: an outside
        # user's Clip of no bounds after a Conv, session 62); epilogue i
        # reads the output tile i (and inputs) and writes tile i + 1
        return 1 + sum(
            _tree(body, inside, 0, _apart(outs[i + 1], [*ins, *outs[: i + 1]]))
            for i, body in enumerate(trees)
            if body
        )
    name = op.name
    if any(part in name for part in REDUCING):
        return 1
    if "iterator_types" in op.attributes and "reduction" in str(op.attributes["iterator_types"]):
        return 1
    body: list[ir.Operation] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        if _scalar(inner):
            body.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    if not body:
        return 1
    early = False
    if op.name.startswith("linalg."):
        ins, outs = operand_segments(op)
        early = len(outs) == 1 and _apart(outs[0], ins)
    return max(1.0, _tree(body, _inside(op), _broadcast_inputs(op), early))


def _apart(out: ir.Value, ins: list[ir.Value]) -> bool:
    """No input views the buffer `out` views: the lowering may compute a
    tree's chain below the root in the output (D-LOW-TREE-INPLACE)."""
    return all(root_of(v) != root_of(out) for v in ins)


def prologue_scratch(
    op: ir.Operation,
) -> tuple[ir.Value, float, list[ir.Value], ir.Operation | None] | None:
    """A fused tile's prologue (D-COMPILE-FUSE-L1), as `fusion.finish` will
    run it: (the input tile, the scratch in units of it, the per-channel
    inputs broadcast into tiles of their own, which the caller counts where
    their staging copies are, the copy staging the input tile when the
    prologue runs in place after it), None without one.  One op per part
    (`fusion_prologue.prologue_parts`): the largest part's tree, and a buffer of the
    input tile's size when not in place (`fusion_prologue.in_place`); where the
    inputs are no whole weights (`fusion_prologue.weight_roots`), one op at the tile
    into such a buffer, with the whole tree's scratch and its inputs
    broadcast per tile (D-LOW-BCAST-OPERAND)."""
    found = prologue_step(op)
    if found is None:
        return None
    step, root, maps, pro = found
    x = op.operands[0]
    inside = _inside(op)
    ys = [op.operands[a.arg_number] for a in pro]  # (a body argument per operand)
    if weight_roots(ys) is None:
        tree = [o for o in step if _scalar(o)]
        bcast = sum(1 for m in maps if m != identity_map(RANK))
        return x, 1 + (_tree(tree, inside, bcast) if tree else 0.0), [], None
    parts = prologue_parts(step, root, body_of(op).arguments[0], pro)
    trees = [
        tree
        for ops, _, _, _ in parts
        if (tree := [o for o in ops if _scalar(o)]) and not _relu(tree, inside)
    ]
    most = max((_tree(tree, inside | set(pro), 0) for tree in trees), default=0.0)
    copy = in_place(op, tiled=False)  # (measured before the canonicalization)
    return x, most + (copy is None), ys, copy


def _relu(tree: list[ir.Operation], inside: set[ir.Value]) -> bool:
    """`tree` is one `max(x, 0)`, which the lowering raises to one `relu`
    task with no splat tile (D-LOW-RAISE; its max ops: `MAX_OPS`)."""
    if len(tree) != 1 or tree[0].name not in MAX_OPS:
        return False
    return any(_float_const(v, inside) == 0.0 for v in tree[0].operands)


def _scalar(inner: ir.Operation) -> bool:
    """`inner` is a scalar op of an elementwise body (a tree node)."""
    return (
        inner.name.split(".")[0] in ("arith", "math")
        and inner.name != "arith.constant"
        and len(inner.results) == 1
        and not isinstance(inner.results[0].type, ir.IndexType)
    )


def _inside(op: ir.Operation) -> set[ir.Value]:
    """The values `op`'s regions define (block arguments, results of ops
    but constants): an operand not among them is a splat."""
    inside: set[ir.Value] = set()

    def visit(inner: ir.Operation) -> ir.WalkResult:
        for block_region in inner.regions:
            for block in block_region.blocks:
                inside.update(block.arguments)
        if inner.name != "arith.constant":
            inside.update(inner.results)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return inside


def _tree(
    body: list[ir.Operation], inside: set[ir.Value], broadcasts: int, early: bool = False
) -> float:
    """The scratch tiles of the elementwise tree `body` (its ops in order,
    the root last) with `broadcasts` broadcast inputs, in units of the
    root's element size (`temporaries`), as the lowering declares them
    (D-LOW-TREE-INPLACE): an op computes in place over an operand that is
    an op of the tree of its own type but no cast (`_in_place`), so only
    the others take a tile; with `early` (no input reads the output's
    buffer) the chain below the root computes in the output and its last
    op takes none either.  An `rsqrt` is the lowering's `div` of a splat 1
    by a `sqrt` (`nest_analysis.RSQRT`): its splat counts, as a constant 1
    does, and so does its `sqrt` at the root where nothing below takes it.  The
    0 of a `max(x, 0)` counts as a splat, although the lowering raises a
    `relu` (D-LOW-RAISE): one tile more than declared, never less."""
    out_bytes = _elem_bytes(body[-1].results[0].type)
    clamps = [_clamped(inner, inside) for inner in body]
    inner_max = [m for m in clamps if m is not None]  # (a clamp's: its tile still counted)
    mine = set(body)
    temps = sum(
        _elem_bytes(inner.results[0].type) for inner in body[:-1] if not _in_place(inner, mine)
    )
    bottom = body[-1]  # (the chain from the root, in place: its last op)
    while early and (below := _in_place(bottom, mine)) is not None:
        bottom = below
    if bottom != body[-1]:
        temps -= _elem_bytes(bottom.results[0].type)
    root = body[-1]
    if root.name == RSQRT and not early and _in_place(root, mine) is None:
        temps += out_bytes  # (its `sqrt` of a leaf, under the root's `div`)
    splats: set[tuple[object, int]] = set()  # one per value and type (`_tree_steps`)
    for inner, clamp in zip(body, clamps):
        if clamp is not None or any(inner == m for m in inner_max):
            continue  # (its bounds are attributes)
        width = _elem_bytes(inner.results[0].type)
        splats.update((_splat_key(v), width) for v in inner.operands if v not in inside)
        if inner.name == RSQRT:  # (its `div`'s splat 1, as a constant 1 is keyed)
            splats.add(
                (str(ir.FloatAttr.get(inner.results[0].type, 1.0, loc=inner.location)), width)
            )
    temps += sum(width for _, width in splats)
    temps += out_bytes * broadcasts
    return temps / out_bytes


def _in_place(op: ir.Operation, tree: set[ir.Operation]) -> ir.Operation | None:
    """The op of `tree` whose result `op` computes in place over, by the
    lowering's rule (`in_place_operand`); None.  A cast here: an op whose
    result type is not its first operand's (conservatively `select` and
    `cmpf` too: never fewer tiles than the lowering's)."""

    def cast(o: ir.Operation) -> bool:
        return not o.operands or o.operands[0].type != o.results[0].type

    owners = [owner_op(v) for v in op.operands]
    k = in_place_operand(
        cast(op),
        op.results[0].type,
        [(o.results[0].type, cast(o)) if o is not None and o in tree else None for o in owners],
    )
    return None if k is None else owners[k]


def _clamped(op: ir.Operation, inside: set[ir.Value]) -> ir.Operation | None:
    """The `maximumf` of `op` when `op` is `minimumf(maximumf(x, lo), hi)`
    (either operand order of each) of constant bounds, which the lowering
    raises to one `clamp` task with no splat tiles (D-LOW-CLAMP, as
    `nest_analysis.clamp_of`: where `clamp_matches_min_max`), else None.
    The max's result still counts a tile: one more than the lowering
    declares, never less."""
    if op.name != "arith.minimumf":
        return None
    for m, h in (op.operands, op.operands[::-1]):
        mx, hi = owner_op(m), _float_const(h, inside)
        if mx is None or mx.name != "arith.maximumf" or hi is None:
            continue
        for x, low in (mx.operands, mx.operands[::-1]):
            lo = _float_const(low, inside)
            if lo is None or _float_const(x, inside) is not None:
                continue
            return mx if clamp_matches_min_max(lo, hi) else None
    return None


def _float_const(v: ir.Value, inside: set[ir.Value]) -> float | None:
    """The value of float constant `v` (not one of the tree's own values),
    else None."""
    return None if v in inside else scalar_value(v)


def scratch(tile_bytes: int, temporaries: float) -> int:
    """Bytes of `temporaries` output-sized scratch tiles (`tile_bytes`, a
    multiple of ALIGN); tiles of other element sizes are each rounded up to
    ALIGN, as the lowering declares them."""
    if float(temporaries).is_integer():
        return tile_bytes * int(temporaries)
    return math.ceil(tile_bytes * temporaries) + ALIGN * math.ceil(temporaries)


def _splat_key(v: ir.Value) -> object:
    """A splat operand's identity as the lowering dedups them: a constant's
    value, any other value itself."""
    owner = v.owner
    if isinstance(owner, ir.Operation) or isinstance(owner, ir.OpView):
        op = owner.operation if isinstance(owner, ir.OpView) else owner
        if op.name == "arith.constant":
            return str(op.attributes["value"])
    return v


def _elem_bytes(t: ir.Type) -> int:
    """Bytes of a scalar type (i1 and narrower integers as one byte)."""
    width = (
        t.width
        if isinstance(t, (ir.IntegerType, ir.F16Type, ir.F32Type, ir.F64Type, ir.BF16Type))
        else 32
    )
    return max(1, width // 8)


def _broadcast_inputs(op: ir.Operation) -> int:
    """The operands of a linalg op that it broadcasts: their indexing map
    indexes fewer than all the loops (each copied into an output-sized
    scratch tile, D-LOW-BCAST-OPERAND; outputs index every loop)."""
    if "indexing_maps" not in op.attributes:
        return 0
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    return sum(1 for m in maps if len(_dims(m)) < m.n_dims)


def _dims(m: ir.AffineMap) -> set[int]:
    """The loops map `m` indexes by (a constant result, `[1, C, 1, 1]`'s
    0s, indexes none: a broadcast too)."""
    return {e.position for e in m.results if isinstance(e, ir.AffineDimExpr)}
