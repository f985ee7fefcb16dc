"""Handlers of the `async` dialect (D-LOW-ASYNC, D-LOW-ASYNC-VALUE).

An `async.execute` body is lowered in place: its tasks join the enclosing
NEM block, in program order, which is one order MLIR allows (an execute
only depends on tokens defined before it).  What the tokens and awaits
order is data, and `nem-synthesize-deps` orders every conflicting access
from the happens-before model, so they lower to nothing: they are only
checked (groups and awaits of tokens, which only order, are gone before
the conversion: `nem-drop-async-groups`, D-LOW-ASYNC-GROUPS;
`nem-drop-token-awaits`, D-LOW-ASYNC-AWAITS).  `!async.value<memref>`
results alias the view of the memref the body yields; an `index` payload is
its affine value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Operation, SSAValue

from nem.frontends.upstream_dialects import async_dialect as asy
from nem.passes.lowering.diagnostics import reject

if TYPE_CHECKING:
    from nem.passes.lowering.state import BlockState, Handler, Lowering


def lower_execute(lw: Lowering, op: asy.ExecuteOp, st: BlockState) -> None:
    """The body's tasks at the execute's place; its scratch buffers are its
    own (`compute.scratch`), since MLIR may run it concurrently with others."""
    ctx = lw.ctx
    for i, r in enumerate(op.body_results):
        t = r.type
        assert isinstance(t, asy.ValueType)
        if r.uses and not isinstance(t.value_type, MemRefType | IndexType):
            raise reject(
                op,
                f"not supported: result #{i + 1} of type {r.type} is used; "
                "a scalar !async.value has no NEM equivalent (NEM tasks "
                "exchange data only through buffers)",
                "yield a memref holding the value (e.g. memref<1xf32>)",
            )
    for d in op.dependencies:
        if d not in ctx.async_values:
            raise reject(op, "dependency token does not come from an async.execute")
    for v, arg in zip(op.body_operands, op.body_region.block.args):
        async_operand(lw, op, v, payload_to=arg)
    ctx.executes.append(op)
    try:
        lw.lower_block(op.body_region.block, st.builder)
    finally:
        ctx.executes.pop()
    ctx.async_values.add(op.token)
    yielded = op.body_region.block.last_op
    for r, v in zip(op.body_results, yielded.operands if yielded is not None else ()):
        ctx.async_values.add(r)
        if isinstance(v.type, MemRefType) and r.uses:
            assert yielded is not None
            ctx.views[r] = ctx.view(v, yielded)
        elif isinstance(v.type, IndexType) and r.uses:
            assert yielded is not None
            ctx.env[r] = ctx.index(v, yielded)


def lower_await(lw: Lowering, op: asy.AwaitOp, st: BlockState) -> None:
    """Awaiting a value makes its result the payload's alias (an await of a
    token reaches here only without `nem-drop-token-awaits`: checked, then
    nothing)."""
    async_operand(lw, op, op.operand, payload_to=op.result)
    lw.ctx.async_values.update(op.results)


def async_operand(
    lw: Lowering, op: Operation, v: SSAValue, payload_to: SSAValue | None = None
) -> None:
    """Check that `v` comes from a lowered async op; an `!async.value`
    payload flows to `payload_to` (an await result or an execute body
    argument): the same NEM view (memref) or affine value (index)."""
    ctx = lw.ctx
    if v not in ctx.async_values:
        if isinstance(v.type, asy.ValueType):
            raise reject(op, f"not supported: an {v.type} that does not come from an async.execute")
        raise reject(op, "async operand does not come from a lowered async op")
    if payload_to is not None and isinstance(v.type, asy.ValueType):
        if v in ctx.views:
            ctx.views[payload_to] = ctx.views[v]
        elif v in ctx.env:
            ctx.env[payload_to] = ctx.env[v]
        elif payload_to.uses:
            raise reject(
                op,
                f"not supported: {v.type} (only memref and index payloads have a NEM equivalent)",
                "yield a memref holding the value (e.g. memref<1xf32>)",
            )


HANDLERS: dict[type[Operation], Handler] = {
    asy.ExecuteOp: lower_execute,
    asy.AwaitOp: lower_await,
}
