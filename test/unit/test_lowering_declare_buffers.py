"""`nem-declare-buffers` (D-LOW-DECLARE): the entry's memref arguments and
the globals it reads are named before the conversion, with the generator
(`Names`) the conversion resumes from the IR; `memref.get_global` becomes
`nem_lowering.buffer` by a pattern and leaves the conversion's table
(issue 36 item 1).

The differential test across that rewrite: `lower-to-nem` prints the same
`.nem` and the same remarks or errors as the pipeline before it, the
conversion naming the arguments (the same code, now the pass's
`name_arguments`, run where the conversion ran it) and the conversion's old
`get_global` handler (kept below) naming and declaring each global at its
first use, on every lowering input.  The decided changes (a global's buffer
declared after the arguments, before the allocations; its name taken before
the conversion's names) are shown on inputs of their own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from weakref import WeakKeyDictionary

import lowering_diff
import numpy as np
import pytest
from lowering_diff import (
    INPUTS,
    LIT_MLIR,
    MLIR_INPUTS,
    OLD_ALLOCATIONS,
    Steps,
    assert_unchanged,
    before,
    lower,
    old_global_view,
)
from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.traits import SymbolTable

from nem.compile.lower import xdsl_context
from nem.dialect.buffer_op import BufferOp
from nem.frontends.upstream_dialects import parse_mlir
from nem.frontends.upstream_dialects.memref_global import GlobalOp
from nem.passes.lowering.context import LoweringContext, Names
from nem.passes.lowering.declare_allocations import DeclareAllocationsPass
from nem.passes.lowering.declare_buffers import (
    DeclareBuffersPass,
    keep,
    name_arguments,
    resumed_names,
)
from nem.passes.lowering.diagnostics import reject
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.memory_ops import lower_alloc
from nem.passes.lowering.memref_globals import initial_contents
from nem.passes.lowering.passes import PreparedConversionPass
from nem.passes.lowering.prepare import entry_function
from nem.passes.lowering.state import BlockState, Handler, Lowering
from nem.passes.lowering.views import View

_OLD_GLOBALS: WeakKeyDictionary[LoweringContext, dict[str, View]] = WeakKeyDictionary()
"""The old handler's `ctx.globals` (a field of the context before the pass)."""


def _old_get_global(lw: Lowering, op: memref.GetGlobalOp, st: BlockState) -> None:
    # (96e9d41f: memref_globals.lower_get_global and _declare, whose checks
    # are now global_view's, its contents kept as the old one kept them):
    # named and declared at its first use
    ctx = lw.ctx
    sym = op.name_.root_reference.data
    glob = SymbolTable.lookup_symbol(op, op.name_)
    if not isinstance(glob, GlobalOp):
        raise reject(op, f"@{sym} is not a memref.global")
    known = _OLD_GLOBALS.setdefault(ctx, {})
    view = known.get(sym)
    if view is None:
        view = known[sym] = old_global_view(ctx, glob, ctx.names.fresh(sym, "global"))
    ctx.views[op.memref] = view


OLD: dict[type[Operation], Handler] = {
    **HANDLERS,
    memref.GetGlobalOp: _old_get_global,
    **OLD_ALLOCATIONS,  # (the pass after this one, which declares these first, left out too)
}


@dataclass(frozen=True)
class ArgumentsOnly(ModulePass):
    """What the conversion did before the pass, first: name the arguments
    (and nothing else: the old handler names the globals)."""

    name = "test-name-arguments"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fn = entry_function(op, self.entry)
        keep(fn, name_arguments(fn))


def _before(steps: Steps) -> Steps:
    """`lower-to-nem`'s steps before the pass: no `nem-declare-buffers` (nor
    `nem-declare-allocations`, which came after it), the arguments named
    just before the conversion, which has the old table."""
    out = list(before(DeclareAllocationsPass, OLD)(before(DeclareBuffersPass, OLD)(steps)))
    at = next(k for k, p in enumerate(out) if isinstance(p, PreparedConversionPass))
    conversion = out[at]
    assert isinstance(conversion, PreparedConversionPass)
    out.insert(at, ArgumentsOnly(conversion.entry))
    return tuple(out)


def test_the_driver_no_longer_handles_get_global() -> None:
    """(The table's `nem_lowering.buffer` entry lowers allocations only:
    `test_lowering_declare_allocations.py`.)"""
    assert memref.GetGlobalOp not in HANDLERS and HANDLERS[BufferOp] is lower_alloc


