"""`nem-drop-async-groups` (D-LOW-ASYNC-GROUPS): `async.create_group`,
`async.add_to_group` and `async.await_all` leave the conversion's table for a
pass of rewrite patterns of their own (issue 36 item 1).

The differential test across that rewrite: `lower-to-nem` prints the same
`.nem` and the same remarks or errors as the conversion with the table before
it (the three handlers below, no pass; their operand checks are gone with
the conversion's async handlers) on every input that has a group: the
lowering's lit inputs and the async sweep's programs (its fixed cases and
random draws); on every other input the pass leaves the module as it is, so
the output cannot change.  And the pass is not vacuous (every group of those
inputs is erased), and the one use the conversion could not lower, of
`add_to_group`'s result, is reported at the op."""

from __future__ import annotations

import random
from pathlib import Path

import async_sources as src
import pytest
from async_params import AsyncProgram
from lowering_diff import (
    INPUTS,
    LIT_MLIR,
    MLIR_INPUTS,
    assert_old_pipeline,
    before,
    entries,
    entries_in,
    lower,
    parsed_entries,
)
from xdsl.ir import Operation

from nem.compile.lower import xdsl_context
from nem.frontends.upstream_dialects import async_dialect as asy
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.lowering.async_groups import DropAsyncGroupsPass
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.state import BlockState, Handler, Lowering

GROUP_OPS = (asy.CreateGroupOp, asy.AddToGroupOp, asy.AwaitAllOp)


# -- the conversion's handlers before the pass (the table's entries it replaced) --
# Their checks that the operands came from lowered async ops never failed on
# input that got that far (`async_groups`' docstring); the conversion's record
# of lowered async ops is gone with its async handlers (`nem-inline-async-executes`,
# D-LOW-ASYNC-INLINE, which leaves group ops as they are), so they lower to nothing.


def _create_group(lw: Lowering, op: asy.CreateGroupOp, st: BlockState) -> None:
    lw.ctx.index(op.size, op)


def _add_to_group(lw: Lowering, op: asy.AddToGroupOp, st: BlockState) -> None:
    pass


def _await_all(lw: Lowering, op: asy.AwaitAllOp, st: BlockState) -> None:
    pass


BEFORE: dict[type[Operation], Handler] = {
    **HANDLERS,
    asy.CreateGroupOp: _create_group,
    asy.AddToGroupOp: _add_to_group,
    asy.AwaitAllOp: _await_all,
}
"""The conversion's table before the pass: groups lowered to nothing (a group's size an index value)."""

_before = before(DropAsyncGroupsPass, BEFORE)


def test_the_driver_no_longer_handles_them() -> None:
    assert not [cls for cls in GROUP_OPS if cls in HANDLERS]


def _sweep_programs() -> list[AsyncProgram]:
    """The async sweep's programs that complete by groups: its fixed cases and
    the first twelve random draws of seed 36 that do."""
    progs = [p for p in src.fixed_programs() if p.params.completion.startswith("group")]
    rng, drawn = random.Random(36), []
    while len(drawn) < 12:
        p = src.random_async_program(rng)
        if p.params.completion.startswith("group"):
            drawn.append(p)
    return progs + drawn


SWEEP = _sweep_programs()
OWN = "async_groups.mlir"
"""This pass's own lit test: its used position is an error of its own."""
FILES = [p for p in MLIR_INPUTS + LIT_MLIR if p.name != OWN]
WITH_GROUPS = [p for p in FILES if any(cls.name in p.read_text() for cls in GROUP_OPS)]


def _grouped(text: str) -> list[tuple[str, str, str]]:
    """(entry, module before the pass, module after) for each public function of `text`."""
    out = []
    for entry in entries_in(text):
        ctx = xdsl_context()
        module = parse_mlir(ctx, text)
        plain = str(module)
        DropAsyncGroupsPass(entry).apply(ctx, module)
        out.append((entry, plain, str(module)))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INPUTS.parent)))
def test_without_groups_the_pass_changes_nothing(path: Path) -> None:
    """An input with no group op is left as it is (so its output cannot change);
    one with groups loses them all."""
    has_groups = path in WITH_GROUPS
    rows = _grouped(path.read_text())
    if not rows:
        pytest.skip("no public function: a transform script (lit runs it)")
    for entry, plain, after in rows:
        if not has_groups:
            assert after == plain, entry
        else:
            assert not any(cls.name in after for cls in GROUP_OPS), entry


