"""Building a task before it is known to be legal (`Staging`), naming the
tasks that are kept, and the scratch buffers and regions the raised tasks
use: what every raising (compute, broadcasts, fills, windows, the escape
hatch) shares, below all of them."""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from nem.dialect.attributes import RegionType
from nem.dialect.builder import Loc, NemBuilder
from nem.dialect.expressions import Evaluator
from nem.dialect.operand_binding import match_families
from nem.dialect.ops import ComputeOp, RegionOp, TaskOp
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.context import LoweringContext
from nem.passes.lowering.emit import region
from nem.passes.lowering.state import BlockState
from nem.passes.lowering.views import View, buffer_bytes, row_major


class Staging:
    """Ops built for a plan before it is known to be legal."""

    def __init__(self, loc: Loc) -> None:
        self.block = Block()
        self.builder = NemBuilder.at_end(self.block, loc)

    def commit(self, st: BlockState) -> None:
        """Move everything built here to the end of the NEM block."""
        Rewriter.inline_block(self.block, InsertPoint.at_end(st.block))

    def drop(self) -> None:
        for o in reversed(list(self.block.ops)):
            o.detach()
            o.erase(safe_erase=False)


def name_task(ctx: LoweringContext, token: SSAValue, kind: str) -> None:
    """Name a committed task's token `KIND<n>`."""
    task = token.owner
    assert isinstance(task, TaskOp)
    name = ctx.names.token(kind)
    task.properties["token"] = StringAttr(name)
    token.name_hint = name
    if isinstance(task, ComputeOp):
        _name_repeated_operand(ctx, task, name)


def commit_if_legal(
    ctx: LoweringContext, stg: Staging, st: BlockState, token: SSAValue, kind: str
) -> bool:
    """Commit the staged tasks and name `token`'s task when it matches a
    variant; else erase that task (the caller stages another form) and
    return False.  The accumulating forms (`matmul in A, B, C out C`,
    `conv2d in X, W, Y out Y`: one rounding, D-LOW-ACCUM) are tried so."""
    if illegal(ctx, token) is None:
        stg.commit(st)
        name_task(ctx, token, kind)
        return True
    op = token.owner
    assert isinstance(op, Operation)  # a task's token is its op's result
    op.detach()
    op.erase()
    return False


def _name_repeated_operand(ctx: LoweringContext, task: ComputeOp, name: str) -> None:
    """A `concat` reading one inline region as all of its several inputs (a
    broadcast's E copies, D-LOW-BCAST-CONCAT), and nowhere else, reads it as
    `let NAME_src = region(...)` written once before it
    (D-LOW-BCAST-LET): printed inline, each copy was a region that
    printing, parsing and every analysis of the text paid for again."""
    ins = list(task.ins)
    if task.opcode != "concat" or len(ins) < 2 or any(v is not ins[0] for v in ins):
        return
    reg = ins[0].owner
    if (
        not isinstance(reg, RegionOp)
        or reg.binding.data != "inline"
        or any(v is ins[0] for v in task.outs)
        or any(use.operation is not task for use in ins[0].uses)
    ):
        return
    let = ctx.names.fresh(f"{name}_src", "region")
    reg.properties["name"] = StringAttr(let)
    reg.properties["binding"] = StringAttr("let")
    reg.result.name_hint = let


def region_shape(region: SSAValue) -> list[int]:
    """The static shape of a typed region value."""
    t = region.type
    assert isinstance(t, RegionType) and t.shape_values is not None
    return list(t.shape_values)


def illegal(ctx: LoweringContext, token: SSAValue) -> str | None:
    """None when the candidate task matches a variant of its opcode's type
    families (the device's effective set with `device=`), else why not."""
    op = token.owner
    assert isinstance(op, ComputeOp)
    ins, outs = op.ins, op.outs
    types = tuple(v.type for v in (*ins, *outs))
    args = op.args
    ev = Evaluator() if args else None
    # the operand types by identity (`NemBuilder.region` builds one object per
    # distinct region type): hashing a RegionType runs Python code per
    # parameter, for every candidate task; the cache entry keeps the types
    # alive, so their ids are never reused while it holds them.  A type equal
    # to a cached one but another object only misses (and is matched).
    key = (
        op.opcode,
        len(ins),
        tuple(map(id, types)),
        # the attributes themselves (immutable, hashable): equal ones print alike
        tuple(sorted(op.attrs.data.items())),
        tuple(ev.static(a) for a in args) if ev is not None else (),
    )
    hit = ctx.legal_cache.get(key)
    if hit is not None:
        return hit[0]
    effective = None
    if ctx.device is not None:
        effective = ctx.device.effective_for_family(op.SPEC.families)
    why = None
    if not match_families(op, ctx.catalog, effective).ok:
        where = f"device {ctx.options.device}" if ctx.device is not None else "the NEM baseline"
        elems = "/".join(sorted({str(t.elem_name) for t in types if isinstance(t, RegionType)}))
        why = f"no {op.opcode} variant for {elems} on {where}"
    ctx.legal_cache[key] = (why, types)
    return why


def full_region(
    ctx: LoweringContext, b: NemBuilder, mem: SSAValue, anchor: Operation, layout: str | None = None
) -> tuple[SSAValue, View]:
    """The region of a whole memref view."""
    vw = ctx.view(mem, anchor)
    return region(ctx, b, vw, vw.base, vw.shape, vw.strides, anchor, layout), vw


def scratch(
    ctx: LoweringContext,
    like: View,
    shape: list[int],
    anchor: Operation,
    ident: int = 0,
    elem: Attribute | None = None,
) -> View:
    """A hoisted scratch buffer for a partial result (D-LOW-ACCUM), in
    `like`'s memory, of `like`'s element type or `elem` (D-LOW-CAST-TREE);
    `ident` tells apart the temporaries one computation needs at the same
    time.  The tasks of different `async.execute`s (and of the main stream)
    do not share one: they may run concurrently (D-LOW-ASYNC)."""
    slots = 2 if ctx.pipelined else 1
    context = ctx.executes[-1] if ctx.executes else None
    elem = like.elem if elem is None else elem
    key = (
        like.level.data,
        tuple(shape),
        elem,
        slots,
        ctx.pipelined[-1].key if slots == 2 else None,
        ident,
        context,
    )
    cached = ctx.scratch.get(key)
    if cached is not None and ctx.is_declared(cached.buffer):
        return cached
    name = ctx.names.fresh(None, f"{like.level.kind}_{'tmp' if ident else 'acc'}")
    buf = ctx.declare_buffer(
        name, like.level.data, buffer_bytes(shape, elem) * slots, anchor.location
    )
    n = 1
    for d in shape:
        n *= d
    base = Aff.atom(ctx.pipelined[-1]).mod(2).scale(n) if slots == 2 else Aff.c(0)
    view = View(buf, like.level, elem, tuple(shape), row_major(shape), base, name)
    ctx.scratch[key] = view
    return view


def drop_unused_scratch(ctx: LoweringContext) -> None:
    """Forget the scratch buffers no region uses (made for a plan that fell
    back), so the program declares only buffers it uses."""
    for key, vw in list(ctx.scratch.items()):
        if ctx.drop_if_unused(vw.buffer):
            del ctx.scratch[key]


def copy_kind(token: SSAValue) -> str:
    """The name of a broadcast's task: `copy` for a transfer, else its opcode
    (`concat`, D-LOW-BCAST-CONCAT)."""
    op = token.owner
    return op.opcode if isinstance(op, ComputeOp) else "copy"
