"""`nem-inline-async-executes` (D-LOW-ASYNC-INLINE): `async.execute`,
`async.await` and the tokens NEM loops carry leave the conversion's table
for a pass of rewrite patterns of their own (issue 36 item 1), an execute's
body kept in a `nem_lowering.scope` (its scratch buffers its own).

The differential test across that rewrite: `lower-to-nem` prints the same
`.nem` and the same remarks or errors as the conversion with the table
before it (the handlers of `async_ops.py` and `loops.carried_tokens`, kept
below as they were, an execute's body a scratch scope of its own as a
`nem_lowering.scope`'s is, `_old_task_scope`) on every
lowering input with an async op and the async sweep's programs (its fixed
cases and random draws); on every other input the pass leaves the module
as it is.  And the pass is not vacuous: no async op is left in an entry
function that lowers."""

from __future__ import annotations

import random
import re
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import async_sources as src
import pytest
from async_params import AsyncProgram
from lowering_diff import (
    INPUTS,
    LIT_MLIR,
    MLIR_INPUTS,
    Outcome,
    assert_old_pipeline,
    before,
    entries_in,
    lower,
    parsed_entries,
)
from xdsl.dialects import affine
from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Operation, SSAValue

from nem.compile.lower import xdsl_context
from nem.dialect.scope_op import ScopeOp
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.lowering import loops, staging
from nem.passes.lowering.async_executes import InlineAsyncExecutesPass
from nem.passes.lowering.context import LoweringContext
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.memref_hints import in_kernel
from nem.passes.lowering.prepare import entry_function
from nem.passes.lowering.state import BlockState, Handler, Lowering
from nem.passes.lowering.tile_loops import is_tile_loop

ASYNC_OPS = (asy.ExecuteOp, asy.AwaitOp, asy.YieldOp)

# -- the conversion's handlers before the pass (async_ops.py, loops.carried_tokens) --

_MADE: weakref.WeakKeyDictionary[LoweringContext, set[SSAValue]] = weakref.WeakKeyDictionary()


def _made(ctx: LoweringContext) -> set[SSAValue]:
    """`LoweringContext.async_values` as it was: the tokens and values of
    the async ops lowered so far."""
    return _MADE.setdefault(ctx, set())


def _execute(lw: Lowering, op: asy.ExecuteOp, st: BlockState) -> None:
    ctx, made = lw.ctx, _made(lw.ctx)
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
        if d not in made:
            raise reject(op, "dependency token does not come from an async.execute")
    for v, arg in zip(op.body_operands, op.body_region.block.args):
        _operand(lw, op, v, payload_to=arg)
    lw.lower_block(op.body_region.block, st.builder)  # its scratch: `_old_task_scope`
    made.add(op.token)
    yielded = op.body_region.block.last_op
    for r, v in zip(op.body_results, yielded.operands if yielded is not None else ()):
        made.add(r)
        if isinstance(v.type, MemRefType) and r.uses:
            assert yielded is not None
            ctx.views[r] = ctx.view(v, yielded)
        elif isinstance(v.type, IndexType) and r.uses:
            assert yielded is not None
            ctx.env[r] = ctx.index(v, yielded)


def _old_task_scope(op: Operation) -> Operation | None:
    """`staging.task_scope` as the old table needs it (`ctx.executes`, then
    `ctx.task_scopes`, as they were): the innermost `async.execute`, whose
    body `_execute` lowers in place, or `nem_lowering.scope` holding `op`."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, asy.ExecuteOp | ScopeOp):
        parent = parent.parent_op()
    return parent


def _scope_readers() -> list[ModuleType]:
    """The lowering's modules that call `staging.task_scope`."""
    return [
        m
        for name, m in list(sys.modules.items())
        if name.startswith("nem.passes.lowering.")
        and getattr(m, "task_scope", None) is staging.task_scope
    ]


def _calling_task_scope() -> set[str]:
    """The lowering's modules whose source calls `task_scope(` (read from
    the files, apart from `_scope_readers`, which asks the imported
    modules): each must be patched for the old pipeline."""
    here = Path(staging.__file__).parent
    return {
        f"nem.passes.lowering.{f.stem}"
        for f in here.glob("*.py")
        if re.search(r"(?<![.\w])task_scope\(", f.read_text()) and f.stem != "staging"
    } | {staging.__name__}


