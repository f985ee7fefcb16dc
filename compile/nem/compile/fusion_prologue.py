"""A convolution's prologue in L1 (D-COMPILE-FUSE-L1, "Before a
convolution"): the elementwise op that alone computes a dense 1x1
convolution's input, fused into its group (`fusion_groups._prologue`,
`fusion._build`), run on each input tile as `fusion.finish` unfolds it
(`prologue_tile`), and described for the L1 measure (`prologue_step`,
`prologue_parts`, `in_place`, `weight_roots`: `l1_scratch`)."""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import memref

from nem.compile import fusion_tiles
from nem.compile.conv_forms import RANK
from nem.compile.fusion_tiles import FUSE, Staged, broadcast_tile, copies_of, generic, l1_like
from nem.compile.hoist import hoist_op
from nem.compile.linalg_ir import body_of, clone_ops, identity_map, users_of
from nem.compile.nest_ir import owner_op


def compose_map(m: str, inner: str) -> str:
    """The map over the fused op's loops of a prologue input read at `m`
    over X's 4 dimensions, X being read at `inner` (`Form.input_map`):
    each of `m`'s dimensions replaced by `inner`'s expression of it, a
    constant kept (`fusion_groups._broadcast`'s forms)."""
    outer = ir.AffineMapAttr(ir.Attribute.parse(m)).value
    at = ir.AffineMapAttr(ir.Attribute.parse(inner)).value
    exprs = [
        at.results[e.position] if isinstance(e, ir.AffineDimExpr) else e for e in outer.results
    ]
    return str(ir.AffineMapAttr.get(ir.AffineMap.get(at.n_dims, 0, exprs)))


def prologue_tile(
    t: ir.Operation, pys: list[ir.Value], hoist: bool
) -> tuple[list[ir.Operation], ir.Value, ir.Operation | None]:
    """The prologue of fused tile `t` on its input tile: the elementwise ops
    of the prologue's body (`prologue_parts`), each per-channel input `pys`
    first broadcast from the function argument it was staged from
    (`weight_roots`) into a tile of its own, made once outside the tile
    loops.  In place right after the one copy staging the input tile where
    `in_place` finds it (so once per copy: where the copy is hoisted out of
    the output channels' loop, once for all of them; D-HAZ-INPLACE); else
    (a tile staged in pieces) at the tile, from the input tile into a new L1
    buffer.  Inputs that are no such weight (a constant over rows, sliced
    with the tile) make the whole body one op at the tile (`_out_of_place`).
    Returns the staging copies of `pys` that `t` alone read (to drop once
    `t` is gone), the input tile the convolution reads, and the buffer to
    free after the tile (or None)."""
    found = prologue_step(t)
    assert found is not None  # (`finish` calls it on a tile with a prologue)
    step, xv, maps, pro = found
    roots = weight_roots(pys)
    if roots is None:
        return [], *_out_of_place(t, pys, found)
    parts = prologue_parts(step, xv, body_of(t).arguments[0], pro)
    if not parts:  # (a prologue that copies its input: the tile is it)
        return _unread(pys, t), t.operands[0], None
    copy = in_place(t)
    x, buffer = t.operands[0], None
    if copy is not None:
        tile, at = copy.operands[1], ir.InsertionPoint(copy)
    else:
        at = ir.InsertionPoint(t)
        tile, buffer = _like(x, at, t)
    with t.location:  # (each before `at`, in order; the copy then before the parts)
        staged: list[Staged] = []
        for r, m in zip(roots, maps):
            b = broadcast_tile(r, m, tile, at)
            assert b is not None  # (onto a static tile: `in_place`, `_like`)
            staged.append(b)
        made = [
            generic(
                [
                    tile if k or copy is not None else x,
                    *(staged[j].view.results[0] for j in inputs),
                ],
                tile,
                [identity_map(RANK)] * (1 + len(inputs)),
                at,
                _part_body(ops, root, [prev, *(pro[j] for j in inputs)]),
            )
            for k, (ops, root, inputs, prev) in enumerate(parts)
        ]
        for b in staged:
            memref.DeallocOp(b.alloc.results[0], ip=at)
    if made and copy is not None:
        copy.move_before(made[0])
    for b in staged:  # (made once, outside the tile loops: their sources are weights)
        if hoist and hoist_op(b.bcast) and not list(b.offset.results[0].uses):
            b.offset.erase()
    return _unread(pys, t), (x if buffer is None else tile), buffer


