"""`nem-drop-token-awaits` (D-LOW-ASYNC-AWAITS): `async.await` of a token
leaves the conversion for a pass of rewrite patterns of its own (issue 36
item 1), the loops around it marked structural.

The differential test across that rewrite: `lower-to-nem` prints the same
`.nem` and the same remarks or errors with the pass as without it (the
conversion checked and dropped token awaits itself, `async_ops.lower_await`;
since D-LOW-ASYNC-INLINE, `nem-inline-async-executes` does, after it)
on every input the pass changes: the lowering's lit inputs and the async
sweep's programs (its fixed cases and random draws); on every other input
the pass leaves the module as it is, so the output cannot change.  And the
pass is not vacuous: every token await of those inputs is erased, and a loop
that held only an await and a pure nest stays a NEM loop."""

from __future__ import annotations

import random
from pathlib import Path

import async_sources as src
import pytest
from async_params import AsyncProgram
from lowering_diff import INPUTS, LIT_MLIR, MLIR_INPUTS, Steps, before, entries_in, lower
from xdsl.context import Context
from xdsl.dialects import affine
from xdsl.dialects.builtin import ModuleOp

from nem.compile.lower import xdsl_context
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.lowering.async_awaits import DropTokenAwaitsPass
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.memref_hints import in_kernel
from nem.passes.lowering.prepare import entry_function
from nem.passes.lowering.structure import STRUCTURAL

_before = before(DropTokenAwaitsPass, HANDLERS)
"""The steps before the pass: the table is the same (`lower_await` checked a
token await and lowered it to nothing), the pass left out."""


def _token_awaits(module: ModuleOp, entry: str) -> int:
    """The token awaits of `entry` the pass erases (outside outlined kernels)."""
    return sum(
        1
        for op in entry_function(module, entry).walk()
        if isinstance(op, asy.AwaitOp)
        and isinstance(op.operand.type, asy.TokenType)
        and not in_kernel(op)
    )


def _passed(text: str, erased: int | None = None) -> list[tuple[str, int, str, str]]:
    """(entry, token awaits before, module before the pass, module after it)
    for each public function of `text`; the awaits left after it are asserted
    none (all erased), or `erased` fewer than before."""
    out = []
    for entry in entries_in(text):
        ctx = xdsl_context()
        module = parse_mlir(ctx, text)
        plain, awaits = str(module), _token_awaits(module, entry)
        DropTokenAwaitsPass(entry).apply(ctx, module)
        left = 0 if erased is None else awaits - erased
        assert _token_awaits(module, entry) == left, entry
        out.append((entry, awaits, plain, str(module)))
    return out


OWN = "async_awaits.mlir"
"""This pass's own lit test (its marked loop is checked below, by hand)."""
FILES = [p for p in MLIR_INPUTS + LIT_MLIR if p.name != OWN]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INPUTS.parent)))
def test_the_rewrite_changes_no_output(path: Path) -> None:
    """Every public function of every lowering input: left as it is when it
    has no token await (then its output cannot change), else lowered to the
    same `.nem`, remarks and errors with the pass and without it."""
    text = path.read_text()
    for entry, awaits, plain, after in _passed(text):
        if not awaits:
            assert after == plain, entry
            continue
        assert lower(text, entry) == lower(text, entry, _before), entry


def _sweep_programs() -> list[AsyncProgram]:
    """The async sweep's programs that await a token: its fixed cases and the
    first twelve random draws of seed 36 that do."""
    progs = [p for p in src.fixed_programs() if "async.await %" in p.text]
    rng, drawn = random.Random(36), []
    while len(drawn) < 12:
        p = src.random_async_program(rng)
        if "async.await %" in p.text:
            drawn.append(p)
    return progs + drawn


SWEEP = _sweep_programs()