def _lower_before(
    text: str, entry: str, rule: Callable[[Operation], Operation | None] = _old_task_scope
) -> Outcome:
    """`lower` with the old pipeline: the pass left out, the old table, an
    execute's body a scratch scope of its own (`rule`: `_old_task_scope`)."""
    with pytest.MonkeyPatch.context() as m:
        for mod in _scope_readers():
            m.setattr(mod, "task_scope", rule)
        return lower(text, entry, _before)


def _await(lw: Lowering, op: asy.AwaitOp, st: BlockState) -> None:
    _operand(lw, op, op.operand, payload_to=op.result)
    _made(lw.ctx).update(op.results)


def _operand(lw: Lowering, op: Operation, v: SSAValue, payload_to: SSAValue | None) -> None:
    ctx = lw.ctx
    if v not in _made(ctx):
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


def _for(lw: Lowering, op: affine.ForOp, st: BlockState) -> None:
    """`loops.lower_for` with `carried_tokens` as it was: a NEM loop's
    bounds, then its carried tokens checked and recorded, then the loop."""
    if loops.is_structural(op) or is_tile_loop(lw.ctx, op):
        loops.loop_bounds(op, lw.ctx.affine)
        made = _made(lw.ctx)
        for init, arg, res in zip(op.inits, op.body.block.args[1:], op.results):
            if not isinstance(arg.type, asy.TokenType):
                break  # `loops.carried_values` rejects it
            if init not in made:
                raise reject(
                    op,
                    "the initial value of this loop-carried token does not come "
                    "from a lowered async op",
                )
            made.update((arg, res))
    loops.lower_for(lw, op, st)


def _ignore(lw: Lowering, op: Operation, st: BlockState) -> None:
    pass


BEFORE: dict[type[Operation], Handler] = {
    **HANDLERS,
    asy.ExecuteOp: _execute,
    asy.AwaitOp: _await,
    asy.YieldOp: _ignore,
    affine.ForOp: _for,
}
"""The conversion's table before the pass: async ops lowered in place."""

_before = before(InlineAsyncExecutesPass, BEFORE)


def test_the_driver_no_longer_handles_them() -> None:
    assert not [cls for cls in ASYNC_OPS if cls in HANDLERS]


def test_the_comparison_is_with_the_old_pipeline() -> None:
    """The edited steps leave the pass out and convert with the old table,
    and some inputs with async ops lower: else the differential tests below
    would compare the new pipeline with itself, or errors with errors."""
    cases = [(p.read_text(), e) for p in WITH_ASYNC for e in parsed_entries(p.read_text())]
    assert_old_pipeline(_before, InlineAsyncExecutesPass, BEFORE, cases)
    assert {m.__name__ for m in _scope_readers()} == _calling_task_scope()
    # the old pipeline's readers ask the old scope rule, and it answers an
    # execute for ops of an execute's body while they lower (on the input as
    # parsed, before any pass, both rules answer alike: no scope op yet)
    answered: list[Operation] = []

    def counted(op: Operation) -> Operation | None:
        scope = _old_task_scope(op)
        answered.extend([scope] if scope is not None else [])
        return scope

    for text, e in [*cases, (IN_LOOP, "in_loop")]:
        _lower_before(text, e, counted)
    assert any(isinstance(scope, asy.ExecuteOp) for scope in answered)
    lowered = [
        (p.name, e)
        for p in WITH_ASYNC
        for e in parsed_entries(p.read_text())
        if lower(p.read_text(), e)[0] is not None
    ]
    assert len(lowered) >= 10, lowered


def _async_ops(text: str, entry: str) -> tuple[str, str, int]:
    """(module before the pass, module after it, executes, awaits and yields
    left in `entry` outside outlined kernels: groups are another pass's)."""
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    plain = str(module)
    InlineAsyncExecutesPass(entry).apply(ctx, module)
    left = sum(
        1
        for op in entry_function(module, entry).walk()
        if isinstance(op, ASYNC_OPS) and not in_kernel(op)
    )
    return plain, str(module), left


