"""The raise-or-escape decision as an analysis apart from the conversion
(`raise_decision.RaiseAnalysis`, D-LOW-OUTLINE): on parsed MLIR, with each
memref argument its own buffer, it names the plan or the reason of the
escape, builds nothing, and the conversion's remark prints that reason."""

from __future__ import annotations

import pytest
from xdsl.dialects import affine, func
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Operation, SSAValue

from nem.dialect.attributes import MemLevelAttr
from nem.frontends.upstream_dialects import lowering_context, parse_mlir
from nem.passes.lowering import raise_decision as rd
from nem.passes.lowering.affine_algebra import Aff
from nem.passes.lowering.broadcasts import BroadcastPlan
from nem.passes.lowering.context import Options
from nem.passes.lowering.driver import EscapeRemark, Lowerer
from nem.passes.lowering.escape import CARRIED
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.memref_roots import MemrefRoots
from nem.passes.lowering.passes import parse_spaces
from nem.passes.lowering.raise_decision import Decision, Escape, RaiseAnalysis
from nem.passes.lowering.views import View, row_major

NESTS = """
func.func @add(%A: memref<8xf32>, %B: memref<8xf32>, %C: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %a = affine.load %A[%i] : memref<8xf32>
    %b = affine.load %B[%i] : memref<8xf32>
    %s = arith.addf %a, %b : f32
    affine.store %s, %C[%i] : memref<8xf32>
  }
  func.return
}
func.func @matmul(%A: memref<4x8xf32>, %B: memref<8x2xf32>, %C: memref<4x2xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 2 {
      affine.for %k = 0 to 8 {
        %a = affine.load %A[%i, %k] : memref<4x8xf32>
        %b = affine.load %B[%k, %j] : memref<8x2xf32>
        %c = affine.load %C[%i, %j] : memref<4x2xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<4x2xf32>
      }
    }
  }
  func.return
}
func.func @copy(%A: memref<8xf32>, %C: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %a = affine.load %A[%i] : memref<8xf32>
    affine.store %a, %C[%i] : memref<8xf32>
  }
  func.return
}
func.func @broadcast(%A: memref<8xf32>, %C: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %a = affine.load %A[%j] : memref<8xf32>
      affine.store %a, %C[%i, %j] : memref<4x8xf32>
    }
  }
  func.return
}
func.func @zero(%C: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %z = arith.constant 0.0 : f32
    affine.store %z, %C[%i] : memref<8xf32>
  }
  func.return
}
func.func @nan(%C: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %z = arith.constant 0x7FC00000 : f32
    affine.store %z, %C[%i] : memref<8xf32>
  }
  func.return
}
func.func @sum(%A: memref<8xf32>, %S: memref<1xf32>) {
  %z = arith.constant 0.0 : f32
  %r = affine.for %i = 0 to 8 iter_args(%acc = %z) -> (f32) {
    %a = affine.load %A[%i] : memref<8xf32>
    %s = arith.addf %acc, %a : f32
    affine.yield %s : f32
  }
  affine.store %r, %S[0] : memref<1xf32>
  func.return
}
func.func @shifted(%A: memref<9xf32>) {
  affine.for %i = 0 to 8 {
    %a = affine.load %A[%i] : memref<9xf32>
    %s = arith.addf %a, %a : f32
    affine.store %s, %A[%i + 1] : memref<9xf32>
  }
  func.return
}
func.func @reversed(%A: memref<8xf32>, %C: memref<8xf32>) {
  affine.for %i = 0 to 8 {
    %a = affine.load %A[7 - %i] : memref<8xf32>
    %s = arith.addf %a, %a : f32
    affine.store %s, %C[%i] : memref<8xf32>
  }
  func.return
}
func.func @linalg(%A: memref<4x8xf32>, %B: memref<8x2xf32>, %C: memref<4x2xf32>, %x: f32,
                  %Q: memref<4x4xf32>, %H: memref<4x8xf16>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%C : memref<4x2xf32>)
  linalg.fill ins(%x : f32) outs(%C : memref<4x2xf32>)
  linalg.matmul ins(%A, %B : memref<4x8xf32>, memref<8x2xf32>) outs(%C : memref<4x2xf32>)
  linalg.add ins(%C, %C : memref<4x2xf32>, memref<4x2xf32>) outs(%C : memref<4x2xf32>)
  linalg.matmul ins(%Q, %Q : memref<4x4xf32>, memref<4x4xf32>) outs(%Q : memref<4x4xf32>)
  linalg.copy ins(%A : memref<4x8xf32>) outs(%H : memref<4x8xf16>)
  func.return
}
"""


