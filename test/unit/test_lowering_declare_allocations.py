"""`nem-declare-allocations` (D-LOW-DECLARE): the allocations the conversion
lowers one by one become `nem_lowering.buffer`s, named before the
conversion with the generator it resumes; `memref.alloc` and
`memref.alloca` leave the conversion's table (issue 36 item 1).

The differential test across that rewrite: `lower-to-nem` prints the same
`.nem` and the same remarks or errors as the pipeline before it, without
the pass and with the conversion's old allocation handler (kept below),
which named each allocation when it reached it, on every lowering input
with an allocation; so does `nem-compile` of the ONNX samples.  The
decided change (an allocation named before the loop variables) is shown on
an input of its own."""

from __future__ import annotations

import re
from pathlib import Path

import lowering_diff
import pytest
from lowering_diff import (
    INPUTS,
    LIT_MLIR,
    MLIR_INPUTS,
    OLD_ALLOCATIONS,
    Outcome,
    before,
    entries_in,
    lower,
    sample_before_and_after,
)
from xdsl.dialects import memref
from xdsl.ir import Operation
from xdsl.utils.exceptions import ParseError

from nem.compile.lower import xdsl_context
from nem.dialect.buffer_op import BufferOp
from nem.dialect.diagnostics import NemDiagnosticError
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.lowering.declare_allocations import DeclareAllocationsPass
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.memory_ops import allocation_buffers
from nem.passes.lowering.state import Handler

OLD: dict[type[Operation], Handler] = {
    **{k: v for k, v in HANDLERS.items() if k is not BufferOp},
    **OLD_ALLOCATIONS,
}
_edit = before(DeclareAllocationsPass, OLD)


def _before(text: str, entry: str) -> Outcome:
    """`lower` as before the pass: without it, the old handler in the table."""
    return lower(text, entry, _edit)


def test_the_driver_no_longer_handles_allocations() -> None:
    assert not {memref.AllocOp, memref.AllocaOp} & set(HANDLERS) and BufferOp in HANDLERS


OWN = "declare_allocations.mlir"
"""This pass's own lit test."""
FILES = [
    p
    for p in MLIR_INPUTS + LIT_MLIR
    if p.name != OWN and ("memref.alloc" in (text := p.read_text()) or "alloca" in text)
]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INPUTS.parents[1])))
def test_the_rewrite_changes_no_output(path: Path) -> None:
    """Every public function of every lowering input with an allocation
    lowers to the same `.nem`, remarks and errors with the pass and as
    before it."""
    text = path.read_text()
    for entry in entries_in(text):
        assert lower(text, entry) == _before(text, entry), entry


def _declared(text: str, entry: str = "main", spaces: str = "0:DDR,1:L2,2:L1") -> str:
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    DeclareAllocationsPass((spaces,), entry).apply(ctx, module)
    return str(module)


def _allocations(text: str) -> int:
    return text.count("memref.alloc(") + text.count("memref.alloca(")


def test_the_inputs_allocations_become_buffers() -> None:
    """The differential is not vacuous: in the entries of the inputs above,
    every allocation becomes a buffer op (none is in an outlined kernel)."""
    made = 0
    for path in FILES:
        text = path.read_text()
        try:
            parse_mlir(xdsl_context(), text)
        except ParseError:
            continue  # (`entries_in` skips it: lit runs it)
        for entry in entries_in(text):
            try:
                after = _declared(text, entry)
            except NemDiagnosticError:
                continue  # (nem-declare-buffers rejects a get_global)
            fn = after[after.index(f"func.func @{entry}(") :]
            fn = fn[: fn.find("\n  func.func ") + 1 or None]
            assert not _allocations(fn), (path.name, entry)
            made += fn.count('replaces = "memref.alloc')
    assert made > 100


REJECTED = {
    "dynamic": "%c = arith.constant 4 : index\n  %a = memref.alloc(%c) : memref<?xf32>",
    "dynamic_alloca": "%c = arith.constant 4 : index\n  %a = memref.alloca(%c) : memref<?xf32>",
    "element": "%a = memref.alloc() : memref<4xf64>",
    "offset": "%a = memref.alloc() : memref<4xf32, strided<[1], offset: 2>>",
    "space": '%a = memref.alloc() : memref<4xf32, "fast">',
    "unmapped": "%a = memref.alloca() : memref<4xf32, 7>",
    "after_another": "%b = memref.alloc() : memref<4xf32, 7>\n  %a = memref.alloc() : memref<4xf64>",
}
"""An allocation the conversion rejects, each in its own way (the last: the
first of two rejected ones is reported)."""