OWN = ("async_executes.mlir", "async_executes_errors.mlir")
"""This pass's own lit tests (their cases are checked there)."""
FILES = [p for p in MLIR_INPUTS + LIT_MLIR if p.name not in OWN]
WITH_ASYNC = [p for p in FILES if "async." in p.read_text()]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INPUTS.parent)))
def test_the_rewrite_changes_no_output(path: Path) -> None:
    """Every public function of every lowering input: left as it is when it
    has no async op (then its output cannot change), else lowered to the
    same `.nem`, remarks and errors with the pass and with the table before
    it; one that lowers keeps no async op."""
    text = path.read_text()
    found = entries_in(text)
    if not found:
        pytest.skip("no public function: a transform script (lit runs it)")
    for entry in found:
        if path not in WITH_ASYNC:
            plain, after, _ = _async_ops(text, entry)
            assert after == plain, entry
            continue
        new = lower(text, entry)
        assert new == _lower_before(text, entry), entry
        if new[0] is not None:
            assert _async_ops(text, entry)[2] == 0, entry


def _sweep_programs() -> list[AsyncProgram]:
    """The async sweep's fixed cases and its first twelve random draws of seed 36."""
    rng = random.Random(36)
    return src.fixed_programs() + [src.random_async_program(rng) for _ in range(12)]


SWEEP = _sweep_programs()


@pytest.mark.parametrize("prog", SWEEP, ids=lambda p: p.name)
def test_the_sweep_lowers_to_the_same_program(prog: AsyncProgram) -> None:
    """The async sweep's programs: the same `.nem`, remarks and errors; no
    async op is left before the conversion (the comparison is not vacuous)."""
    (entry,) = parsed_entries(prog.text)
    assert "async.execute" in prog.text
    new = lower(prog.text, entry)
    assert new[0] is not None, new[1]
    assert new == _lower_before(prog.text, entry)
    assert _async_ops(prog.text, entry)[2] == 0


IN_LOOP = """
func.func @in_loop(%X: memref<2x32xf32>, %Y: memref<2x32xf32>, %Z: memref<2x32xf32>, %W: memref<2x32xf32>) {
  %zero = arith.constant 0.0 : f32
  affine.for %j = 0 to 2 {
    %t0 = async.execute {
      affine.for %i = 0 to 16 {
        %x = affine.load %X[%j, %i] : memref<2x32xf32>
        %y = affine.load %Z[%j, %i] : memref<2x32xf32>
        %s = arith.addf %x, %y : f32
        %r = arith.maximumf %s, %zero : f32
        affine.store %r, %Z[%j, %i] : memref<2x32xf32>
      }
      async.yield
    }
    affine.for %i = 16 to 32 {
      %x = affine.load %X[%j, %i] : memref<2x32xf32>
      %y = affine.load %W[%j, %i] : memref<2x32xf32>
      %s = arith.addf %x, %y : f32
      %r = arith.maximumf %s, %zero : f32
      affine.store %r, %W[%j, %i] : memref<2x32xf32>
    }
    async.await %t0 : !async.token
  }
  return
}
"""
"""An execute and a main-stream nest in one loop body, each a fused
relu(x + y) raised through a scratch buffer of the same shape (`y` read
from the output, which the add may then not write before the relu reads
it: D-LOW-TREE-INPLACE)."""


def test_an_execute_in_a_loop_has_scratch_of_its_own() -> None:
    """The loop is one top-level statement, over which the conversion keeps
    its scratch buffers: the execute's nest and the main stream's take one
    each, with the pass (`staging.task_scope`) and with the old pipeline
    (`_old_task_scope`); with no scope they share one, so the comparison
    sees the scopes (the inputs above do not: their executes are top-level
    statements)."""
    new = lower(IN_LOOP, "in_loop")
    assert new == _lower_before(IN_LOOP, "in_loop")
    assert new[0] is not None and "DDR_tmp1 " in new[0]
    with pytest.MonkeyPatch.context() as m:
        for mod in _scope_readers():
            m.setattr(mod, "task_scope", lambda op: None)
        shared = lower(IN_LOOP, "in_loop")
    assert shared[0] is not None and "DDR_tmp0 " in shared[0] and "DDR_tmp1 " not in shared[0]
