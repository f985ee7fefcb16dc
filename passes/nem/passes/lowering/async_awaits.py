"""`nem-drop-token-awaits` (D-LOW-ASYNC-AWAITS): `async.await` of a token,
which only orders, gone before the conversion (issue 36 item 1: the
conversion's `async` handlers as rewrite patterns, after
`nem-drop-async-groups`, D-LOW-ASYNC-GROUPS).

    %t = async.execute { ... }
    async.await %t : !async.token
    -> nothing (the execute's tasks stay where they are)

What an await orders is data: `nem-synthesize-deps` orders every conflicting
access from the happens-before model (D-LOW-ASYNC).  The conversion lowered
a token await to nothing after checking that the token came from a lowered
async op.  The pass erases the awaits of tokens for which that holds by
construction (`made_by_async_work`): an `async.execute`'s token, or one a
NEM loop carries; the conversion lowers the op that makes the token before
the await, binding it or failing first.  Any other token await stays for
the conversion, which reports it as it did (a token carried out of a pure
nest: the loop is rejected with the await as its reason, D-LOW-CARRIED; a
token-typed function argument: the function is).  An
await of an `!async.value` stays: its result is the payload's alias, which
`nem-inline-async-executes` forwards (D-LOW-ASYNC-INLINE).

A loop holding an await is a loop that holds async work: the conversion
makes it a NEM loop, never one compute task (`structure.is_structural`).
Erasing the await must not change that answer, so the pass marks every
loop around an erased await `nem_lowering.structural` (a fact of the IR,
which `is_structural` reads before looking into the loop): the loops keep
the structure they had.  Marking climbs from each await to the module, as
`in_kernel` does: the pass costs one walk of the entry function and the
depth of each await.  The functions of outlined kernels (`nem_lowering.kernel`)
are left as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.ir import BlockArgument, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from nem.frontends.upstream_dialects import async_dialect as asy
from nem.passes.lowering.memref_hints import in_kernel
from nem.passes.lowering.prepare import entry_function, rewrite_once
from nem.passes.lowering.structure import STRUCTURAL, is_structural


def made_by_async_work(token: SSAValue) -> bool:
    """Whether the conversion binds `token` when it lowers the op that makes
    it (or fails there first): an `async.execute`'s token, or a token a NEM
    loop carries (an `affine.for` result of a structural loop, or an
    iteration argument: a loop awaiting it is structural).  A token carried
    out of a pure nest is not: the conversion rejects that loop, the await
    being the reason it names (D-LOW-CARRIED), so the await stays.  A
    structural loop asked about is marked, so the next await of its tokens
    does not walk it again."""
    if isinstance(token, BlockArgument):
        return isinstance(token.owner.parent_op(), affine.ForOp)
    owner = token.owner
    if not isinstance(owner, affine.ForOp):
        return isinstance(owner, asy.ExecuteOp)
    if not is_structural(owner):
        return False
    owner.attributes[STRUCTURAL] = UnitAttr()  # the answer kept: one walk per loop
    return True


class DropTokenAwait(RewritePattern):
    """`async.await %t : !async.token` -> nothing; the loops around it
    marked `nem_lowering.structural`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: asy.AwaitOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.operand.type, asy.TokenType) or in_kernel(op):
            return
        if not made_by_async_work(op.operand):
            return
        loop = op.parent_op()
        while loop is not None:  # as deep as in_kernel climbs
            if isinstance(loop, affine.ForOp):
                loop.attributes[STRUCTURAL] = UnitAttr()
            loop = loop.parent_op()
        rewriter.erase(op)


@dataclass(frozen=True)
class DropTokenAwaitsPass(ModulePass):
    """Erase the entry function's `async.await`s of tokens, outside outlined
    kernels, marking the loops around them structural (D-LOW-ASYNC-AWAITS).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-drop-token-awaits"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_once(entry_function(op, self.entry).body, DropTokenAwait())
