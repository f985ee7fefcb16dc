"""`nem-inline-async-executes` (D-LOW-ASYNC-INLINE): the last `async` ops
gone before the conversion (issue 36 item 1: the conversion's `async`
handlers as rewrite patterns, after `nem-drop-async-groups`,
D-LOW-ASYNC-GROUPS, and `nem-drop-token-awaits`, D-LOW-ASYNC-AWAITS).

    %t0, %va = async.execute -> !async.value<memref<64xf32, 2>> {
      %a = ...
      async.yield %a : memref<64xf32, 2>
    }
    %t1 = async.execute [%t0] (%va as %a2: !async.value<memref<64xf32, 2>>) { ...%a2... }
    %r = async.await %va : !async.value<memref<64xf32, 2>>
    -> %va = "nem_lowering.scope"() ({ %a = ... "nem_lowering.yield"(%a) }) : () -> memref<64xf32, 2>
       "nem_lowering.scope"() ({ ...%va... "nem_lowering.yield"() }) : () -> ()
       (uses of %r are uses of %va)

An execute's body is lowered in place: its tasks join the enclosing NEM
block, in program order, which is one order MLIR allows (an execute only
depends on tokens defined before it).  Its tasks may run concurrently with
the others, so they share no scratch buffer with them: the body stays in a
`nem_lowering.scope` (`scope_op`), which the conversion lowers in place
with scratch buffers of its own (`staging.task_scope`,
D-LOW-ASYNC).  What tokens order is data, and `nem-synthesize-deps` orders
every conflicting access from the happens-before model: an execute's
dependencies and the tokens a NEM loop carries (`iter_args` of
`!async.token`) are dropped.  `!async.value` payloads (D-LOW-ASYNC-VALUE)
are aliases: a body argument and an await's result are the value the
producing body yields, through the scope's result (a memref: the same NEM
view; an index: the same affine value).

The checks the conversion made as it lowered the async ops are made first,
in program order, on the scopes the conversion lowers op by op (the entry
function's block, NEM loops' bodies, execute bodies, a re-rolled loop's
last iteration), by `AsyncWork`, an analysis apart from the rewrites: a
used scalar payload, a dependency or async operand that no lowered async
op made, a loop-carried token whose initial value no lowered async op made;
each with the conversion's text at the same op.  A value the conversion
rejects before it reaches the op that uses it (a function argument, the
result of a loop it lowers as one compute task: D-LOW-CARRIED) is left to
the conversion, and so is the op using it.  Ops in other regions (under
`affine.if`, which the conversion rejects) and outlined kernels
(`nem_lowering.kernel`) are left as written.

The loops around a rewritten op are marked `nem_lowering.structural`, as
`nem-drop-token-awaits` marks them: an op holding async work is a NEM loop
(`structure.is_structural`), whatever the rewrite leaves in it.  The
patterns walk the entry function backwards, uses before definitions, inner
ops before the op holding them, so that each op's results have no use left
when it is replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import affine, scf
from xdsl.dialects.builtin import IndexType, MemRefType, ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from nem.dialect.scope_op import ScopeOp, ScopeYieldOp
from nem.dialect.view_op import REPLACES
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.prepare import entry_function, rewrite_once
from nem.passes.lowering.structure import STRUCTURAL, TILE_LOOP, is_structural

PAYLOADS = (MemRefType, IndexType)
"""The `!async.value` payloads with a NEM equivalent (a view, an affine value)."""


def has_payload(t: object) -> bool:
    """Whether `t` is an `!async.value` of a memref or an index."""
    return isinstance(t, asy.ValueType) and isinstance(t.value_type, PAYLOADS)


@dataclass
class AsyncWork:
    """The async ops of function `fn` the conversion reaches, checked in
    program order as it checked them (module docstring): `made` holds the
    tokens and values of the async ops checked so far (an execute's token
    and results, the tokens a NEM loop carries), `foreign` the values the
    conversion rejects before it reaches their users (function arguments,
    the tokens a loop it lowers as a compute task carries out), `rewrite`
    the ops to rewrite: executes, awaits, and NEM loops carrying tokens
    only; `structural` the loops around a rewritten op, which the pass
    marks (the analysis changes nothing)."""

    fn: Operation
    made: set[SSAValue] = field(default_factory=set[SSAValue])
    foreign: set[SSAValue] = field(default_factory=set[SSAValue])
    rewrite: set[Operation] = field(default_factory=set[Operation])
    structural: set[Operation] = field(default_factory=set[Operation])

    def check(self, block: Block) -> None:
        """Check the async ops of `block` and of the scopes in it that the
        conversion lowers op by op; raises the first failure."""
        for op in block.ops:
            if isinstance(op, asy.ExecuteOp):
                self._execute(op)
            elif isinstance(op, asy.AwaitOp):
                if self._operand(op, op.operand, op.result):
                    self.made.update(op.results)
                    self._rewritten(op)
                else:
                    self.foreign.update(op.results)
            elif isinstance(op, affine.ForOp):
                self._loop(op)
            elif isinstance(op, scf.ExecuteRegionOp):  # a re-rolled loop's last iteration
                self.check(op.region.block)

    def _execute(self, op: asy.ExecuteOp) -> None:
        for i, r in enumerate(op.body_results):
            t = r.type
            assert isinstance(t, asy.ValueType)
            if r.uses and not isinstance(t.value_type, PAYLOADS):
                raise reject(
                    op,
                    f"not supported: result #{i + 1} of type {r.type} is used; "
                    "a scalar !async.value has no NEM equivalent (NEM tasks "
                    "exchange data only through buffers)",
                    "yield a memref holding the value (e.g. memref<1xf32>)",
                )
        for d in op.dependencies:
            if d in self.foreign or self._argument(d):
                self.foreign.update(op.results)
                return
            if d not in self.made:
                raise reject(op, "dependency token does not come from an async.execute")
        for v, arg in zip(op.body_operands, op.body_region.block.args):
            if not self._operand(op, v, arg):
                self.foreign.update(op.results)
                return
        self.check(op.body_region.block)
        self.made.add(op.token)
        self.made.update(op.body_results)
        self._rewritten(op)

    def _operand(self, op: Operation, v: SSAValue, payload_to: SSAValue | None) -> bool:
        """Check that `v` comes from a checked async op, and that its
        payload, used through `payload_to`, has a NEM equivalent; False
        where `v` is left to the conversion (`foreign`)."""
        if v in self.foreign or self._argument(v):
            return False
        if v not in self.made:
            if isinstance(v.type, asy.ValueType):
                raise reject(
                    op, f"not supported: an {v.type} that does not come from an async.execute"
                )
            raise reject(op, "async operand does not come from a lowered async op")
        if (
            isinstance(v.type, asy.ValueType)
            and not has_payload(v.type)
            and payload_to is not None
            and payload_to.uses
        ):
            raise reject(
                op,
                f"not supported: {v.type} (only memref and index payloads have a NEM equivalent)",
                "yield a memref holding the value (e.g. memref<1xf32>)",
            )
        return True

    def _argument(self, v: SSAValue) -> bool:
        """Whether `v` is an argument of the function (not a memref: the
        conversion rejects the function first)."""
        return isinstance(v, BlockArgument) and v.owner.parent_op() is self.fn

    def _loop(self, op: affine.ForOp) -> None:
        """A NEM loop's carried tokens stand for completed work; one it
        lowers as a compute task carries its tokens out to a use it rejects
        (D-LOW-CARRIED); a value of another type carried by a NEM loop is
        the conversion's to reject (`loops.carried_values`)."""
        if not (is_structural(op) or TILE_LOOP in op.attributes):
            self.foreign.update(r for r in op.results if isinstance(r.type, asy.TokenType))
            return
        carried = list(zip(op.inits, op.body.block.args[1:], op.results))
        for init, _, _ in carried:
            if (
                not isinstance(init.type, asy.TokenType)
                or init in self.foreign
                or self._argument(init)
            ):
                # rejected by the conversion, before what it holds
                self.foreign.update(op.results)
                return
            if init not in self.made:
                raise reject(
                    op,
                    "the initial value of this loop-carried token does not come "
                    "from a lowered async op",
                )
        for _, arg, res in carried:
            self.made.update((arg, res))
        if carried:
            self.rewrite.add(op)
        self.check(op.body.block)

    def _rewritten(self, op: Operation) -> None:
        """`op` is rewritten: the loops around it are to be marked
        structural (as `nem-drop-token-awaits` marks them)."""
        self.rewrite.add(op)
        loop = op.parent_op()
        while loop is not None and loop is not self.fn and loop not in self.structural:
            if isinstance(loop, affine.ForOp):
                self.structural.add(loop)
            loop = loop.parent_op()


