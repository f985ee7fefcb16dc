"""Software-pipelined loops (D-LOW-PIPE): a pure analysis.

`-affine-pipeline-data-transfer` turns a loop that starts a DMA and waits
for it into: the starts of the first iteration before the loop (the
prologue), a loop whose body first starts the DMAs of the next iteration
into the other half of `2 x ...` buffers (indexed `(iv ...) mod 2`) and then
does the rest of the work for the current one, and the rest of the body once
more after the loop (the epilogue).  `detect_pipeline` recognizes that
shape from the affine maps themselves (a slot index is a `mod 2`
sub-expression of a map result over the loop variable); `epilogue_is_body`
decides whether the epilogue is the body's last iteration op for op, so
that `nem-reroll-pipelines` (`reroll.py`) can roll the three pieces back
into one loop under `nem.max_in_flight = 2`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects import affine
from xdsl.dialects.builtin import AffineMapAttr, IndexType, MemRefType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from nem.frontends.upstream_dialects.affine_max import AffineMaxOp
from nem.frontends.upstream_dialects.dma import AffineDmaStartOp, AffineDmaWaitOp
from nem.passes.lowering.affine_algebra import (
    Aff,
    Var,
    eval_map,
    is_index_arith,
    resolve_index,
)


@dataclass(frozen=True)
class PipelinedLoop:
    """An `affine.for` as `affine-pipeline-data-transfer` leaves it."""

    loop: affine.ForOp
    prologue: tuple[Operation, ...]
    """The DMA starts of the first iteration, just before the loop."""
    epilogue: tuple[Operation, ...]
    """The rest of the body once more, just after the loop (index arithmetic aside)."""
    stage0: tuple[Operation, ...]
    """The DMA starts at the head of the body, for the next iteration."""


def _positions_of(value: SSAValue, operands: Sequence[SSAValue], m: AffineMap) -> set[AffineExpr]:
    """The dim and symbol expressions of map `m` bound to `value`."""
    out: set[AffineExpr] = set()
    for k, v in enumerate(operands):
        if v is value:
            out.add(AffineDimExpr(k) if k < m.num_dims else AffineSymExpr(k - m.num_dims))
    return out


def _subexprs(e: AffineExpr) -> Iterator[AffineExpr]:
    """`e` and its sub-expressions, without recursion (issue 11)."""
    todo = [e]
    while todo:
        x = todo.pop()
        yield x
        if isinstance(x, AffineBinaryOpExpr):
            todo += [x.lhs, x.rhs]


def _mentions(e: AffineExpr, leaves: set[AffineExpr]) -> bool:
    return any(x in leaves for x in _subexprs(e))


def _has_slot_index(e: AffineExpr, leaves: set[AffineExpr]) -> bool:
    """Whether `e` has a sub-expression `x mod 2` with `x` over `leaves`."""
    return any(
        isinstance(x, AffineBinaryOpExpr)
        and x.kind == AffineBinaryOpKind.Mod
        and isinstance(x.rhs, AffineConstantExpr)
        and x.rhs.value == 2
        and _mentions(x.lhs, leaves)
        for x in _subexprs(e)
    )


def starts_next_slot(o: AffineDmaStartOp, iv: SSAValue) -> bool:
    """Whether the DMA start `o` moves data into or out of one half of a
    `2 x ...` buffer chosen by `(iv ...) mod 2` (its first index)."""
    for v, m, ops in ((o.dst, o.dst_map, o.dst_operands), (o.src, o.src_map, o.src_operands)):
        t = v.type
        shape = t.get_shape() if isinstance(t, MemRefType) else ()
        amap = m.data
        if (
            shape
            and shape[0] == 2
            and amap.results
            and _has_slot_index(amap.results[0], _positions_of(iv, ops, amap))
        ):
            return True
    return False


def shape_signature(op: Operation) -> tuple[str, ...]:
    """The structure of an op (names of it and its nested ops but index
    arithmetic), to match a pipelined loop's epilogue with its body."""
    return tuple(o.name for o in op.walk() if not is_index_arith(o))


def detect_pipeline(loop: affine.ForOp) -> PipelinedLoop | None:
    """The pieces of `loop` when it was produced by affine-pipeline-data-transfer."""
    body = [o for o in loop.body.block.ops if not isinstance(o, affine.YieldOp)]
    iv = loop.body.block.args[0]
    stage0: list[Operation] = []
    for o in body:
        if isinstance(o, AffineDmaStartOp) and starts_next_slot(o, iv):
            stage0.append(o)
        else:
            break
    if not stage0:
        return None
    rest = body[len(stage0) :]
    parent = loop.parent_block()
    assert parent is not None
    ops = list(parent.ops)
    i = ops.index(loop)
    # the prologue: the same starts just before the loop, up to index
    # arithmetic (which -affine-loop-invariant-code-motion may leave there)
    pro = [o for o in ops[:i] if not is_index_arith(o)][-len(stage0) :]
    if len(pro) != len(stage0) or not all(
        isinstance(p, AffineDmaStartOp)
        and isinstance(s, AffineDmaStartOp)
        and (p.src, p.dst, p.tag) == (s.src, s.dst, s.tag)
        for p, s in zip(pro, stage0)
    ):
        return None
    # the epilogue: the rest of the body again, just after the loop, up to
    # index arithmetic, which may be interleaved, moved or gone (the last
    # iteration's value when the loop's upper bound is not a constant; what
    # -affine-loop-invariant-code-motion hoists); the re-rolled loop computes
    # its own indices, so only the other ops are matched (and skipped)
    core = [o for o in rest if not is_index_arith(o)]
    epi: list[Operation] = []
    for o in ops[i + 1 :]:
        if len(epi) == len(core):
            break
        if not is_index_arith(o):
            epi.append(o)
    if len(epi) == len(core) and all(
        shape_signature(a) == shape_signature(b) for a, b in zip(epi, core)
    ):
        return PipelinedLoop(loop, tuple(pro), tuple(epi), tuple(stage0))
    return None


