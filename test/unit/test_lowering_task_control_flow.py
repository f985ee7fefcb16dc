"""`nem-check-task-control-flow` (D-LOW-TASK-CF): the control flow a task
cannot hold (`scf`, `cf`, `affine.if`, `affine.parallel` where the
conversion lowers ops one by one) leaves the conversion's table for a check
of its own before the conversion (issue 36 item 1).

The differential test across that move: `lower-to-nem` prints the same
`.nem` and the same remarks or errors as the pipeline without the check,
converting with the table before it (the three rejecting handlers kept
below as they were: `handlers.reject_control_flow`,
`lower_execute_region`, `scf_loops.reject_scf_for`), on every lowering
input with a control-flow op, on inputs with several errors, and on an
ONNX sample through `nem-compile`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lowering_diff import (
    INPUTS,
    LIT_MLIR,
    MLIR_INPUTS,
    assert_old_pipeline,
    before,
    entries_if_parsed,
    entries_in,
    lower,
    sample_before_and_after,
)
from xdsl.dialects import affine, cf, scf
from xdsl.dialects.builtin import IndexType
from xdsl.ir import Operation

from nem.frontends.upstream_dialects.affine_if import AffineIfOp
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.reroll import last_iteration
from nem.passes.lowering.state import BlockState, Handler, Lowering
from nem.passes.lowering.task_control_flow import CONTROL_FLOW, CheckTaskControlFlowPass

# -- the conversion's handlers before the pass (handlers.py, scf_loops.py) --


def _reject_control_flow(lw: Lowering, op: Operation, st: BlockState) -> None:
    raise reject(
        op,
        "control flow other than affine.for is not supported at task level",
        "keep conditionals inside a compute loop nest (its kernel runs them)",
    )


def _lower_execute_region(lw: Lowering, op: scf.ExecuteRegionOp, st: BlockState) -> None:
    prev = op.prev_op
    if not (isinstance(prev, affine.ForOp) and last_iteration(prev) is op):
        _reject_control_flow(lw, op, st)


def _reject_scf_for(lw: Lowering, op: scf.ForOp, st: BlockState) -> None:
    why = (
        f"its induction variable is {op.lb.type}, not index"
        if not isinstance(op.lb.type, IndexType)
        else "its step is not a positive constant"
    )
    raise reject(
        op,
        f"scf.for is not supported here: {why}; a NEM loop needs an index "
        "variable and a constant positive step (D-LOW-SCF)",
        "loop over index with an arith.constant step",
    )


OLD_CONTROL_FLOW: list[type[Operation]] = [
    AffineIfOp,
    affine.ParallelOp,
    *scf.Scf.operations,
    *cf.Cf.operations,
]
"""`handlers._control_flow_ops()` as it was."""

BEFORE: dict[type[Operation], Handler] = {
    **HANDLERS,
    **{cls: _reject_control_flow for cls in OLD_CONTROL_FLOW},
    scf.ForOp: _reject_scf_for,
    scf.ExecuteRegionOp: _lower_execute_region,
}
"""The conversion's table before the pass."""

_before = before(CheckTaskControlFlowPass, BEFORE)

_CONTROL_FLOW_ERROR = re.compile(r"at task level|scf.for is not supported here")
CONTROL_FLOW_TEXT = ("scf.", "cf.", "affine.if", "affine.parallel")
FILES = [
    *MLIR_INPUTS,
    *LIT_MLIR,
    INPUTS.parents[2] / "fuzz/corpus/mlir/pipelined_load_floordiv_negative.mlir",
]
"""The lowering inputs, and a re-rolled pipeline whose last iteration
lowers (its `scf.execute_region` reaches the conversion: lowered with the loop)."""
WITH_CONTROL_FLOW = [p for p in FILES if any(t in p.read_text() for t in CONTROL_FLOW_TEXT)]