def _unread(pys: list[ir.Value], t: ir.Operation) -> list[ir.Operation]:
    """The staging copies of the prologue inputs `pys` that tile `t` alone
    read: broadcast from their arguments instead, they go with `t`."""
    return [c for y in pys if (c := fusion_tiles.staging_copy(y, t)) is not None]


def _like(x: ir.Value, ip: ir.InsertionPoint, t: ir.Operation) -> tuple[ir.Value, ir.Operation]:
    """A new L1 buffer of the static shape of tile operand `x` at `ip`
    (`fusion_tiles.l1_like`): its view and its allocation."""
    from nem.compile.errors import CompileError

    with t.location:
        made = l1_like(x, ip)
    if made is None:
        raise CompileError(
            "tile", f"internal: a fused prologue's input tile is dynamic ({t.location})"
        )
    alloc, _, view = made
    return view.result, alloc.operation


def _out_of_place(
    t: ir.Operation,
    pys: list[ir.Value],
    found: tuple[list[ir.Operation], ir.Value, list[str], list[ir.Value]],
) -> tuple[ir.Value, ir.Operation]:
    """The prologue of tile `t` as one elementwise op before it, from the
    input tile and `pys`' tiles (at the prologue's maps over the input's 4
    dimensions: the tiling sliced each over the same box) into a new L1
    buffer of the input tile's shape; returns that buffer's view and its
    allocation."""
    step, xv, maps, pro = found
    x = t.operands[0]
    ip = ir.InsertionPoint(t)
    view, alloc = _like(x, ip, t)
    with t.location:
        generic(
            [x, *pys],
            view,
            [identity_map(RANK), *maps],
            ip,
            _part_body(step, xv, [body_of(t).arguments[0], *pro]),
        )
    return view, alloc


def in_place(t: ir.Operation, tiled: bool = True) -> ir.Operation | None:
    """The one copy staging the input tile of fused tile `t`, when its
    prologue can run in place right after it (a static tile: `finish`
    runs after the stage's canonicalization; on the tiled IR before it,
    `tiled` False, the shapes are not static yet), else None."""
    copy = staged_into(t.operands[0])
    if copy is None or (tiled and not ir.MemRefType(copy.operands[1].type).has_static_shape):
        return None
    return copy


def weight_roots(pys: list[ir.Value]) -> list[ir.Value] | None:
    """The function arguments a fused tile's prologue inputs `pys` were
    staged from, each whole (a weight that every tile reads whole: its map
    only over the input channels, which no tile splits), else None."""
    roots = [_root_argument(y) for y in pys]
    found = [r for r in roots if r is not None]
    return found if len(found) == len(roots) else None


def _part_body(
    ops: list[ir.Operation], root: ir.Value, old: list[ir.Value]
) -> Callable[[list[ir.Value]], list[ir.Value]]:
    """The body of a prologue part's op (`generic`'s `body`): `ops` cloned,
    the values `old` mapped to the block's arguments in order, yielding
    `root`'s clone."""

    def body(args: list[ir.Value]) -> list[ir.Value]:
        mapping = list(zip(old, args))
        clone_ops(ops, mapping)
        return [next((n for o, n in mapping if o == root), root)]

    return body


Part = tuple[list[ir.Operation], ir.Value, list[int], ir.Value]
"""A part of a prologue run as one elementwise op in place on the tile:
its body's ops, the value it yields, the per-channel inputs it reads (their
positions), and the value it starts from (the tile's element)."""


