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
index value holds (`Aff.atom` makes it 0), keeps its buffers' two slots;
and in two nested pipelined loops (no lowering input nests one in
another) a buffer of the inner body takes the inner loop's slots, one of
the outer body the outer loop's (session 48)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lowering_diff import INPUTS, LIT_MLIR, MLIR_INPUTS, before, entries_in, lower
from xdsl.ir import Block

from nem.dialect.ops import LoopOp
from nem.passes.lowering import context
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


NESTED = """
func.func @nested(%A: memref<4x64xf32>, %B: memref<4x64xf32>) {
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  affine.for %i = 0 to 4 {
    %row = memref.alloc() : memref<64xf32, 2>
    affine.for %j = 0 to 64 step 16 {
      %buf = memref.alloc() : memref<16xf32, 2>
      %t = memref.alloc() : memref<1xi32>
      affine.dma_start %A[%i, %j], %buf[0], %t[0], %c16 : memref<4x64xf32>, memref<16xf32, 2>, memref<1xi32>
      affine.dma_wait %t[0], %c16 : memref<1xi32>
      %t2 = memref.alloc() : memref<1xi32>
      affine.dma_start %buf[0], %row[%j], %t2[0], %c16 : memref<16xf32, 2>, memref<64xf32, 2>, memref<1xi32>
      affine.dma_wait %t2[0], %c16 : memref<1xi32>
    } {nem.max_in_flight = 2 : i64}
    %t3 = memref.alloc() : memref<1xi32>
    affine.dma_start %row[0], %B[%i, 0], %t3[0], %c64 : memref<64xf32, 2>, memref<4x64xf32>, memref<1xi32>
    affine.dma_wait %t3[0], %c64 : memref<1xi32>
  } {nem.max_in_flight = 2 : i64}
  return
}
"""
"""Two re-rolled loops (`nem.max_in_flight = 2`), one in the other's body,
each body allocating an L1 buffer: `row` (64 floats) in the outer, `buf`
(16 floats) in the inner."""


def test_the_innermost_of_two_nested_pipelined_loops_gives_the_slots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`buf`, declared in the inner loop's body, takes the slots of the
    inner loop `j` (`(j mod 2) * 64`), not the outer `i`'s, and `row`,
    declared in the outer body, those of `i` (`(i mod 2) * 256`): each
    two slots (`size=128`, `size=512`), as with the stack (its innermost
    entry); `context.pipelined_loop` answered `j` for the block of the
    inner body and `i` for the outer's."""
    found: list[tuple[str | None, str | None]] = []
    read = context.pipelined_loop

    def recording(at: Block) -> LoopOp | None:
        loop = read(at)
        holder = at.parent_op()
        name = holder.iv_name.data if isinstance(holder, LoopOp) else None
        found.append((name, None if loop is None else loop.iv_name.data))
        return loop

    monkeypatch.setattr(context, "pipelined_loop", recording)
    nem, diags = lower(NESTED, "nested")
    monkeypatch.undo()
    pushed: list[int] = []
    assert (nem, diags) == lower(NESTED, "nested", before(None, HANDLERS, pushed))
    assert pushed == [2, 2]
    assert sorted(set(found)) == [("i", "i"), ("j", "j")]
    assert nem is not None
    assert "buffer row : L1[0] (size=512, align=64)" in nem
    assert "buffer buf : L1[0] (size=128, align=64)" in nem
    assert "dst=region(buf, (j mod 2) * 64, 64)" in nem
    assert "dst=region(row, j * 64 + (i mod 2) * 256, 64)" in nem
    assert "src=region(row, (i mod 2) * 256, 256)" in nem
    assert "2 buffer(s) with a slot per iteration in flight" in diags[0][1]
