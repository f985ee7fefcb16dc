"""`nem-fold-index-arith` (D-LOW-AFFINE): the `arith` index arithmetic the
conversion evaluated op by op becomes `affine.apply`s with composed maps
before it (issue 36 item 1), in the tile loops `nem-mark-tile-loops` marks
too (test_lowering_mark_tile_loops.py).  The conversion's table keeps the
entries of what the fold may leave (D-LOW-AFFINE), evaluated there; not
`arith.addi`/`subi`, always folded (session 34).

The differential test across that rewrite: `lower-to-nem` prints the same
`.nem` and the same remarks or errors as the pipeline before it, without
the pass and with the conversion's old handlers (lowering_diff.WITH_ADD_SUB),
on every lowering input with index arithmetic; so does `nem-compile` of the
ONNX samples.  What is not affine stays, rejected by the conversion with
the same words at the same place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lowering_diff import (
    INPUTS,
    LIT_MLIR,
    MLIR_INPUTS,
    WITH_ADD_SUB,
    Outcome,
    assert_unchanged,
    before,
    entries_in,
    lower,
    sample_before_and_after,
)
from xdsl.dialects import affine

from nem.compile.lower import xdsl_context
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.lowering.fold_index_arith import FoldIndexArithPass
from nem.passes.lowering.passes import preparation

_edit = before(FoldIndexArithPass, WITH_ADD_SUB)


def _before(text: str, entry: str) -> Outcome:
    """`lower` as before the pass: without it, the old handlers in the table."""
    return lower(text, entry, _edit)


_INDEX_ARITH = re.compile(r"arith\.(addi|subi|muli|divsi|divui|remsi|remui|floordivsi|ceildivsi)")
FILES = [
    p
    for p in MLIR_INPUTS + LIT_MLIR
    if _INDEX_ARITH.search(p.read_text()) or ("affine.apply" in p.read_text())
]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INPUTS.parents[1])))
def test_the_rewrite_changes_no_output(path: Path) -> None:
    """Every public function of every lowering input with index arithmetic
    or an apply lowers to the same `.nem`, remarks and errors with the pass
    and as before it."""
    assert_unchanged(path, _edit)


def _folded(text: str, entry: str) -> str:
    """`entry` of `text` after the preparation, the pass its last step."""
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    for p in preparation(entry):
        p.apply(ctx, module)
    return str(module)


def test_the_inputs_index_arithmetic_becomes_applies() -> None:
    """The differential is not vacuous: in the inputs' entries that lower,
    the pass leaves no `arith.addi`/`subi` on indices where the conversion
    evaluates them, and makes applies of most of their arithmetic."""
    path = INPUTS / "index_arith.mlir"
    text = path.read_text()
    made = 0
    for entry in entries_in(text):
        assert lower(text, entry)[0] is not None, entry
        fn = _folded(text, entry)
        fn = fn[fn.index(f"func.func @{entry}(") :]
        fn = fn[: fn.find("\n  func.func ") + 1 or None]
        assert not re.search(r"arith\.(addi|subi) %\S+, %\S+ : index", fn), entry
        made += fn.count("affine.apply")
    assert made >= 20


REJECTED = {
    "product": (
        "%p = arith.muli %i, %i : index",
        "product of two non-constant indices is not affine",
    ),
    "by_variable": (
        "%p = arith.divsi %i, %i : index",
        "division by a non-constant or non-positive value",
    ),
    "by_zero": (
        "%p = arith.remui %i, %c0 : index",
        "division by a non-constant or non-positive value",
    ),
    "by_negative": (
        "%p = arith.floordivsi %i, %cm4 : index",
        "division by a non-constant or non-positive value",
    ),
    "negative": (
        "%p = arith.divsi %n, %c4 : index",
        "signed division of a possibly negative index",
    ),
    "negative_rem": (
        "%p = arith.remsi %n, %c4 : index",
        "signed division of a possibly negative index",
    ),
    "map_by_zero": (
        "%p = affine.apply affine_map<(d0)[s0] -> (s0 floordiv 0 + d0)>(%i)[%c2]",
        "non-affine index: FloorDiv by a non-constant or non-positive value",
    ),
    "not_index": (
        "%f2 = arith.addi %f, %f : i32\n    %p = arith.index_cast %f2 : i32 to index",
        "unsupported operation",
    ),
}
"""Index arithmetic the conversion rejects, each in its own way (`%n` is
`%i - 2`, possibly negative, which the pass rewrites; `%p` is used; an
apply whose map divides by 0 once a constant is folded is left as it is)."""


@pytest.mark.parametrize("case", REJECTED)
def test_the_errors_stay_word_for_word(case: str) -> None:
    """What is not affine is left: the same message, location and fix as
    before the pass."""
    line, reason = REJECTED[case]
    text = (
        "func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {\n"
        "  %c0 = arith.constant 0 : index\n  %c2 = arith.constant 2 : index\n"
        "  %c4 = arith.constant 4 : index\n  %cm4 = arith.constant -4 : index\n"
        "  %f = arith.constant 1 : i32\n"
        "  affine.for %i = 0 to 4 {\n    %n = arith.subi %i, %c2 : index\n"
        f"    {line}\n"
        "    %s = memref.subview %x[%p] [4] [1] : memref<64xf32> to memref<4xf32, strided<[1], offset: ?>>\n"
        "    %t = memref.subview %y[%n] [4] [1] : memref<64xf32> to memref<4xf32, strided<[1], offset: ?>>\n"
        "    memref.copy %s, %t : memref<4xf32, strided<[1], offset: ?>> to memref<4xf32, strided<[1], offset: ?>>\n"
        "  }\n  return\n}\n"
    )
    assert "affine.apply affine_map<(d0) -> ((d0 + -2))> (%i)" in _folded(text, "main")
    new = lower(text, "main")
    assert new == _before(text, "main")
    nem, ((sev, msg, loc, _),) = new
    op = line.split()[2]  # the first op of the line is rejected
    assert nem is None and sev == "error" and msg == f"cannot lower '{op}': {reason}"
    assert loc.endswith(":9:5"), loc


BOUNDS_A_PARTIAL_TILE = """
func.func @main(%A: memref<48xf32>, %B: memref<48xf32>) {
  %c4 = arith.constant 4 : index
  affine.for %T = 0 to 48 step 16 {
    %o = arith.addi %T, %c4 : index
    %m = affine.min affine_map<(d0) -> (16, -d0 + 44)>(%o)
    %s = memref.subview %A[%T] [%m] [1] : memref<48xf32> to memref<?xf32, strided<[1], offset: ?>>
    %d = memref.subview %B[%T] [%m] [1] : memref<48xf32> to memref<?xf32, strided<[1], offset: ?>>
    memref.copy %s, %d : memref<?xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
  }
  return
}
"""
"""A min whose operand is `arith` on the loop's variable: its candidates
(16, 40 - %T) differ in the last iteration, which the conversion's peeling
decision (`nonuniform_minmax`) reads through the `arith` as through an apply
(session 34)."""


def test_what_bounds_a_partial_tile_is_folded_and_peeled() -> None:
    """An `arith` op that is an operand of a min/max is rewritten like any
    other: the peeling decision reads `arith` as it reads applies, so the
    loop is peeled with the pass as without it (session 33 left the op as
    written, and the program was rejected at the min both ways)."""
    text = BOUNDS_A_PARTIAL_TILE
    assert "arith.addi" not in _folded(text, "main")
    new = lower(text, "main")
    assert new == _before(text, "main")
    assert new[0] is not None and "partial last tile peeled" in new[1][0][1]


@pytest.mark.parametrize("name", ["mlp", "cnn", "resblock", "transformer"])
def test_the_samples_compile_to_the_same_program(name: str, monkeypatch, tmp_path: Path) -> None:
    """`nem-compile` of the ONNX samples: the same `.nem` with the pass as
    without it (their index arithmetic is `affine.apply` already, in the
    loops the conversion lowers one by one: the pass rewrites none)."""
    after, old, _ = sample_before_and_after(
        name,
        FoldIndexArithPass,
        lambda o: isinstance(o, affine.ApplyOp),
        WITH_ADD_SUB,
        monkeypatch,
        tmp_path,
    )
    assert old == after
