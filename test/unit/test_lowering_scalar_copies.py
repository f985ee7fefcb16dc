"""`nem-raise-scalar-copies` (D-LOW-SCALAR-COPY): the one-element copies
(`%v = load A[i]; store %v, B[j]` where the conversion lowers ops one by
one) leave the conversion's scalar-access handler for a rewrite pattern
before the conversion, into `nem_lowering.element_copy` (issue 36 item 1).

The differential test across that move: `lower-to-nem` prints the same
`.nem` and the same remarks or errors as the pipeline without the pass,
converting with the handler before it (kept below as it was:
`memory_ops.lower_scalar_access` with its copy case, which lowered a
copy's store as `memory_ops.element_transfer` does),
on every lowering input, on copies out of bounds, and on an ONNX sample
through `nem-compile`."""

from __future__ import annotations

from pathlib import Path

import pytest
from lowering_diff import (
    LIT_MLIR,
    MLIR_INPUTS,
    assert_old_pipeline,
    before,
    entries_if_parsed,
    entries_in,
    lower,
    sample_before_and_after,
)
from xdsl.dialects import affine, memref
from xdsl.ir import Block, Operation
from xdsl.passes import PassPipeline

from nem.compile.lower import xdsl_context
from nem.dialect.element_copy_op import ElementCopyOp
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.driver import run_pipeline
from nem.passes.lowering.access_bounds import check_access_bounds
from nem.passes.lowering.escape import copied_by
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.memory_ops import element_transfer, lower_scalar_access
from nem.passes.lowering.passes import preparation
from nem.passes.lowering.scalar_copies import RaiseScalarCopiesPass
from nem.passes.lowering.state import BlockState, Handler, Lowering

# -- the conversion's handler before the pass (memory_ops.py) --


def _old_scalar_access(lw: Lowering, op: Operation, st: BlockState) -> None:
    is_load = isinstance(op, affine.LoadOp | memref.LoadOp)
    if is_load:
        load: Operation | Block = op
    else:
        assert isinstance(op, affine.StoreOp | memref.StoreOp)
        load = op.value.owner
    if isinstance(load, Operation) and copied_by(load) is not None:
        check_access_bounds(op, lw.ctx.env)
        if load is not op:
            element_transfer(lw, load, op, st)
        return
    lower_scalar_access(lw, op, st)  # the rest as it was (its bounds checked first too)


ACCESSES = (affine.LoadOp, affine.StoreOp, memref.LoadOp, memref.StoreOp)
BEFORE: dict[type[Operation], Handler] = {
    **{cls: h for cls, h in HANDLERS.items() if cls is not ElementCopyOp},
    **{cls: _old_scalar_access for cls in ACCESSES},
}
"""The conversion's table before the pass."""

_before = before(RaiseScalarCopiesPass, BEFORE)

FILES = [*MLIR_INPUTS, *LIT_MLIR]


def _raised(text: str, entry: str) -> int:
    """The `nem_lowering.element_copy`s the preparation makes of `entry`."""
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    try:
        run_pipeline(module, PassPipeline(preparation(entry)), ctx=ctx)
    except Exception:
        return 0
    return sum(1 for o in module.walk() if isinstance(o, ElementCopyOp))


def test_the_scalar_handler_no_longer_copies() -> None:
    """The table lowers `nem_lowering.element_copy`; the accesses keep
    `lower_scalar_access`, which has no copy case (`copied_by` is the pass's)."""
    assert ElementCopyOp in HANDLERS
    assert all(HANDLERS[cls] is lower_scalar_access for cls in ACCESSES)
    import nem.passes.lowering.memory_ops as memory_ops

    assert not hasattr(memory_ops, "lower_scalar_copy")
    assert not hasattr(memory_ops, "copied_by")