@dataclass
class InlineExecute(RewritePattern):
    """`async.execute` -> `nem_lowering.scope` holding its body, with one
    result per memref or index payload; its body arguments are the
    operands' payloads, its token gone."""

    work: AsyncWork

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: asy.ExecuteOp, rewriter: PatternRewriter) -> None:
        if op not in self.work.rewrite:
            return
        body = op.body_region.block
        yielded = body.last_op
        assert isinstance(yielded, asy.YieldOp)
        kept = [has_payload(r.type) for r in op.body_results]
        block = Block()
        rewriter.inline_block(body, InsertPoint.at_end(block), op.body_operands)
        out = ScopeYieldOp([v for v, k in zip(yielded.operands, kept) if k])
        out.attributes[REPLACES] = StringAttr(yielded.name)
        rewriter.replace(yielded, out)
        out.location = yielded.location
        scope = ScopeOp([v.type for v in out.operands], block)
        scope.attributes[REPLACES] = StringAttr(op.name)
        scope.location = op.location
        results = iter(scope.results)
        new: list[SSAValue | None] = [None]  # the token: its users are gone
        new += [next(results) if k else None for k in kept]
        # a token's use left is in an op the conversion never reaches (foreign)
        rewriter.replace(op, scope, new, safe_erase=False)


