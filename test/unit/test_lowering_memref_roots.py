"""Which buffer a memref value is, its element type and shape, from the MLIR
alone (`memref_roots.MemrefRoots`, D-LOW-OUTLINE): the facts the
raise-or-escape decision reads, equal to what the conversion's views say
wherever it makes one, so that a pass deciding before the conversion and
the conversion cannot disagree."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from xdsl.dialects import affine, func, linalg
from xdsl.dialects.builtin import MemRefType, ModuleOp, f32
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import ParseError

from nem.dialect.attributes import MemLevelAttr
from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc
from nem.frontends.upstream_dialects import lowering_context, parse_mlir
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.context import Options
from nem.passes.lowering.driver import Lowerer
from nem.passes.lowering.escape import location_text
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.memref_roots import MemrefRoots
from nem.passes.lowering.passes import DEFAULT_SPACES, parse_spaces, preparation
from nem.passes.lowering.peeled_loops import PeeledLoops
from nem.passes.lowering.prepare import entry_function
from nem.passes.lowering.raise_decision import Escape, RaiseAnalysis
from nem.passes.lowering.views import View, row_major

ROOTS = """
memref.global "private" constant @w : memref<4x4xf32> = dense<1.0>
func.func @f(%A: memref<8x4xf32>, %n: index) {
  %g1 = memref.get_global @w : memref<4x4xf32>
  %g2 = memref.get_global @w : memref<4x4xf32>
  %b = memref.alloc() : memref<16xf32, 2>
  %c = memref.alloc() : memref<16xf32, 2>
  %s = memref.alloca() : memref<2xf32, 2>
  %tag = memref.alloc() : memref<1xi32>
  %sv = memref.subview %A[2, 0] [4, 4] [1, 1] : memref<8x4xf32> to memref<4x4xf32, strided<[4, 1], offset: 8>>
  %dyn = memref.subview %A[0, 0] [%n, 4] [1, 1] : memref<8x4xf32> to memref<?x4xf32, strided<[4, 1]>>
  %e = memref.expand_shape %b [[0, 1]] output_shape [4, 4] : memref<16xf32, 2> into memref<4x4xf32, 2>
  %k = memref.collapse_shape %e [[0, 1]] : memref<4x4xf32, 2> into memref<16xf32, 2>
  %cs = "memref.cast"(%c) : (memref<16xf32, 2>) -> memref<?xf32, 2>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  affine.dma_start %A[%c0, %c0], %b[%c0], %tag[%c0], %c1 : memref<8x4xf32>, memref<16xf32, 2>, memref<1xi32>
  affine.dma_wait %tag[%c0], %c1 : memref<1xi32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%g1 : memref<4x4xf32>) outs(%g2 : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  func.return
}
"""


def _function(text: str) -> func.FuncOp:
    module = parse_mlir(lowering_context(), text)
    assert isinstance(module, ModuleOp)
    (fn,) = [f for f in module.ops if isinstance(f, func.FuncOp)]
    return fn


def _named(fn: func.FuncOp) -> dict[str, SSAValue]:
    values = {a.name_hint: a for a in fn.body.block.args}
    for op in fn.walk():
        values.update({r.name_hint: r for r in op.results if r.name_hint})
    return values


def test_each_root_kind_and_the_views_of_it() -> None:
    fn = _function(ROOTS)
    roots, v = MemrefRoots(fn), _named(fn)
    fact = {name: roots.get(val) for name, val in v.items()}
    assert fact["A"] is not None and fact["A"].root is v["A"]
    assert fact["g1"] is not None and fact["g2"] is not None
    assert fact["g1"].root == fact["g2"].root == "w"  # one symbol, one buffer
    assert fact["b"] is not None and fact["c"] is not None and fact["b"].root != fact["c"].root
    assert fact["s"] is not None and fact["s"].root is v["s"] and fact["s"].shape == (2,)
    assert fact["tag"] is None  # a DMA tag: no buffer (D-LOW-BUF)
    assert fact["n"] is None and fact["c0"] is None
    sv, dyn, e, k, cs = (fact[n] for n in ("sv", "dyn", "e", "k", "cs"))
    assert sv is not None and sv.root is v["A"] and sv.shape == (4, 4) and sv.elem == f32
    assert dyn is not None and dyn.root is v["A"] and dyn.shape is None
    assert e is not None and k is not None and e.root is k.root is v["b"]
    assert (e.shape, k.shape) == ((4, 4), (16,))
    assert cs is not None and cs.root is v["c"] and cs.shape == (16,)  # the cast keeps its view


def _no_view(m: SSAValue, user: Operation) -> View:
    raise AssertionError("the decision asked the conversion for a view")


def _own_view(m: SSAValue, user: Operation) -> View:
    """A view of a buffer of its own for each memref value (what the
    conversion's views would say if buffers came from them alone)."""
    t = m.type
    assert isinstance(t, MemRefType)
    shape = tuple(t.get_shape())
    return View(m, MemLevelAttr("DDR"), t.element_type, shape, row_major(shape), Aff.c(0), "m")


def test_which_buffer_is_read_from_the_mlir() -> None:
    """Two `get_global`s of one symbol are one buffer: the copy between
    them escapes, whatever views the conversion passes for the boxes (it
    fails without MemrefRoots: the view was the only source of the
    buffer, and these views say two)."""
    fn = _function(ROOTS)
    (generic,) = [op for op in fn.walk() if isinstance(op, linalg.GenericOp)]
    decision = RaiseAnalysis({}, _own_view, MemrefRoots(fn)).linalg(generic)
    assert decision == Escape("a copy within one buffer")


def test_a_memref_without_a_fact_is_the_conversions_reject() -> None:
    """A DMA tag has no fact: asking for its buffer asks the conversion's
    view, whose located reject (`LoweringContext.view`) is the error, as
    before."""
    fn = _function(ROOTS)
    analysis = RaiseAnalysis({}, _no_view, MemrefRoots(fn))
    with pytest.raises(AssertionError, match="asked the conversion"):
        analysis.buffer_of(_named(fn)["tag"], fn)
    assert analysis.buffer_of(_named(fn)["k"], fn) is _named(fn)["b"]


INPUTS = Path(__file__).resolve().parents[1] / "lit" / "lowering" / "Inputs"


def _inputs() -> list[Path]:
    return sorted(p for p in INPUTS.rglob("*.mlir") if "graph" not in p.parts)


def _lower_each(path: Path) -> list[tuple[str, Lowerer, set[str], set[str]]]:
    """Each public function of `path` the conversion lowers (npm_pro_x1):
    its name, the `Lowerer` after the run, and on the prepared function
    the locations of the loops `PeeledLoops` names and of the loops it
    says are `decided_per_copy`."""
    ctx = lowering_context()
    try:
        entries = [f.sym_name.data for f in _function_list(parse_mlir(ctx, path.read_text()))]
    except ParseError:
        pytest.skip("an upstream input (a transform script, scf, math): lit runs it")
    out = []
    for entry in entries:
        module = parse_mlir(ctx, path.read_text())
        options = Options(parse_spaces(DEFAULT_SPACES), device="npm_pro_x1", entry=entry)
        lowerer = Lowerer(options, HANDLERS)
        try:
            for p in preparation(entry):
                p.apply(ctx, module)
            peeled = PeeledLoops(entry_function(module, entry))
            may_peel = {str(SourceLoc.of(loop)) for loop in peeled.loops}
            per_copy = {
                location_text(op)
                for op in module.walk()
                if isinstance(op, affine.ForOp) and peeled.decided_per_copy(op)
            }
            lowerer.run(module)
        except NemDiagnosticError:
            continue  # an input of a negative test
        out.append((entry, lowerer, may_peel, per_copy))
    assert out or not entries
    return out


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: str(p.relative_to(INPUTS)))
def test_the_facts_are_the_conversions_views(path: Path) -> None:
    """For every function the conversion lowers in the lowering inputs,
    every memref value it gives a view has a fact, equal roots are exactly
    equal buffers, and the element type and (static) shape are the view's;
    every loop it peels is one `PeeledLoops` names, and every nest it
    decides twice is `decided_per_copy`."""
    for entry, lowerer, may_peel, per_copy in _lower_each(path):
        views, roots = lowerer.ctx.views, lowerer.ctx.roots
        buffer_of_root: dict[object, SSAValue] = {}
        root_of_buffer: dict[SSAValue, object] = {}
        for value, view in views.items():
            fact = roots.get(value)
            assert fact is not None, f"{entry}: no fact for {value.type}"
            assert fact.elem == view.elem
            assert fact.shape in (None, view.shape)
            assert buffer_of_root.setdefault(fact.root, view.buffer) is view.buffer
            assert root_of_buffer.setdefault(view.buffer, fact.root) == fact.root
        assert set(_peeled(lowerer)) <= may_peel
        assert _decided_twice(lowerer) <= per_copy