@pytest.mark.parametrize("prog", SWEEP, ids=lambda p: p.name)
def test_the_sweep_lowers_to_the_same_program(prog: AsyncProgram) -> None:
    """The async sweep's awaiting programs: the same `.nem`, remarks and
    errors; their token awaits are erased (when they have any, the
    comparison is not vacuous)."""
    ((entry, awaits, plain, after),) = _passed(prog.text)
    if not awaits:  # only awaits of values: nothing for the pass
        assert after == plain
        return
    after_nem, diags = lower(prog.text, entry)
    assert after_nem is not None, diags
    assert (after_nem, diags) == lower(prog.text, entry, _before)


def test_the_sweep_has_token_awaits() -> None:
    """Most of the sweep's programs above give the pass something to erase."""
    assert sum(1 for p in SWEEP if _passed(p.text)[0][1]) >= len(SWEEP) // 2


ONLY_AWAIT = """
func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
  %t = async.execute {
    memref.copy %x, %y : memref<64xf32> to memref<64xf32>
    async.yield
  }
  affine.for %i = 0 to 4 {
    async.await %t : !async.token
    affine.for %j = 0 to 16 {
      %v = affine.load %x[%i * 16 + %j] : memref<64xf32>
      %r = arith.addf %v, %v : f32
      affine.store %r, %y[%i * 16 + %j] : memref<64xf32>
    }
  }
  return
}
"""
"""A loop whose only async work is an await: a NEM loop around one task per
iteration (`is_structural`), not one compute task for the whole nest."""


def test_a_loop_that_held_an_await_stays_a_loop() -> None:
    """The await's loop is marked structural (its inner nest is not), and the
    program is the one the conversion made of it with the await: a NEM loop."""
    ctx = xdsl_context()
    module = parse_mlir(ctx, ONLY_AWAIT)
    DropTokenAwaitsPass().apply(ctx, module)
    outer, inner = (op for op in module.walk() if isinstance(op, affine.ForOp))
    assert STRUCTURAL in outer.attributes and STRUCTURAL not in inner.attributes
    nem, diags = lower(ONLY_AWAIT, "main")
    assert nem is not None and "loop i in [0..3]" in nem, diags
    assert (nem, diags) == lower(ONLY_AWAIT, "main", _before)
    unmarked, _ = lower(ONLY_AWAIT, "main", _without_marks)
    assert unmarked is not None and "loop i" not in unmarked  # the mark is what keeps it


class _EraseOnly(DropTokenAwaitsPass):
    """The pass without its marks: what erasing the awaits alone would do."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        super().apply(ctx, op)
        for o in op.walk():
            o.attributes.pop(STRUCTURAL, None)


def _without_marks(steps: Steps) -> Steps:
    return tuple(_EraseOnly(p.entry) if isinstance(p, DropTokenAwaitsPass) else p for p in steps)


CARRIED_OUT_OF_A_NEST = """
func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
  %t = async.execute {
    memref.copy %x, %y : memref<64xf32> to memref<64xf32>
    async.yield
  }
  %r = affine.for %i = 0 to 64 iter_args(%a = %t) -> (!async.token) {
    %v = affine.load %x[%i] : memref<64xf32>
    %w = arith.addf %v, %v : f32
    affine.store %w, %y[%i] : memref<64xf32>
    affine.yield %a : !async.token
  }
  async.await %r : !async.token
  return
}
"""
"""A token carried out of a pure nest: the conversion rejects the loop, naming
the await (D-LOW-CARRIED)."""


def test_an_await_the_conversion_rejects_stays() -> None:
    """The await of a token no NEM loop carries is left to the conversion,
    whose error names it (erased, the loop's error would be another)."""
    ((_, awaits, plain, after),) = _passed(CARRIED_OUT_OF_A_NEST, erased=0)
    assert awaits == 1 and after == plain
    nem, errors = lower(CARRIED_OUT_OF_A_NEST, "main")
    assert nem is None and "is used by async.await at 13:3" in errors[0][1]
    assert (nem, errors) == lower(CARRIED_OUT_OF_A_NEST, "main", _before)