def epilogue_is_body(
    rest: Sequence[Operation],
    epi: Sequence[Operation],
    iv: SSAValue,
    value: Aff,
    outer: Mapping[SSAValue, Aff],
) -> bool:
    """Whether the epilogue `epi` of a pipelined loop is the rest of its
    body `rest` at `iv = value` (the last iteration), as upstream's
    affine-pipeline-data-transfer emits it: op for op (index arithmetic
    aside), the same ops and attributes, every affine index of the same
    value, every other operand the same value or the corresponding one.
    Clean-ups after upstream (e.g. -canonicalize folding the last
    iteration's min bounds to constants) make them differ, and then the
    last iteration is lowered from the epilogue itself (D-LOW-PIPE).
    `outer`: the index values of the enclosing scopes (`reroll.Unknowns`)."""
    a_ops = [o for r in rest for o in r.walk() if not is_index_arith(o)]
    b_ops = [o for e in epi for o in e.walk() if not is_index_arith(o)]
    if len(a_ops) != len(b_ops):
        return False
    env_a: dict[SSAValue, Aff] = {iv: value}
    env_b: dict[SSAValue, Aff] = {}
    same: dict[SSAValue, SSAValue] = {}

    def bind(x: SSAValue, y: SSAValue) -> None:
        if isinstance(x.type, IndexType):  # a shared unknown for both sides
            env_a[x] = env_b[y] = Aff.atom(Var(None, "epilogue", 1))
        else:
            same[x] = y

    for a, b in zip(a_ops, b_ops):
        shape_a = [len(blk.args) for r in a.regions for blk in r.blocks]
        shape_b = [len(blk.args) for r in b.regions for blk in r.blocks]
        if (a.name, len(a.operands), len(a.results), shape_a) != (
            b.name,
            len(b.operands),
            len(b.results),
            shape_b,
        ) or _plain_attrs(a) != _plain_attrs(b):
            return False
        grouped: set[SSAValue] = set()
        for (ma, va), (mb, vb) in zip(index_groups(a), index_groups(b)):
            grouped.update(va)
            xs = [resolve_index(v, env_a, outer) for v in va]
            ys = [resolve_index(v, env_b, outer) for v in vb]
            if any(x is None for x in xs) or any(y is None for y in ys):
                return False
            try:
                if eval_map(ma, [x for x in xs if x is not None]) != eval_map(
                    mb, [y for y in ys if y is not None]
                ):
                    return False
            except ValueError:  # not affine (e.g. floordiv by -4096): the body's
                return False  # own lowering reports it at its op
        for x, y in zip(a.operands, b.operands):
            if x in grouped:
                continue
            if isinstance(x.type, IndexType):
                ix, iy = resolve_index(x, env_a, outer), resolve_index(y, env_b, outer)
                if ix is None or iy is None or ix != iy:
                    return False
            elif same.get(x, x) is not y:
                return False
        for x, y in zip(a.results, b.results):
            bind(x, y)
        for ra, rb in zip(a.regions, b.regions):
            for ba, bb in zip(ra.blocks, rb.blocks):
                for x, y in zip(ba.args, bb.args):
                    bind(x, y)
    return True


def index_groups(op: Operation) -> list[tuple[AffineMap, tuple[SSAValue, ...]]]:
    """The affine maps of an op with the operands each applies to."""
    if isinstance(op, affine.ForOp):
        return [
            (op.lowerBoundMap.data, tuple(op.lowerBoundOperands)),
            (op.upperBoundMap.data, tuple(op.upperBoundOperands)),
        ]
    if isinstance(op, affine.LoadOp | affine.StoreOp):
        assert op.map is not None
        return [(op.map.data, tuple(op.indices))]
    if isinstance(op, AffineDmaStartOp):
        return [
            (op.src_map.data, tuple(op.src_operands)),
            (op.dst_map.data, tuple(op.dst_operands)),
            (op.tag_map.data, tuple(op.tag_operands)),
        ]
    if isinstance(op, AffineDmaWaitOp):
        return [(op.tag_map.data, tuple(op.tag_operands))]
    if isinstance(op, affine.MinOp | AffineMaxOp | affine.ApplyOp):
        return [(op.map.data, tuple(op.operands))]
    return []


def _plain_attrs(op: Operation) -> dict[str, Attribute]:
    """An op's properties and attributes but its affine maps (compared by
    their values, `index_groups`) and operand segment sizes."""
    return {
        k: v
        for k, v in (*op.properties.items(), *op.attributes.items())
        if not isinstance(v, AffineMapAttr) and k != "operandSegmentSizes"
    }
