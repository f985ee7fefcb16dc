"""`nem-drop-memref-hints` (D-LOW-MEMREF-HINTS): `memref.dealloc` and
`memref.assume_alignment` leave the conversion's table for a pass of
rewrite patterns of their own (issue 36 item 1).

The differential test across that rewrite: `lower-to-nem` prints the same
`.nem` and the same remarks or errors as the conversion with the table
before it (those two ops ignored by the driver, no pass), on every lowering
input and on the tiled programs of the ONNX samples; and the pass is not
vacuous (the inputs' deallocations are erased by it, and a use of an
`assume_alignment` result, an error before, lowers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from lowering_diff import INPUTS, LIT_MLIR, MLIR_INPUTS, before, entries, lower
from xdsl.dialects import memref
from xdsl.ir import Operation

from nem.compile.lower import xdsl_context
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.memref_hints import DropMemrefHintsPass
from nem.passes.lowering.passes import PreparedConversionPass
from nem.passes.lowering.state import BlockState, Handler, Lowering


def ignore(lw: Lowering, op: Operation, st: BlockState) -> None:
    """`memory_ops.ignore` as it was (gone with the terminators' entries, D-LOW-WALK)."""


BEFORE: dict[type[Operation], Handler] = {
    **HANDLERS,
    memref.DeallocOp: ignore,
    memref.AssumeAlignmentOp: ignore,
}
"""The conversion's table before the pass: the driver ignored both ops."""


_before = before(DropMemrefHintsPass, BEFORE)
"""`lower-to-nem`'s steps as they were: no pass, the table before it."""


def test_the_driver_no_longer_handles_them() -> None:
    assert memref.DeallocOp not in HANDLERS
    assert memref.AssumeAlignmentOp not in HANDLERS


# but this pass's own lit test, whose `assume_alignment` use the table before it rejected
DIFFERENTIAL = [p for p in MLIR_INPUTS + LIT_MLIR if p.name != "memref_hints.mlir"]


@pytest.mark.parametrize("path", DIFFERENTIAL, ids=lambda p: str(p.relative_to(INPUTS.parent)))
def test_the_rewrite_changes_no_output(path: Path) -> None:
    """With the pass and with the table before it: the same `.nem`, remarks and errors."""
    text = path.read_text()
    for entry in entries(path):
        assert lower(text, entry) == lower(text, entry, _before), entry


def test_the_inputs_deallocations_are_erased() -> None:
    """The differential test above is not vacuous: inputs deallocate, the pass erases it."""
    seen = 0
    for path in MLIR_INPUTS:
        text = path.read_text()
        if "memref.dealloc" not in text:
            continue
        for entry in entries(path):
            ctx = xdsl_context()
            module = parse_mlir(ctx, text)
            DropMemrefHintsPass(entry).apply(ctx, module)
            (fn,) = (
                f for f in module.ops if getattr(f, "sym_name", None) and f.sym_name.data == entry
            )
            seen += text.count("memref.dealloc")
            assert not [o for o in fn.walk() if isinstance(o, memref.DeallocOp)], (path, entry)
    assert seen >= 10


ALIGNED = """
func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
  %a = memref.assume_alignment %x, 64 : memref<64xf32>
  %t = memref.alloc() : memref<64xf32, 2>
  memref.copy %a, %t : memref<64xf32> to memref<64xf32, 2>
  affine.for %i = 0 to 64 {
    %v = affine.load %t[%i] : memref<64xf32, 2>
    %r = arith.maximumf %v, %v : f32
    affine.store %r, %t[%i] : memref<64xf32, 2>
  }
  memref.copy %t, %y : memref<64xf32, 2> to memref<64xf32>
  memref.dealloc %t : memref<64xf32, 2>
  return
}
"""


def test_an_aligned_memref_is_its_operand() -> None:
    """The result of `memref.assume_alignment` is the memref it assumes of:
    its uses lower as uses of `%x` (the driver bound no view to it: an error)."""
    nem, diags = lower(ALIGNED, "main")
    assert nem is not None, diags
    plain, _ = lower(
        ALIGNED.replace("%a = memref.assume_alignment %x, 64 : memref<64xf32>", "").replace(
            "memref.copy %a,", "memref.copy %x,"
        ),
        "main",
    )
    assert nem == plain
    before, errors = lower(ALIGNED, "main", _before)
    assert before is None and "memref.copy" in errors[0][1]


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_the_samples_compile_to_the_same_program(name: str, monkeypatch, tmp_path: Path) -> None:
    """`nem-compile` of ONNX samples (their tiles allocated and deallocated in
    the tile loops): the same `.nem` with the pass as with the table before it."""
    pytest.importorskip("onnx")
    from nem.compile import compile_onnx
    from nem.frontends.onnx import samples

    model = samples.MODELS[name]("f32")
    result = compile_onnx(model, stem=str(tmp_path / "after"))
    assert "memref.dealloc" in result.stage("tile").text
    monkeypatch.setattr(PreparedConversionPass, "handlers", lambda self: BEFORE)
    monkeypatch.setattr(DropMemrefHintsPass, "apply", lambda self, ctx, op: None)
    before = compile_onnx(model, stem=str(tmp_path / "before")).nem
    assert result.nem == before