def test_the_comparison_is_with_the_old_pipeline() -> None:
    """`_before` leaves the pass out and converts with the old table, some
    inputs hold group ops, and some of their entries lower: else the
    differential tests below would compare the new pipeline with itself, or
    nothing, or errors with errors (review of session 44: this file alone
    of the lowering differentials did not check it)."""
    assert [p.name for p in WITH_GROUPS] == ["async_tiles_group.mlir"]
    cases = [(p.read_text(), e) for p in WITH_GROUPS for e in parsed_entries(p.read_text())]
    assert_old_pipeline(_before, DropAsyncGroupsPass, BEFORE, cases)
    assert any(lower(t, e)[0] is not None for t, e in cases)
    assert any(lower(t, e, _before)[0] is not None for t, e in cases)


@pytest.mark.parametrize("path", WITH_GROUPS, ids=lambda p: p.name)
def test_the_rewrite_changes_no_output(path: Path) -> None:
    """With the pass and with the table before it: the same `.nem`, remarks and errors."""
    text = path.read_text()
    for entry in entries(path):
        assert lower(text, entry) == lower(text, entry, _before), entry


@pytest.mark.parametrize("prog", SWEEP, ids=lambda p: p.name)
def test_the_sweep_lowers_to_the_same_program(prog: AsyncProgram) -> None:
    """The async sweep's grouped programs: the same `.nem`, remarks and errors;
    their groups are erased (the comparison is not vacuous)."""
    assert "async.await_all" in prog.text
    (entry,) = parsed_entries(prog.text)
    ((_, _, after),) = _grouped(prog.text)
    assert not any(cls.name in after for cls in GROUP_OPS)
    after_nem, diags = lower(prog.text, entry)
    assert after_nem is not None, diags
    assert (after_nem, diags) == lower(prog.text, entry, _before)


GROUPED = """
func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
  %c1 = arith.constant 1 : index
  %g = async.create_group %c1 : !async.group
  %t = async.execute {
    memref.copy %x, %y : memref<64xf32> to memref<64xf32>
    async.yield
  }
"""
"""A function with a group and an execute, the two cases below go on (lines 1-8)."""

USED = (
    GROUPED
    + """  %i = async.add_to_group %t, %g : !async.token
  %s = memref.subview %x[%i] [8] [1] : memref<64xf32> to memref<8xf32, strided<[1], offset: ?>>
  %d = memref.subview %y[0] [8] [1] : memref<64xf32> to memref<8xf32, strided<[1]>>
  memref.copy %s, %d : memref<8xf32, strided<[1], offset: ?>> to memref<8xf32, strided<[1]>>
  async.await_all %g
  return
}
"""
)


def test_a_used_position_is_reported_at_the_op() -> None:
    """The position `add_to_group` returns has no NEM value: the pass says so
    at the op (the conversion failed at its user, on a non-affine index)."""
    nem, errors = lower(USED, "main")
    assert nem is None
    (severity, message, loc, fix) = errors[0]
    assert "the position async.add_to_group returns is used" in message
    assert loc.endswith(":9:3") and fix is not None
    old, old_errors = lower(USED, "main", _before)
    assert old is None and "is not an affine function" in old_errors[0][1]


IN_NEST = (
    GROUPED
    + """  affine.for %i = 0 to 64 {
    %v = affine.load %y[%i] : memref<64xf32>
    %r = arith.addf %v, %v : f32
    affine.store %r, %y[%i] : memref<64xf32>
    %k = async.add_to_group %t, %g : !async.token
  }
  async.await_all %g
  return
}
"""
)


def test_a_group_in_a_nest_no_longer_blocks_it() -> None:
    """A group op in a pure loop nest goes too (D-LOW-ASYNC-GROUPS): the nest
    is raised as it is without it; the conversion rejected it (a token
    operand cannot be passed to a compute kernel)."""
    nem, diags = lower(IN_NEST, "main")
    assert nem is not None and "add2 = add.async" in nem, diags
    assert "raised: loop nest at 9:3 -> add" in diags[0][1]
    old, errors = lower(IN_NEST, "main", _before)
    assert old is None and "cannot be passed to a compute kernel" in errors[0][1]