def prologue_parts(
    step: list[ir.Operation], root: ir.Value, start: ir.Value, pro: list[ir.Value]
) -> list[Part]:
    """The prologue `step` (computing `root` from `start` and the per-channel
    inputs `pro`) as the in-place ops a tile runs: one per op when each op
    reads the previous one's value once and no earlier one (a
    BatchNormalization's multiply and add, then a Relu), so that each needs
    L1 scratch for its own broadcast input only (the whole tree as one op
    takes a tile per inner value and per broadcast input: DenseNet-121's
    five input tiles shrank its convolutions' tiles, 52,772 -> 213,073
    tasks); else the whole tree as one op.  Each op computes what the
    unfused program's does, on the same values: bit-identical."""
    parts: list[Part] = []
    prev, made = start, [start]
    for o in step:
        operands = list(o.operands)
        alone = (
            len(o.results) == 1
            and o.results[0].type == start.type
            and sum(1 for v in operands if v == prev) == 1
            and not any(v != prev and any(v == m for m in made) for v in operands)
        )
        if not alone:
            return [(step, root, list(range(len(pro))), start)] if step else []
        inputs = [j for j, a in enumerate(pro) if any(v == a for v in operands)]
        parts.append(([o], o.results[0], inputs, prev))
        prev = o.results[0]
        made.append(prev)
    return parts


def has_prologue(t: ir.Operation) -> bool:
    """Whether `t` is a fused op (or tile) with a prologue."""
    return FUSE in t.attributes and ir.BoolAttr(ir.DictAttr(t.attributes[FUSE])["pro"]).value


def prologue_step(
    t: ir.Operation,
) -> tuple[list[ir.Operation], ir.Value, list[str], list[ir.Value]] | None:
    """The prologue of the fused op (or tile) `t`, None without one: the ops
    of `t`'s body computing X's element from the source's and the
    per-channel inputs' (empty for a copy), that element, those inputs'
    maps over X's 4 dimensions and their arguments of the body."""
    if not has_prologue(t):
        return None
    info = ir.DictAttr(t.attributes[FUSE])
    maps = [ir.StringAttr(m).value for m in ir.ArrayAttr(info["prologue"])]
    block = body_of(t)
    args = list(block.arguments)
    first = 3 + sum(ir.DenseI64ArrayAttr(info["ins"]))
    mul = next(
        o
        for o in block.operations
        if o.name == "arith.mulf" and any(v == args[1] for v in o.operands)
    )
    xv = mul.operands[0] if mul.operands[1] == args[1] else mul.operands[1]
    pro = args[first : first + len(maps)]
    return fusion_tiles.slice_of(block, xv, [args[0], *pro]), xv, maps, pro


def staged_into(x: ir.Value) -> ir.Operation | None:
    """The one `linalg.copy` writing the L1 buffer that tile operand `x` is
    (its view, or a subview of it), through the view or any subview of it
    (a peeled tile's), else None (none, or the tile staged in pieces)."""
    v = x
    while (owner := owner_op(v)) is not None and owner.name == "memref.subview":
        v = owner.operands[0]
    into, todo = [], [v]
    while todo:
        cur = todo.pop()
        into += copies_of(cur)[0]
        todo += [u.results[0] for u in users_of(cur) if u.name == "memref.subview"]
    return into[0] if len(into) == 1 else None


def _root_argument(y: ir.Value) -> ir.Value | None:
    """The function argument that the staged tile `y` (a per-channel
    prologue input, never tiled) was copied from whole, else None: the
    slice the copy reads has the argument's static shape (on the tiled IR
    before the canonicalization too, where its offsets are not constants
    yet)."""
    copy = staged_into(y)
    if copy is None:
        return None
    v = src = copy.operands[0]
    while (owner := owner_op(v)) is not None and owner.name == "memref.subview":
        v = owner.operands[0]
    whole = owner is None and ir.MemRefType(v.type).shape == ir.MemRefType(src.type).shape
    return v if whole else None
