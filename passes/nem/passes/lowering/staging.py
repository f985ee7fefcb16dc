"""Building a task before it is known to be legal (`Staging`), naming the
tasks that are kept, and the scratch buffers and regions the raised tasks
use: what every raising (compute, broadcasts, fills, windows, the escape
hatch) shares, below all of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from nem.dialect.attributes import RegionType
from nem.dialect.builder import Loc, NemBuilder
from nem.dialect.ops import ComputeOp, RegionOp, TaskOp
from nem.dialect.scope_op import ScopeOp
from nem.passes.lowering.context import LoweringContext, pipelined_loop
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
            o.detach()  # type: ignore[no-untyped-call]  # not annotated in xDSL 0.74
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


def commit_accumulating(
    ctx: LoweringContext,
    stg: Staging,
    st: BlockState,
    opcode: str,
    ins: Sequence[SSAValue],
    build: Callable[[], SSAValue],
) -> bool:
    """The accumulating form of `opcode` (`matmul in A, B, C out C`,
    `conv2d in X, W, Y out Y`: one rounding, D-LOW-ACCUM), whose inputs are
    `ins` and whose output is the last of them, when it has a variant: asked
    on the regions' element types before `build` builds the task, which is
    then committed with the staged ops and named.  Else nothing is built and
    False returned (the caller stages another form)."""
    elems = [_elem(v) for v in ins]
    if ctx.legality.why_not(opcode, elems, elems[-1:]) is not None:
        return False
    token = build()
    stg.commit(st)
    name_task(ctx, token, opcode)
    return True


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
    families (the device's effective set with `device=`), else why not: the
    question `TaskLegality.why_not` answers on its operands' element types."""
    op = token.owner
    assert isinstance(op, ComputeOp)
    elems = [_elem(v) for v in op.ins], [_elem(v) for v in op.outs]
    return ctx.legality.why_not(op.opcode, *elems, op.attrs.data.get("accum_type"))


def _elem(region: SSAValue) -> Attribute:
    t = region.type
    assert isinstance(t, RegionType) and t.typed  # the lowering builds typed regions
    return t.elem


def full_region(
    ctx: LoweringContext, b: NemBuilder, mem: SSAValue, anchor: Operation, layout: str | None = None
) -> tuple[SSAValue, View]:
    """The region of a whole memref view."""
    vw = ctx.view(mem, anchor)
    return region(ctx, b, vw, vw.base, vw.shape, vw.strides, anchor, layout), vw


def scratch(
    ctx: LoweringContext,
    st: BlockState,
    like: View,
    shape: list[int],
    anchor: Operation,
    ident: int = 0,
    elem: Attribute | None = None,
) -> View:
    """A hoisted scratch buffer for a partial result (D-LOW-ACCUM), in
    `like`'s memory, of `like`'s element type or `elem` (D-LOW-CAST-TREE),
    for a task lowered into the NEM block of `st` (in the slots of the
    pipelined loop holding it, `context.pipelined_loop`); `ident` tells
    apart the temporaries one computation needs at the same time.  The tasks of different `nem_lowering.scope`s (the `async.execute`s
    of the input, and the main stream) do not share one: they may run
    concurrently (D-LOW-ASYNC, D-LOW-ASYNC-INLINE)."""
    slots = ctx.slots(st.block)
    context = task_scope(anchor)
    elem = like.elem if elem is None else elem
    key = (
        like.level.data,
        tuple(shape),
        elem,
        slots,
        pipelined_loop(st.block),
        ident,
        context,
    )
    cached = ctx.scratch.get(key)
    if cached is not None and ctx.is_declared(cached.buffer):
        return cached
    name = ctx.names.scratch(f"{like.level.kind}_{'tmp' if ident else 'acc'}")
    buf = ctx.declare_buffer(
        name, like.level.data, buffer_bytes(shape, elem) * slots, anchor.location
    )
    n = 1
    for d in shape:
        n *= d
    base = ctx.slot_base(st.block, anchor, n)
    view = View(buf, like.level, elem, tuple(shape), row_major(shape), base, name)
    ctx.scratch[key] = view
    return view


def task_scope(op: Operation) -> Operation | None:
    """The innermost `nem_lowering.scope` holding `op`, whose tasks share
    no scratch buffer with the others (D-LOW-ASYNC-INLINE); None outside
    every scope.  Read from the IR: the conversion lowers each op in place,
    inside the scopes that hold it (D-LOW-WALK)."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, ScopeOp):
        parent = parent.parent_op()
    return parent


def drop_unused_scratch(ctx: LoweringContext) -> None:
    """Forget the scratch buffers no region uses (made for a plan that fell
    back), so the program declares only buffers it uses, and give their
    names back (`Names.release_scratch`, D-LOW-OUTLINE)."""
    dropped: set[str] = set()
    for key, vw in list(ctx.scratch.items()):
        if ctx.drop_if_unused(vw.buffer):
            del ctx.scratch[key]
            dropped.add(vw.name)
    ctx.names.release_scratch(dropped)


def copy_kind(token: SSAValue) -> str:
    """The name of a broadcast's task: `copy` for a transfer, else its opcode
    (`concat`, D-LOW-BCAST-CONCAT)."""
    op = token.owner
    return op.opcode if isinstance(op, ComputeOp) else "copy"