@pytest.mark.parametrize("case", REJECTED)
def test_the_allocations_errors_stay_word_for_word(case: str) -> None:
    """`lower_alloc`'s diagnostics, now given at the buffer op: the same
    message, location and fix as before the pass, naming the op written."""
    text = f"func.func @main(%x: memref<4xf32>) {{\n  {REJECTED[case]}\n  return\n}}\n"
    new = lower(text, "main")
    assert new == _before(text, "main")
    nem, ((sev, msg, loc, _),) = new
    at = text.index("= memref.alloc")  # the first allocation is reported
    op = "memref.alloca" if text.startswith("= memref.alloca", at) else "memref.alloc"
    assert nem is None and sev == "error" and msg.startswith(f"cannot lower '{op}': ")
    assert loc.endswith(f":{text.count(chr(10), 0, at) + 1}:3"), loc


LOOP_FIRST = """
func.func @main(%x: memref<4xf32>, %y: memref<4xf32>) {
  affine.for %in = 0 to 4 {
    %t = memref.alloc() : memref<1xf32>
    memref.copy %x, %y : memref<4xf32> to memref<4xf32>
  }
  affine.for %a = 0 to 2 {
    memref.copy %y, %x : memref<4xf32> to memref<4xf32>
  }
  %0 = memref.alloc() : memref<4xf32>
  %a = memref.alloc() : memref<4xf32>
  memref.copy %x, %0 : memref<4xf32> to memref<4xf32>
  memref.copy %0, %a : memref<4xf32> to memref<4xf32>
  return
}
"""
"""Loop variables named before allocations: `%in` (a NEM keyword) takes a
`DEFAULT<n>` number, `%a` the allocation's MLIR name."""


def test_allocations_are_named_before_the_loop_variables() -> None:
    """The decided change (D-LOW-DECLARE): the pass names the allocations
    before the conversion names any loop variable, so where an allocation
    and a loop variable before it compete for a name the allocation wins:
    the unnamed allocation is `DDR_buf0` (before: `DDR_buf1`, after the
    loop variable `i0`), `%a`'s buffer `a` (before: `a_v1`, the loop
    variable having taken `a`).  The program is the same but for names."""
    new, old = lower(LOOP_FIRST, "main")[0], _before(LOOP_FIRST, "main")[0]
    assert new is not None and old is not None
    assert "loop i1 in [0..3]" in new and "loop a_v1 in [0..1]" in new
    assert "buffer DDR_buf0 :" in new and "buffer a :" in new
    assert "loop i0 in [0..3]" in old and "loop a in [0..1]" in old
    assert "buffer DDR_buf1 :" in old and "buffer a_v1 :" in old
    renamed = {"i1": "i0", "a_v1": "a", "DDR_buf0": "DDR_buf1", "a": "a_v1"}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renamed)) + r")\b")
    assert pattern.sub(lambda m: renamed[m[1]], new) == old


UNUSED = """
func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
  %u = memref.alloc() : memref<64xf32, 1>
  %v = memref.alloc() : memref<64xf32, 2>
  memref.copy %x, %v : memref<64xf32> to memref<64xf32, 2>
  memref.copy %v, %y : memref<64xf32, 2> to memref<64xf32>
  memref.dealloc %u : memref<64xf32, 1>
  return
}
"""
"""An allocation no statement uses (`%u`): declared, then dropped."""


def test_the_old_pipeline_drops_its_unused_allocations(monkeypatch: pytest.MonkeyPatch) -> None:
    """The unused buffers the conversion drops are those the allocations of
    the function name (`memory_ops.allocation_buffers`, read from the IR);
    the old pipeline's, which `old_alloc` named, no op names, so it drops
    them by `old_allocation_buffers`: the same program, `u` dropped; with
    the new analysis alone it would keep `u` (the comparison would fail)."""
    new, old = lower(UNUSED, "main"), _before(UNUSED, "main")
    assert new == old and new[0] is not None
    assert "buffer v :" in new[0] and "buffer u :" not in new[0]
    monkeypatch.setattr(lowering_diff, "old_allocation_buffers", allocation_buffers)
    kept = _before(UNUSED, "main")[0]
    assert kept is not None and "buffer u :" in kept


@pytest.mark.parametrize("name", ["mlp", "cnn", "resblock", "transformer"])
def test_the_samples_compile_to_the_same_program(name: str, monkeypatch, tmp_path: Path) -> None:
    """`nem-compile` of the ONNX samples: the same `.nem` with the pass as
    with the old handler, and the pass made buffers."""
    after, old, made = sample_before_and_after(
        name,
        DeclareAllocationsPass,
        lambda o: isinstance(o, BufferOp) and o.is_allocation,
        OLD,
        monkeypatch,
        tmp_path,
    )
    assert made > 0 and old == after