OWN = "declare_buffers.mlir"
"""This pass's own lit test (its decided changes are below, by hand)."""
FILES = [p for p in MLIR_INPUTS + LIT_MLIR if p.name != OWN]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INPUTS.parents[1])))
def test_the_rewrite_changes_no_output(path: Path) -> None:
    """Every public function of every lowering input lowers to the same
    `.nem`, remarks and errors with the pass and as before it."""
    assert_unchanged(path, _before)


def _declared(text: str, entry: str = "main") -> str:
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    DeclareBuffersPass(entry).apply(ctx, module)
    return str(module)


def test_the_globals_become_buffers() -> None:
    """The differential is not vacuous: globals.mlir's four get_globals of
    three globals become three buffer ops, named after the globals."""
    (path,) = [p for p in FILES if p.name == "globals.mlir"]
    after = _declared(path.read_text())
    assert "memref.get_global" not in after and after.count('nem_lowering.buffer"()') == 3
    for name in ("w", "bias", "state"):
        assert f'<{{buffer = "{name}", global = @' in after, after


RESUMED = """
memref.global "private" @"w.0" : memref<4xf32> = uninitialized
func.func @main(%0: memref<4xf32>, %1: memref<4xf32>) {
  %g = memref.get_global @"w.0" : memref<4xf32>
  %2 = memref.alloc() : memref<4xf32>
  affine.for %i = 0 to 4 {
    %v = affine.load %g[%i] : memref<4xf32>
    affine.store %v, %2[%i] : memref<4xf32>
  }
  affine.for %j = 0 to 4 {
    %v = affine.load %2[%j] : memref<4xf32>
    affine.store %v, %1[%j] : memref<4xf32>
  }
  return
}
"""
"""Arguments and a global without a usable name (`arg<i>`, `global<n>`)
and an allocation named by the conversion after them (`DDR_buf<n>`)."""


def _buffers(nem: str | None) -> list[str]:
    assert nem is not None
    return [line for line in nem.splitlines() if line.startswith("buffer ")]


def test_the_conversion_resumes_the_generator() -> None:
    """The count of `DEFAULT<n>` names the pass leaves is load-bearing: the
    allocation's name goes on where the pass's names stopped, as one
    generator would have named them all (the output before the pass)."""
    new = lower(RESUMED, "main")
    assert new == lower(RESUMED, "main", _before)
    assert [b.split(" :")[0] for b in _buffers(new[0])] == [
        "buffer arg0",
        "buffer arg1",
        "buffer global2",
        "buffer DDR_buf3",
    ]
    module = parse_mlir(xdsl_context(), RESUMED)
    DeclareBuffersPass("main").apply(Context(), module)
    names = resumed_names(entry_function(module, "main"))
    assert names.defaults == 3 and names.fresh(None, "DDR_buf") == "DDR_buf3"
    assert Names().fresh(None, "DDR_buf") == "DDR_buf0"  # (without the count)


ORDER = """
memref.global "private" @w : memref<8xf32> = uninitialized
func.func @main(%x: memref<4xf32>) {
  %w = memref.alloc() : memref<4xf32>
  %g = memref.get_global @w : memref<8xf32>
  affine.for %i = 0 to 4 {
    %v = affine.load %x[%i] : memref<4xf32>
    affine.store %v, %w[%i] : memref<4xf32>
  }
  affine.for %i = 0 to 4 {
    %v = affine.load %w[%i] : memref<4xf32>
    affine.store %v, %g[%i] : memref<8xf32>
  }
  return
}
"""
"""An allocation (16 bytes) before the global's (32 bytes) first use, named
as the global."""


def test_a_global_is_declared_and_named_before_the_allocations() -> None:
    """The decided changes (D-LOW-DECLARE): the global's buffer comes after
    the arguments, before the allocation, and takes its name first (the
    allocation's buffer is `w_v1`); before the pass the allocation came
    first and took `w`."""
    new, old = lower(ORDER, "main")[0], lower(ORDER, "main", _before)[0]
    assert _buffers(new) == [
        "buffer x : DDR (size=16, align=64)",
        "buffer w : DDR (size=32, align=64)",
        "buffer w_v1 : DDR (size=16, align=64)",
    ]
    assert _buffers(old) == [
        "buffer x : DDR (size=16, align=64)",
        "buffer w : DDR (size=16, align=64)",
        "buffer w_v1 : DDR (size=32, align=64)",
    ]


