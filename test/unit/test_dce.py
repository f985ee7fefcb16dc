"""`dce` in one pass (`nem.passes.dce`, D-COMPILE-DCE-ONEPASS): it deletes
exactly the ops xDSL's `region_dce` deletes, on a module with every case
(pure chains, dead users of pure ops, regions with and without effects,
unknown effects, an unreachable block) and on the lowered programs
`nem-compile` runs it on."""

from __future__ import annotations

import io

from xdsl.printer import Printer
from xdsl.transforms.dead_code_elimination import region_dce as xdsl_region_dce

from nem.compile.lower import xdsl_context
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes import dce

ONE_PASS = dce.region_dce

CASES = """\
func.func @f(%m: memref<8xf32>, %n: index, %c: i1) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %x = arith.constant 1.0 : f32
  %dead = arith.addi %n, %c1 : index
  %dead2 = arith.muli %dead, %dead : index
  %via1 = arith.addi %n, %c1 : index
  %via2 = arith.muli %via1, %via1 : index
  %live1 = arith.addi %n, %c8 : index
  %live2 = arith.muli %live1, %c1 : index
  memref.store %x, %m[%live2] : memref<8xf32>
  %ld = memref.load %m[%c0] : memref<8xf32>
  %unused = memref.alloc() : memref<4xf32>
  %used = memref.alloc() : memref<4xf32>
  memref.store %ld, %used[%c0] : memref<4xf32>
  scf.for %i = %c0 to %c8 step %c1 {
    %p = arith.addi %i, %c1 : index
    %q = arith.muli %p, %p : index
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %p = arith.addi %i, %via2 : index
    memref.store %x, %m[%p] : memref<8xf32>
  }
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%a = %c0) -> (index) {
    %s = arith.addi %a, %i : index
    scf.yield %s : index
  }
  %u = "test.unknown"(%c1) : (index) -> index
  %ret = arith.addi %c8, %c8 : index
  cf.br ^bb1
^bb1:
  func.return %ret : index
^bb2:
  %lost = arith.addi %c1, %c1 : index
  func.return %lost : index
}
"""


def generic(module) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue()


def both(module) -> tuple[str, str]:
    """(xDSL's result, the one-pass result) on two clones of `module`."""
    a, b = module.clone(), module.clone()
    xdsl_region_dce(a.body)
    ONE_PASS(b.body)
    return generic(a), generic(b)


def test_same_ops_deleted_as_xdsl():
    ctx = xdsl_context()
    ctx.allow_unregistered = True
    module = parse_mlir(ctx, CASES, "t.mlir")
    before = generic(module)
    theirs, ours = both(module)
    assert ours == theirs
    # the cases are cases: a dead chain, loops of pure ops and the unreachable
    # block go; what a store in a loop uses (%via2) and unknown effects stay
    assert theirs.count('"arith.addi"') == before.count('"arith.addi"') - 4
    assert theirs.count('"arith.muli"') == before.count('"arith.muli"') - 2
    assert "^bb2" in before and "^bb2" not in theirs
    assert '"test.unknown"' in theirs


def test_one_block_regions_erase_what_xdsl_erases(monkeypatch):
    """Every region of one block (what the lowering's programs are): the
    dead ops are erased in the sweep's order, without `_delete_dead`'s
    walk; the same module as xDSL's."""
    ctx = xdsl_context()
    ctx.allow_unregistered = True
    at = CASES.index("  cf.br ^bb1")
    module = parse_mlir(ctx, CASES[:at] + "  func.return %ret : index\n}\n", "t.mlir")
    monkeypatch.setattr(dce, "_delete_dead", None)  # not called: would raise
    theirs, ours = both(module)
    assert ours == theirs
    assert theirs.count('"arith.addi"') == generic(module).count('"arith.addi"') - 3


def test_nem_compile_runs_it_with_xdsl_result(monkeypatch):
    """Both `dce` runs of a compile (after forward fills, in lower-to-nem's
    pipeline) give xDSL's module (the cases above are the ones it deletes:
    on this sample, nothing)."""
    from nem.compile import compile_onnx
    from nem.frontends.onnx import samples

    seen: list[tuple[int, int]] = []

    def checked(region) -> None:
        module = region.parent_op()
        theirs, ours = both(module)
        assert ours == theirs
        count = len(list(module.walk()))
        ONE_PASS(region)
        assert generic(module) == theirs
        seen.append((count, len(list(module.walk()))))

    monkeypatch.setattr(dce, "region_dce", checked)
    compile_onnx(samples.cnn(), device="npm_pro_x1")
    assert len(seen) == 2
    assert all(after <= before for before, after in seen)


def test_pass_keeps_xdsl_name():
    from xdsl.transforms.dead_code_elimination import DeadCodeElimination

    assert dce.OnePassDeadCodeElimination.name == DeadCodeElimination.name == "dce"
