"""D-LOW-WALK (session 47): the pipelined loop whose slots a buffer
declared in its body takes (D-LOW-PIPE, D-LOW-PIPE-BODY) is read from the
IR, the innermost NEM loop with a window (`@max_in_flight`) holding the
NEM block being filled (`context.pipelined_loop`), not from a stack
`LoweringContext.pipelined` that `lower_loop` pushed while it lowered the
loop's body.

The differential test across that change: `lower-to-nem` with
`pipeline-tiles=true` prints the same `.nem` and the same remarks or errors
as the conversion with the stack (`lowering_diff.old_pipelined`; the other
differential tests compare it without the option), on every lowering
input; the stack is not empty on them (the old pipeline pushed windows, of
2 and of 4); and a pipelined loop of one iteration, whose variable no
index value holds (`Aff.atom` makes it 0), keeps its buffers' two slots."""

from __future__ import annotations

from pathlib import Path

import pytest
from lowering_diff import INPUTS, LIT_MLIR, MLIR_INPUTS, before, entries_in, lower

from nem.passes.lowering.handlers import HANDLERS

PUSHED: list[int] = []
"""The windows the old pipeline pushed, over the inputs (the test's witness)."""


@pytest.mark.parametrize("path", MLIR_INPUTS + LIT_MLIR, ids=lambda p: p.name)
def test_the_pipelined_loops_read_from_the_ir_lower_as_the_stack_did(path: Path) -> None:
    text = path.read_text()
    for entry in entries_in(text):
        new = lower(text, entry, pipeline_tiles=True)
        old = lower(text, entry, before(None, HANDLERS, PUSHED), pipeline_tiles=True)
        assert new == old, entry


def test_the_old_pipeline_pushed_pipelined_loops() -> None:
    """Runs after the differential test (file order): the old pipeline met
    re-rolled and staged tile loops (window 2) and a marked one (window 4),
    so the comparison above is not vacuous."""
    if not PUSHED:
        pytest.skip("run with the differential test above")
    assert {2, 4} <= set(PUSHED)


def test_a_pipelined_loop_of_one_iteration_keeps_its_slots() -> None:
    """`eltwise_tiled_nodma.mlir` with `pipeline-tiles=true`: the tile loop
    over 60 columns by 32 has one full tile and a peeled partial one, so its
    NEM loop runs one iteration under `@max_in_flight(2)`.  Its variable is
    0 (`Aff.atom` of a one-iteration loop), as in the peeled tile after it,
    so the values the conversion bound cannot tell the two apart; the NEM
    loop holding the block being filled does: the buffers keep two slots of
    4096 bytes, as with the stack, and the peeled tile uses slot 0."""
    text = (INPUTS / "eltwise_tiled_nodma.mlir").read_text()
    nem, diags = lower(text, "add", pipeline_tiles=True)
    assert (nem, diags) == lower(text, "add", before(None, HANDLERS), pipeline_tiles=True)
    assert nem is not None
    assert "loop arg4 in [0..0] @max_in_flight(2):" in nem
    assert "buffer alloc : L1[0] (size=8192, align=64)" in nem
    assert "copy5 = transfer.async(dst=region(alloc, 0, 4080)" in nem
    assert "3 buffer(s) with a slot per iteration in flight" in diags[0][1]