@dataclass
class ForwardAwait(RewritePattern):
    """`%r = async.await %v` -> nothing, `%r`'s uses `%v`'s (the payload the
    producing execute's scope gives it, once that execute is rewritten)."""

    work: AsyncWork

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: asy.AwaitOp, rewriter: PatternRewriter) -> None:
        if op not in self.work.rewrite:
            return
        rewriter.replace(op, (), [op.operand] if op.result is not None else [])


@dataclass
class DropCarriedTokens(RewritePattern):
    """A NEM loop carrying `!async.token`s only -> the loop carrying nothing."""

    work: AsyncWork

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: affine.ForOp, rewriter: PatternRewriter) -> None:
        if op not in self.work.rewrite:
            return
        body = op.body.block
        end = body.last_op
        assert isinstance(end, affine.YieldOp)
        rewriter.replace(end, type(end).build(operands=[[]]))
        for arg in list(body.args[1:]):
            rewriter.erase_block_argument(arg, safe_erase=False)
        props = {k: v for k, v in op.properties.items() if k != "operandSegmentSizes"}
        loop = type(op).build(
            operands=[op.lowerBoundOperands, op.upperBoundOperands, []],
            result_types=[[]],
            properties=props,
            attributes=dict(op.attributes),
            regions=[rewriter.move_region_contents_to_new_regions(op.body)],
        )
        loop.location = op.location
        rewriter.replace(op, loop, [None] * len(op.results), safe_erase=False)


@dataclass(frozen=True)
class InlineAsyncExecutesPass(ModulePass):
    """Rewrite the entry function's `async.execute`s into `nem_lowering.scope`s,
    forward its `async.await`s of values to their payloads and drop the
    tokens its NEM loops carry, outside outlined kernels, after checking
    them as the conversion did (D-LOW-ASYNC-INLINE).

    Options:
      entry: the func.func to lower (default: the first public one)
    """

    name = "nem-inline-async-executes"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = entry_function(op, self.entry)
        if not any(o.name.startswith("async.") for o in fn.walk()):
            return  # no async op: one walk, none of the analysis's
        work = AsyncWork(fn)
        work.check(fn.body.block)
        if not work.rewrite:
            return
        for loop in work.structural:
            loop.attributes[STRUCTURAL] = UnitAttr()
        # backwards, inner ops first: every use of a value rewritten before its definition
        rewrite_once(
            fn.body,
            InlineExecute(work),
            ForwardAwait(work),
            DropCarriedTokens(work),
            reverse=True,
            inner_first=True,
        )