def test_the_comparison_is_with_the_old_pipeline() -> None:
    """The edited steps leave the pass out and convert with the old table,
    and the inputs hold copies the pass raises: else the comparison below
    would be with the new pipeline, or vacuous."""
    counts = [
        (p.read_text(), e, _raised(p.read_text(), e)) for p in FILES for e in entries_if_parsed(p)
    ]
    assert_old_pipeline(_before, RaiseScalarCopiesPass, BEFORE, [(t, e) for t, e, n in counts if n])
    raised = sum(n for _, _, n in counts)
    assert raised >= MIN_RAISED, raised


MIN_RAISED = 6
"""declare_allocations.mlir's one, and the lit tests' of the pass
(scalar_copies.mlir, scalar_copies_errors.mlir)."""


FIXED = {"write_between"}
"""The entries the pass changes on purpose: a write between a copy's load
and store, which the old conversion lowered into one transfer at the store
that read the new value (a silent miscompile), now rejected at the write."""


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_pass_changes_no_output(path: Path) -> None:
    """Every public function of every lowering input: the same `.nem`,
    remarks and errors with the pass and with the handler before it, but
    for `FIXED`."""
    text = path.read_text()
    for entry in entries_in(text):
        if entry in FIXED:
            continue
        assert lower(text, entry) == lower(text, entry, _before), entry


def test_a_write_between_was_a_miscompile_and_is_rejected() -> None:
    """`write_between`: before the pass the conversion lowered it (one
    transfer from A after the copy into A: the old value lost); now an
    error at the copy."""
    (path,) = [p for p in LIT_MLIR if p.name == "scalar_copies_errors.mlir"]
    text = path.read_text()
    program, old_diags = lower(text, "write_between", _before)
    assert program is not None and all(d[0] == "remark" for d in old_diags)
    # the whole copy into A, then A's element read: after the write
    assert program.index("src=region(C") < program.index("src=region(A")
    program, errors = lower(text, "write_between")
    assert program is None
    assert "may write memory between the load and the store" in errors[0][1]


CASES = {
    "load_out": """
func.func @main(%A: memref<8xf32>, %B: memref<4xf32, 2>) {
  %v = affine.load %A[8] : memref<8xf32>
  affine.store %v, %B[9] : memref<4xf32, 2>
  return
}""",
    "store_out_in_a_loop": """
func.func @main(%A: memref<8xf32>) {
  affine.for %i = 0 to 4 {
    %a = memref.alloc() : memref<2xf32, 2>
    %v = affine.load %A[%i] : memref<8xf32>
    affine.store %v, %a[%i] : memref<2xf32, 2>
  }
  return
}""",
    "memref_accesses": """
func.func @main(%A: memref<8x8xf32>, %B: memref<4xf32, 2>) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  affine.for %i = 0 to 4 {
    %v = memref.load %A[%i, %c3] : memref<8x8xf32>
    %c = arith.constant 0.0 : f32
    memref.store %v, %B[%c1] : memref<4xf32, 2>
    memref.copy %B, %B : memref<4xf32, 2> to memref<4xf32, 2>
  }
  return
}""",
    "in_a_scope": """
func.func @main(%A: memref<8xf32>, %B: memref<8xf32, 2>) {
  %t = async.execute {
    %v = affine.load %A[1] : memref<8xf32>
    affine.store %v, %B[2] : memref<8xf32, 2>
    async.yield
  }
  async.await %t : !async.token
  return
}""",
}


@pytest.mark.parametrize("name", CASES)
def test_copies_lower_as_before(name: str) -> None:
    """Copies out of bounds (the load's error first), of memref accesses,
    in a NEM loop and in an `async.execute`'s scope: raised, and lowered the
    same."""
    text = CASES[name]
    assert _raised(text, "main") == 1
    assert lower(text, "main") == lower(text, "main", _before)


@pytest.mark.slow  # an ONNX model through nem-compile twice
def test_a_sample_compiles_to_the_same_program(monkeypatch, tmp_path: Path) -> None:
    after, old, _ = sample_before_and_after(
        "cnn",
        RaiseScalarCopiesPass,
        lambda o: isinstance(o, ElementCopyOp),
        BEFORE,
        monkeypatch,
        tmp_path,
    )
    assert old == after