def _functions() -> dict[str, func.FuncOp]:
    module = parse_mlir(lowering_context(), NESTS)
    assert isinstance(module, ModuleOp)
    return {f.sym_name.data: f for f in module.ops if isinstance(f, func.FuncOp)}


def _view(m: SSAValue, user: Operation) -> View:
    """Each memref argument a DDR buffer of its own (the argument stands for it)."""
    t = m.type
    assert isinstance(t, MemRefType)
    shape = tuple(t.get_shape())
    return View(m, MemLevelAttr("DDR"), t.element_type, shape, row_major(shape), Aff.c(0), "m")


def _decide(fn: func.FuncOp) -> list[Decision]:
    analysis = RaiseAnalysis({}, _view, MemrefRoots(fn))
    return [
        analysis.nest(op) if isinstance(op, affine.ForOp) else analysis.linalg(op)
        for op in fn.body.block.ops
        if isinstance(op, affine.ForOp) or op.name.startswith("linalg.")
    ]


@pytest.fixture(scope="module")
def functions() -> dict[str, func.FuncOp]:
    return _functions()


def test_raised_nests(functions) -> None:
    (add,) = _decide(functions["add"])
    assert isinstance(add, rd.Eltwise) and [r.opcode for r in add.roots] == ["add"]
    assert add.extents == {0: 8}
    (mm,) = _decide(functions["matmul"])
    assert isinstance(mm, rd.NestMatmul) and mm.extents == {0: 4, 1: 2, 2: 8}
    (cp,) = _decide(functions["copy"])
    assert isinstance(cp, rd.Copy) and cp.src.dims == cp.dst.dims == [0]
    (bc,) = _decide(functions["broadcast"])
    assert isinstance(bc, BroadcastPlan) and bc.broadcast_dims == [0]
    (zero,) = _decide(functions["zero"])
    assert isinstance(zero, rd.Fill) and zero.box.shape == (8,) and zero.steps == (("zero", 0),)


def test_escaped_nests_say_why() -> None:
    fns = _functions()
    (carried,) = _decide(fns["sum"])
    store = list(fns["sum"].body.block.ops)[-2]
    assert carried == Escape(CARRIED, (store,))
    (shifted,) = _decide(fns["shifted"])
    assert isinstance(shifted, Escape) and "(D-LOW-ALIAS)" in shifted.why
    (nan,) = _decide(fns["nan"])
    assert isinstance(nan, Escape) and nan.why.startswith("a NaN fill (D-LOW-FILL")
    (rev,) = _decide(fns["reversed"])
    assert isinstance(rev, Escape) and rev.after == ()


def test_linalg(functions) -> None:
    fill, not_constant, mm, add, into_operand, cast = _decide(functions["linalg"])
    assert isinstance(fill, rd.Fill) and fill.box.shape == (4, 2)
    assert not_constant == Escape("a fill with a value that is not an arith.constant")
    assert mm == rd.NamedLinalg("linalg.matmul")
    assert isinstance(add, rd.NamedEltwise) and add.root.opcode == "add"
    assert isinstance(into_operand, Escape) and "(D-LOW-ALIAS)" in into_operand.why
    assert cast == Escape("no NEM opcode for this linalg op")


def test_the_analysis_builds_nothing(functions) -> None:
    """Deciding leaves the MLIR as it was (the conversion builds the tasks)."""
    before = {name: str(fn) for name, fn in functions.items()}
    for fn in functions.values():
        _decide(fn)
    assert {name: str(fn) for name, fn in functions.items()} == before


@pytest.mark.parametrize("name", ["sum", "shifted", "reversed"])
def test_the_remark_prints_the_analysis_reason(name) -> None:
    """One home for the fact: the conversion escapes the nest for the
    reason the analysis gives, and its remark prints that reason."""
    fns = _functions()
    (decision,) = _decide(fns[name])
    assert isinstance(decision, Escape)
    module = fns[name].parent_op()
    assert isinstance(module, ModuleOp)
    lowerer = Lowerer(Options(parse_spaces("0:DDR"), entry=name, remarks=True), HANDLERS)
    lowerer.run(module)
    (remark,) = [r for r in lowerer.remarks if isinstance(r, EscapeRemark)]
    assert remark.message.endswith(f'(compute op="mlir.kernel"): {decision.why}')
