"""`nem-drop-async-groups` (D-LOW-ASYNC-GROUPS): `async` groups, which only
order, gone before the conversion, which then has no entry for them (issue 36
item 1: handlers of the conversion's table as rewrite patterns in a pass of
their own, after `nem-drop-memref-hints`, D-LOW-MEMREF-HINTS).

    %g = async.create_group %n : !async.group
    %i = async.add_to_group %t, %g : !async.token
    async.await_all %g
    -> nothing (the tasks of the execute of %t stay where they are)

What a group orders is data: `nem-synthesize-deps` orders every conflicting
access from the happens-before model (D-LOW-ASYNC), so an `await_all` says
nothing the program needs, and neither does the group it waits on.  The
conversion lowered the three to nothing after checking that their operands
came from lowered async ops; in the entry function every group and token
does (a token-typed function argument is already an error, and the ops that
make them, `async.execute` and a loop carrying tokens, are lowered before
their users), so the checks never failed on input that got that far.  A
group op inside a pure loop nest goes too: the conversion rejected the nest
(a token cannot be passed to a compute kernel), it now lowers as it would
without the op; the group orders nothing there either.

The one use the conversion could not give a meaning is of `add_to_group`'s
result, the token's position in the group: an index with no affine value,
an error at its user ("index operand ... is not an affine function ...").
The pass reports it at the `add_to_group` instead, saying why.

The patterns walk the entry function backwards, so that a group's
`create_group` is met after its users (`await_all` follows it, its
`add_to_group`s are between); one walk erases every group.  The functions
of outlined kernels (`nem_lowering.kernel`) are left as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)

from nem.frontends.upstream_dialects import async_dialect as asy
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.memref_hints import in_kernel
from nem.passes.lowering.prepare import entry_function, rewrite_once


class DropAwaitAll(RewritePattern):
    """`async.await_all %g` -> nothing."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: asy.AwaitAllOp, rewriter: PatternRewriter) -> None:
        if not in_kernel(op):
            rewriter.erase(op)


class DropAddToGroup(RewritePattern):
    """`%i = async.add_to_group %t, %g` -> nothing, `%i` unused; a use of
    `%i` is recorded in `used`, which the pass reports."""

    def __init__(self) -> None:
        self.used: list[asy.AddToGroupOp] = []

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: asy.AddToGroupOp, rewriter: PatternRewriter) -> None:
        if in_kernel(op):
            return
        if op.rank.uses:
            self.used.append(op)
            return
        rewriter.erase(op)


class DropCreateGroup(RewritePattern):
    """`%g = async.create_group %n` -> nothing, once `%g` has no use left."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: asy.CreateGroupOp, rewriter: PatternRewriter) -> None:
        if not op.result.uses and not in_kernel(op):
            rewriter.erase(op)


@dataclass(frozen=True)
class DropAsyncGroupsPass(ModulePass):
    """Erase the entry function's `async.create_group`, `async.add_to_group`
    and `async.await_all` ops, outside outlined kernels (D-LOW-ASYNC-GROUPS).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-drop-async-groups"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        add = DropAddToGroup()
        # backwards: a group's users before its create_group
        rewrite_once(
            entry_function(op, self.entry).body,
            DropAwaitAll(),
            add,
            DropCreateGroup(),
            reverse=True,
        )
        if add.used:
            first = add.used[-1]  # the walk went backwards: the first in program order
            raise reject(
                first,
                "not supported: the position async.add_to_group returns is used; "
                "NEM has no groups, what they order is synthesized from the data "
                "(D-LOW-ASYNC-GROUPS)",
                "drop the use of the result",
            )
