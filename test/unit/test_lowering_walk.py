"""D-LOW-WALK: the conversion's table holds no op that lowers to nothing
(issue 36 item 1).  A block's terminator is the op's that holds the block
(`Lowerer.block_ops`: a loop's `affine.yield`, a `nem_lowering.scope`'s
yield, the function's `func.return`), and the `scf.execute_region` of a
re-rolled loop's last iteration is the loop's (`loops.lower_for` marks it
lowered with the loop, `BlockState.skip`): the four entries that mapped
them to `memory_ops.ignore` are gone, and so is `ignore`, and the table's
`linalg.yield`, which no walk reached (56 -> 51 entries).

The differential test across that change: `lower-to-nem` prints the same
`.nem` and the same remarks or errors as the walk before it (every op of a
block handed to the table, the five entries, `lower_for` without the
skip), on every lowering input, a re-rolled pipeline whose last
iteration lowers, and an ONNX sample through `nem-compile`; and the old
walk is not vacuous (it reaches terminators and a last iteration).  The
DMA waits stay in the table: one pairs in one copy of its loop and not in
another (`test_a_dma_wait_pairs_in_each_copy_of_its_loop`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from lowering_diff import INPUTS, LIT_MLIR, MLIR_INPUTS, before, entries_in, lower
from xdsl.dialects import affine, func, linalg, scf
from xdsl.ir import Block, Operation
from xdsl.traits import IsTerminator

from nem.dialect.scope_op import ScopeYieldOp
from nem.passes.lowering import compute, memory_ops
from nem.passes.lowering.driver import Lowerer
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.loops import lower_loop
from nem.passes.lowering.passes import PreparedConversionPass
from nem.passes.lowering.state import BlockState, Handler, Lowering
from nem.passes.lowering.structure import is_structural
from nem.passes.lowering.tile_loops import is_tile_loop

MET: list[str] = []
"""The ops the old walk handed to `_ignore`, by name (the test's witness)."""


def _ignore(lw: Lowering, op: Operation, st: BlockState) -> None:
    """`memory_ops.ignore` as it was."""
    MET.append(op.name)


def _lower_for(lw: Lowering, op: affine.ForOp, st: BlockState) -> None:
    """`loops.lower_for` as it was: the last iteration after a re-rolled loop
    left to the walk, which ignored it."""
    if is_structural(op) or is_tile_loop(lw.ctx, op):
        lower_loop(lw, op, st)
    else:
        compute.lower_nest(lw, op, st)


BEFORE: dict[type[Operation], Handler] = {
    **HANDLERS,
    affine.ForOp: _lower_for,
    affine.YieldOp: _ignore,
    func.ReturnOp: _ignore,
    ScopeYieldOp: _ignore,
    scf.ExecuteRegionOp: _ignore,
    linalg.YieldOp: compute.lower_linalg,  # with the other linalg ops: never reached
}
"""The conversion's table before the change."""


def _all_ops(self: Lowerer, block: Block) -> list[Operation]:
    """`Lowerer.block_ops` as it was: every op of the block, but the
    `scf.yield` of a last iteration (`loops.lower_loop` sliced it off)."""
    ops = list(block.ops)
    return ops[:-1] if isinstance(block.parent_op(), scf.ExecuteRegionOp) else ops


_before = before(None, BEFORE)  # no pass left out: the conversion's walk changed


@contextmanager
def _old_walk(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context() as m:
        m.setattr(Lowerer, "block_ops", _all_ops)
        yield


FILES = [
    *MLIR_INPUTS,
    *LIT_MLIR,
    INPUTS.parents[2] / "fuzz/corpus/mlir/pipelined_load_floordiv_negative.mlir",
]
"""The lowering inputs, and a re-rolled pipeline whose last iteration lowers."""


def test_the_table_holds_no_op_that_lowers_to_nothing() -> None:
    assert not [cls for cls in HANDLERS if cls.has_trait(IsTerminator)]
    assert scf.ExecuteRegionOp not in HANDLERS
    assert not hasattr(memory_ops, "ignore")
    assert len(HANDLERS) == 51 and len(BEFORE) == 56


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INPUTS.parents[2])))
def test_the_walk_changes_no_output(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every public function of every lowering input: the same `.nem`,
    remarks and errors with the new walk and with the old one."""
    text = path.read_text()
    try:
        names = entries_in(text)
    except pytest.skip.Exception:
        return  # a transform script: lit runs it
    for entry in names:
        new = lower(text, entry)
        with _old_walk(monkeypatch):
            old = lower(text, entry, _before)
        assert new == old, entry


def test_the_old_walk_met_what_the_new_one_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: the old walk reached terminators of each kind, and the
    last iteration of a re-rolled pipeline, which lowers (its tasks are in
    the program)."""
    MET.clear()
    outcomes = []
    with _old_walk(monkeypatch):
        for path in FILES:
            text = path.read_text()
            try:
                names = entries_in(text)
            except pytest.skip.Exception:
                continue
            outcomes += [lower(text, e, _before) for e in names]
    met = {name: MET.count(name) for name in set(MET)}
    assert met.get("func.return", 0) >= 100, met
    assert met.get("affine.yield", 0) >= 50, met
    assert met.get("nem_lowering.yield", 0) >= 3, met
    assert met.get("scf.execute_region", 0) >= 1, met
    assert sum(o[0] is not None for o in outcomes) >= 100


@pytest.mark.slow  # an ONNX model through nem-compile twice
def test_a_sample_compiles_to_the_same_program(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("onnx")
    from nem.compile import compile_onnx
    from nem.frontends.onnx import samples

    model = samples.MODELS["cnn"]("f32")
    after = compile_onnx(model, stem=str(tmp_path / "after")).nem
    with _old_walk(monkeypatch):
        monkeypatch.setattr(PreparedConversionPass, "handlers", lambda self: BEFORE)
        old = compile_onnx(model, stem=str(tmp_path / "before")).nem
    assert old == after


PAIRED = """
func.func @f(%a: memref<20xf32>, %b: memref<16xf32, 2>) {
  %tag = memref.alloc() : memref<4xi32>
  affine.for %i = 0 to UB step 16 {
    %n = affine.min affine_map<(d0) -> (16, -d0 + UB)>(%i)
    affine.dma_start %a[%i], %b[0], %tag[%i * 2], %n : memref<20xf32>, memref<16xf32, 2>, memref<4xi32>
    affine.dma_wait %tag[%i], %n : memref<4xi32>
  }
  return
}
"""
"""A DMA on tag slot `[%i * 2]` waited on `[%i]`, in a loop of one full
tile (`UB` 16) or of one full tile and a partial one (`UB` 20)."""


def test_a_dma_wait_pairs_in_each_copy_of_its_loop() -> None:
    """Why the DMA waits stay in the table (D-LOW-WALK): the conversion
    pairs a wait per copy of its block, on the copy's index values.  The
    full tile (`%i` is 0: slots 0 and 0) pairs the wait with its start;
    the peeled partial tile (`%i = 16`: slots 32 and 16) finds no start,
    the error reported at the `affine.min` as the peeling's.  The same op
    pairs in one copy and not in the other: no answer attached to it ahead
    of the conversion is both."""
    full, _ = lower(PAIRED.replace("UB", "16"), "f")
    assert full is not None and "wait(dma1)" in full
    peeled, ((severity, message, loc, _),) = lower(PAIRED.replace("UB", "20"), "f")
    assert peeled is None and severity == "error" and loc.endswith(":5:5")
    assert message.startswith("cannot lower 'affine.min': the operands of this affine.min/max")
    assert "peeling the last iteration" in message
    assert message.endswith(
        "'affine.dma_wait': no dma_start with this tag and index is pending in this "
        "block (a DMA started in another iteration or scope cannot be paired)"
    )