def _peeled(lowerer: Lowerer) -> list[str]:
    """The locations of the loops the conversion peeled (its notes)."""
    notes = lowerer.ctx.summary.notes
    return [n.removeprefix("loop at ").split(": partial")[0] for n in notes if "peeled" in n]


PARTIAL = [
    "eltwise_partial_tiled.mlir",
    "eltwise_partial_3d_tiled.mlir",
    "eltwise_partial_cols_tiled.mlir",
    "eltwise_partial_pipelined.mlir",
]


def _decided_twice(lowerer: Lowerer) -> set[str]:
    """The locations of the nests the conversion decided more than once
    (raised or escaped: one summary entry per decision)."""
    summary = lowerer.ctx.summary
    whats = [r.split(" -> ")[0] for r in summary.raised] + [f.what for f in summary.fallback]
    nests = Counter(w.removeprefix("loop nest at ") for w in whats if w.startswith("loop nest at"))
    return {loc for loc, n in nests.items() if n > 1}


@pytest.mark.parametrize("name", PARTIAL)
def test_peeled_loops_and_the_nests_decided_per_copy(name: str) -> None:
    """Inputs whose last tile is partial: the conversion peels a loop and
    decides its nest twice, and `PeeledLoops` names them (the check of
    `test_the_facts_are_the_conversions_views` is not vacuous); a function
    with no partial-tile candidate has no loop that may peel."""
    ((_, lowerer, may_peel, per_copy),) = _lower_each(INPUTS / name)
    assert _peeled(lowerer) and set(_peeled(lowerer)) <= may_peel
    assert _decided_twice(lowerer) and _decided_twice(lowerer) <= per_copy
    assert not PeeledLoops(_function(ADD)).loops


ADD = """
func.func @add(%A: memref<64xf32>, %C: memref<64xf32>) {
  affine.for %t = 0 to 64 step 16 {
    affine.for %i = 0 to 16 {
      %a = affine.load %A[%t + %i] : memref<64xf32>
      %s = arith.addf %a, %a : f32
      affine.store %s, %C[%t + %i] : memref<64xf32>
    }
  }
  func.return
}
"""


def _function_list(module: Operation) -> list[func.FuncOp]:
    return [
        f
        for f in module.walk()
        if isinstance(f, func.FuncOp) and f.body.blocks and f.sym_visibility is None
    ]