def test_the_driver_no_longer_handles_them() -> None:
    """None, not even the `scf.execute_region` of a re-rolled loop's last
    iteration, which the loop's lowering lowers (`loops.lower_for`,
    D-LOW-WALK; any other is rejected)."""
    assert [cls for cls in HANDLERS if issubclass(cls, CONTROL_FLOW)] == []
    assert set(OLD_CONTROL_FLOW) <= {*CONTROL_FLOW}


def test_the_comparison_is_with_the_old_pipeline() -> None:
    """The edited steps leave the pass out and convert with the old table,
    and some inputs with control flow are rejected by it, some lower: else
    the comparison below would be with the new pipeline, or vacuous."""
    cases = [(p.read_text(), e) for p in WITH_CONTROL_FLOW for e in entries_if_parsed(p)]
    assert_old_pipeline(_before, CheckTaskControlFlowPass, BEFORE, cases)
    outcomes = [lower(t, e, _before) for t, e in cases]
    lowered = [o for o in outcomes if o[0] is not None]
    rejected = [o for o in outcomes if o[0] is None and _CONTROL_FLOW_ERROR.search(str(o[1]))]
    assert len(lowered) >= 8 and len(rejected) >= 6, (len(lowered), len(rejected))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_check_changes_no_output(path: Path) -> None:
    """Every public function of every lowering input: the same `.nem`,
    remarks and errors with the check and with the table before it (not
    only the inputs with control flow as written: `nem-reroll-pipelines`
    makes the `scf.execute_region` of a pipeline's last iteration)."""
    text = path.read_text()
    for entry in entries_in(text):
        assert lower(text, entry) == lower(text, entry, _before), entry


SEVERAL_ERRORS = {
    "if_then_range": """
func.func @main(%A: memref<64xf32>) {
  %t = arith.constant true
  scf.if %t {
  }
  %b = memref.alloc() : memref<1152921504606846976x64xf32>
  return
}""",
    "if_then_async": """
func.func @main(%X: memref<64xf32>) {
  %t = arith.constant true
  scf.if %t {
  }
  %tok, %v = async.execute -> !async.value<f32> {
    %c = arith.constant 2.0 : f32
    async.yield %c : f32
  }
  %s = async.await %v : !async.value<f32>
  return
}""",
    "two_ifs_in_loops": """
func.func @main(%A: memref<64xf32>, %B: memref<64xf32>) {
  affine.for %i = 0 to 4 {
    memref.copy %A, %B : memref<64xf32> to memref<64xf32>
    affine.for %j = 0 to 2 {
      memref.copy %B, %A : memref<64xf32> to memref<64xf32>
      affine.if affine_set<(d0) : (d0 - 1 >= 0)>(%j) {
      }
    }
    %t = arith.constant true
    scf.if %t {
    }
  }
  %u = arith.constant true
  scf.if %u {
  }
  return
}""",
    "index_argument": """
func.func @main(%n: index, %A: memref<64xf32>) {
  %t = arith.constant true
  scf.if %t {
  }
  return
}""",
}


@pytest.mark.parametrize("name", SEVERAL_ERRORS)
def test_the_first_error_is_unchanged(name: str) -> None:
    """Inputs with several errors, a control-flow one among them (another
    preparation check's after it, `nem-check-input-ranges`' or
    `nem-inline-async-executes`', which are raised first; another
    control-flow op's after it; the conversion's at the function): the
    same first error."""
    text = SEVERAL_ERRORS[name]
    new = lower(text, "main")
    assert new[0] is None
    assert new == lower(text, "main", _before)


@pytest.mark.slow  # an ONNX model through nem-compile twice
def test_a_sample_compiles_to_the_same_program(monkeypatch, tmp_path: Path) -> None:
    after, old, _ = sample_before_and_after(
        "cnn", CheckTaskControlFlowPass, lambda o: False, BEFORE, monkeypatch, tmp_path
    )
    assert old == after
