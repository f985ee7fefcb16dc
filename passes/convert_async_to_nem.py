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
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from nem.dialect.ops import ProgramOp, TaskOp, WaitOp
from nem.frontends.mlir import async_dialect as asy
from nem.passes.lowering_core import reject


def _add_deps(task: TaskOp, extra: list[SSAValue]) -> None:
    have = list(task.deps)
    new = have + [t for t in extra if t not in have]
    if len(new) == len(have):
        return
    task.operands = [*task.operands[: len(task.operands) - len(have) - _n_args(task)], *new,
                     *_args(task)] if False else task.operands
    # rebuild the variadic segment: operands are [..., deps, args?]
    _set_deps(task, new)


def _n_args(task) -> int:
    return len(task.args) if hasattr(task, "args") else 0


def _args(task):
    return list(task.args) if hasattr(task, "args") else []


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


class AsyncLowerer:
    def __init__(self):
        self.done: dict[SSAValue, list[SSAValue]] = {}  # execute token -> completion set
        self.groups: dict[SSAValue, list[SSAValue]] = {}

    def run(self, prog: ProgramOp) -> None:
        for op in list(prog.walk()):
            if isinstance(op, asy.ExecuteOp | asy.AwaitOp | asy.AwaitAllOp
                          | asy.CreateGroupOp | asy.AddToGroupOp):
                if op.parent is None:
                    continue
                self.lower(op)

    def lower(self, op: Operation) -> None:
        block = op.parent_block()
        if isinstance(op, asy.ExecuteOp):
            deps: list[SSAValue] = []
            for d in op.dependencies:
                deps += self.done.get(d, [])
            body = op.body_region.block
            gating: list[SSAValue] = list(deps)
            tasks: list[TaskOp] = []
            for inner in list(body.ops):
                inner.detach()
                if isinstance(inner, asy.YieldOp):
                    inner.erase()
                    continue
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
            self.done[op.token] = done or list(deps)
            if op.token.uses and any(not isinstance(u.operation, asy.ExecuteOp | asy.AwaitOp
                                                    | asy.AddToGroupOp)
                                     for u in op.token.uses):
                raise reject(op, "the token of this async.execute has an unsupported use")
            for u in list(op.token.uses):
                if isinstance(u.operation, asy.ExecuteOp):
                    pass  # resolved through self.done when that execute is lowered
            self._erase_later(op)
            return
        if isinstance(op, asy.AwaitOp):
            toks = self.done.get(op.operand, [])
            self._wait(block, op, toks)
            return
        if isinstance(op, asy.CreateGroupOp):
            self.groups[op.result] = []
            self._erase_later(op)
            return
        if isinstance(op, asy.AddToGroupOp):
            self.groups.setdefault(op.group, []).extend(self.done.get(op.operand, []))
            self._erase_later(op)
            return
        if isinstance(op, asy.AwaitAllOp):
            self._wait(block, op, self.groups.get(op.operand, []))

    pending_erase: list[Operation]

    def _erase_later(self, op: Operation) -> None:
        self.__dict__.setdefault("pending_erase", []).append(op)

    def _wait(self, block, op, toks) -> None:
        if toks:
            w = WaitOp(list(dict.fromkeys(toks)), [])
            w.location = op.location
            block.insert_op_before(w, op)
        self._erase_later(op)

    def finish(self) -> None:
        for op in reversed(self.__dict__.get("pending_erase", [])):
            for r in op.results:
                for u in list(r.uses):
                    pass
            op.detach()
        for op in reversed(self.__dict__.get("pending_erase", [])):
            op.erase(safe_erase=False)


@dataclass(frozen=True)
class ConvertAsyncToNemPass(ModulePass):
    name = "convert-async-to-nem"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for prog in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            al = AsyncLowerer()
            al.run(prog)
            al.finish()
        for o in op.walk():
            if o.name.startswith("async."):
                raise reject(o, "async op left after convert-async-to-nem "
                             "(run convert-affine-to-nem first)")