def test_a_get_global_in_a_pure_nest_stays() -> None:
    """As `nem-rewrite-views`: only the get_globals the conversion lowers
    one by one become buffers; one in a pure nest (an escape-hatch kernel
    prints it as written) is kept."""
    text = """
memref.global "private" @w : memref<4xf32> = uninitialized
func.func @main(%y: memref<4xf32>) {
  affine.for %i = 0 to 4 {
    %g = memref.get_global @w : memref<4xf32>
    %v = affine.load %g[%i] : memref<4xf32>
    affine.store %v, %y[%i] : memref<4xf32>
  }
  return
}
"""
    after = _declared(text)
    assert "memref.get_global @w" in after and 'nem_lowering.buffer"()' not in after


WITH_GLOBALS = [p for p in MLIR_INPUTS + LIT_MLIR if "memref.global" in p.read_text()]
"""The inputs whose globals may have contents (session 46: the contents the
conversion writes are read from the IR, D-LOW-WALK)."""


@pytest.mark.parametrize("path", WITH_GLOBALS, ids=lambda p: p.name)
def test_the_contents_read_from_the_ir_change_no_output(path: Path) -> None:
    """`memref_globals.initial_contents` (the buffers at the start of the
    entry name their globals) in place of the record the conversion kept as
    it declared them (`old_globals`): the same `.nem`, remarks and errors."""
    assert_unchanged(path, before(None, HANDLERS))


CONTENTS = """
memref.global "private" constant @a : memref<2xf32> = dense<[1.0, 2.0]>
memref.global "private" constant @unused : memref<2xf32> = dense<3.0>
memref.global "private" constant @b : memref<2xi32> = dense<[4, 5]>
memref.global "private" @u : memref<2xf32> = uninitialized
func.func @main(%y: memref<2xf32>, %z: memref<2xi32>) {
  %u = memref.get_global @u : memref<2xf32>
  %b = memref.get_global @b : memref<2xi32>
  %a = memref.get_global @a : memref<2xf32>
  affine.for %i = 0 to 2 {
    %v = affine.load %a[%i] : memref<2xf32>
    affine.store %v, %y[%i] : memref<2xf32>
  }
  affine.for %i = 0 to 2 {
    %v = affine.load %b[%i] : memref<2xi32>
    affine.store %v, %z[%i] : memref<2xi32>
  }
  return
}
"""
"""Globals: two with contents read (`b` first), one with contents never
read, one read with none."""


def _lowered_with_weights(
    tmp_path: Path, edit: Callable[[Steps], Steps] | None = None
) -> tuple[str, list[str]]:
    """The `.nem` of CONTENTS with `weights=` and the archive's arrays, each
    `NAME=VALUES`, in its order."""
    path = tmp_path / "w.npz"
    path.unlink(missing_ok=True)
    nem, _ = lower(CONTENTS, "main", edit, weights=str(path))
    assert nem is not None
    with np.load(path) as archive:
        return nem, [f"{k}={archive[k].tolist()}" for k in archive.files]


def test_the_archive_holds_the_contents_the_buffers_name(tmp_path: Path) -> None:
    """The entry's buffers with contents in their order, `b` before `a`;
    not the unused global's; the archive and the program as the
    record gave them, which the old pipeline writes (with no record, no
    archive: the comparison can fail)."""
    assert initial_names(CONTENTS) == ["b", "a"]
    new = _lowered_with_weights(tmp_path)
    assert new[1] == ["b=[4, 5]", "a=[1.0, 2.0]"]
    old = before(None, HANDLERS)
    assert _lowered_with_weights(tmp_path, old) == new
    with pytest.MonkeyPatch.context() as m:
        m.setattr(lowering_diff, "old_initial_contents", lambda fn: {})
        with pytest.raises(FileNotFoundError):
            _lowered_with_weights(tmp_path, old)


def initial_names(text: str) -> list[str]:
    """The buffers `initial_contents` finds in `text`'s `main`, declared."""
    module = parse_mlir(xdsl_context(), text)
    DeclareBuffersPass("main").apply(Context(), module)
    return list(initial_contents(entry_function(module, "main")))
