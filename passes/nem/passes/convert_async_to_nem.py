"""`convert-async-to-nem`: turn the `async` ops that `convert-affine-to-nem`
kept (with NEM bodies) into NEM task dependencies (D-LOW-ASYNC).

- `%t = async.execute [%d...] { tasks; wait(...); async.yield }` is inlined
  at its place.  Inside the body, a top-level `wait(x)` does not block the
  program: it becomes a dependency of every later task of the body.  Every
  task of the body also depends on the *completion set* of each dependency
  execute (its tasks no other task of it depends on), so the body starts
  only after its dependencies finished, as upstream's semantics require.
- `async.await %t` -> `wait(completion set of t)`; `async.await_all %g` ->
  `wait(...)` of every token added to the group before it;
  `async.create_group` / `async.add_to_group` vanish.
- An execute body with a nested loop keeps the loop's own waits (tokens
  cannot leave a loop body), so it completes within program order.
- Tokens cannot leave a NEM loop body (TASK-03), so every loop body ends with
  a `wait` on the tasks of its inlined executes that nothing in the body
  waited for, and an await after the loop of an execute inside it (directly
  or through a group) has nothing left to wait for.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from nem.dialect.ops import LoopOp, ProgramOp, TaskOp, WaitOp
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.passes.lowering_core import reject


def _set_deps(task: TaskOp, deps: list[SSAValue]) -> None:
    from xdsl.dialects.builtin import DenseArrayBase, i32

    seg = task.properties["operandSegmentSizes"]
    sizes = list(seg.get_values())
    # deps is the third segment of transfer/store (dst, src, deps) and of compute
    # (ins, outs, deps, args)
    idx = 2
    start = sum(sizes[:idx])
    ops = list(task.operands)
    ops[start:start + sizes[idx]] = deps
    sizes[idx] = len(deps)
    task.operands = ops
    task.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, sizes)


ASYNC_OPS = (asy.ExecuteOp, asy.AwaitOp, asy.AwaitAllOp, asy.CreateGroupOp, asy.AddToGroupOp)


class AsyncLowerer:
    def __init__(self):
        self.done: dict[SSAValue, list[SSAValue]] = {}  # execute token -> completion set
        self.groups: dict[SSAValue, list[SSAValue]] = {}
        self.lowered: list[Operation] = []  # async ops to erase once all are lowered

    def run(self, prog: ProgramOp) -> None:
        for op in list(prog.walk()):
            if isinstance(op, ASYNC_OPS) and op.parent is not None:
                self.lower(op)
        for loop in [o for o in prog.walk() if isinstance(o, LoopOp)]:
            _complete_iterations(loop.block)
        for op in reversed(self.lowered):
            op.detach()
        for op in reversed(self.lowered):
            op.erase(safe_erase=False)

    def lower(self, op: Operation) -> None:
        block = op.parent_block()
        if isinstance(op, asy.ExecuteOp):
            self.inline(op, block)
        elif isinstance(op, asy.AwaitOp):
            self._wait(block, op, self.done.get(op.operand, []))
        elif isinstance(op, asy.CreateGroupOp):
            self.groups[op.result] = []
        elif isinstance(op, asy.AddToGroupOp):
            self.groups.setdefault(op.group, []).extend(self.done.get(op.operand, []))
        else:
            self._wait(block, op, self.groups.get(op.operand, []))
        self.lowered.append(op)

    def inline(self, op: asy.ExecuteOp, block) -> None:
        if any(not isinstance(u.operation, asy.ExecuteOp | asy.AwaitOp | asy.AddToGroupOp)
               for u in op.token.uses):
            raise reject(op, "the token of this async.execute has an unsupported use")
        gating: list[SSAValue] = []
        for d in op.dependencies:
            gating += self.done.get(d, [])
        deps = list(gating)
        tasks: list[TaskOp] = []
        for inner in list(op.body_region.block.ops):
            inner.detach()
            if isinstance(inner, asy.YieldOp | WaitOp):
                if isinstance(inner, WaitOp):
                    gating += [t for t in inner.tokens if t not in gating]
                inner.erase()
                continue
            block.insert_op_before(inner, op)
            for t in inner.walk():
                if isinstance(t, TaskOp) and gating:
                    _set_deps(t, list(t.deps) + [g for g in gating if g not in t.deps])
            if isinstance(inner, TaskOp):
                tasks.append(inner)
        used = {id(d) for t in tasks for d in t.deps}
        done = [t.results[0] for t in tasks if id(t.results[0]) not in used]
        self.done[op.token] = done or deps

    @staticmethod
    def _wait(block, op, toks) -> None:
        # tokens of a loop body that `op` is not in were waited at the end of
        # that body (`_complete_iterations`)
        toks = [t for t in dict.fromkeys(toks) if _visible(t, op)]
        if toks:
            w = WaitOp(toks, [])
            w.location = op.location
            block.insert_op_before(w, op)


def _visible(tok: SSAValue, at: Operation) -> bool:
    """Whether the block defining `tok` encloses `at`."""
    home = tok.owner.parent_block()
    cur: Operation | None = at
    while cur is not None:
        if cur.parent_block() is home:
            return True
        cur = cur.parent_op()
    return False


def _complete_iterations(body) -> None:
    """Wait, at the end of a loop body, for its asynchronous tasks that no
    wait and no other task of the body consume (tokens cannot leave the body)."""
    consumed = set()
    for o in body.ops:
        if isinstance(o, WaitOp):
            consumed.update(id(t) for t in o.tokens)
        elif isinstance(o, TaskOp):
            consumed.update(id(t) for t in o.deps)
            if o.is_sync:
                consumed.add(id(o.results[0]))
    open_ = [o.results[0] for o in body.ops
             if isinstance(o, TaskOp) and id(o.results[0]) not in consumed]
    if open_:
        w = WaitOp(open_, [])
        w.location = body.last_op.location if body.last_op is not None else None
        body.add_op(w)


@dataclass(frozen=True)
class ConvertAsyncToNemPass(ModulePass):
    """Turn the async ops left by convert-affine-to-nem into NEM task dependencies and waits."""

    name = "convert-async-to-nem"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for prog in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            AsyncLowerer().run(prog)
        for o in op.walk():
            if o.name.startswith("async."):
                raise reject(o, "async op left after convert-async-to-nem "
                             "(run convert-affine-to-nem first)")
