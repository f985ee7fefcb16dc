"""`nem-outline-kernels` (D-LOW-OUTLINE): the nests it outlines as
`nem_lowering.kernel` lower to the very tasks the conversion's escape hatch
emits, so `lower-to-nem` prints the same `.nem` and the same remarks with
the pass and without it, on every lowering input; and it outlines only
what the conversion would escape on every target."""

from __future__ import annotations

from pathlib import Path

import pytest
from lowering_diff import INPUTS, MLIR_INPUTS, Outcome, entries, lower
from xdsl.dialects import affine, func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nem.compile.lower import xdsl_context
from nem.dialect.kernel_op import KernelOp
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.lowering.outline_kernels import OutlineKernelsPass


def _lower(text: str, entry: str, keep: type[ModulePass] | None) -> Outcome:
    """`lower-to-nem` of `entry`, without `nem-outline-kernels` when `keep` is None."""
    if keep is not None:
        return lower(text, entry)
    return lower(
        text, entry, lambda steps: tuple(p for p in steps if not isinstance(p, OutlineKernelsPass))
    )


def _outlined(text: str, entry: str) -> ModuleOp:
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    OutlineKernelsPass(entry).apply(ctx, module)
    return module


def _kernels(module: ModuleOp) -> list[KernelOp]:
    return [o for o in module.walk() if isinstance(o, KernelOp)]


@pytest.mark.parametrize("path", MLIR_INPUTS, ids=lambda p: str(p.relative_to(INPUTS)))
def test_the_pass_changes_no_output(path: Path) -> None:
    """With and without the pass: the same `.nem`, remarks and errors."""
    text = path.read_text()
    for entry in entries(path):
        without = _lower(text, entry, None)
        assert _lower(text, entry, OutlineKernelsPass) == without, entry


OUTLINED = {
    # (input, entry): why its one nest escapes
    ("carried.mlir", "sum"): "a value carried out of the loop",
    ("raise/casts.mlir", "fptosi"): "",
    ("raise/fills.mlir", "diagonal"): "",
}


@pytest.mark.parametrize("case", sorted(OUTLINED))
def test_what_escapes_on_every_target_is_outlined(case: tuple[str, str]) -> None:
    """The differential test above is not vacuous: these nests are outlined,
    with the conversion's remark text as `why`, and none is left behind."""
    name, entry = case
    text = (INPUTS / name).read_text()
    module = _outlined(text, entry)
    (kernel,) = _kernels(module)
    assert OUTLINED[case] in kernel.why.data
    assert kernel.what.data.startswith("loop nest at ")
    _, remarks = _lower(text, entry, None)
    assert any(kernel.why.data in r[1] and kernel.what.data in r[1] for r in remarks)
    assert not _top_loops(module, entry)


def _top_loops(module: ModuleOp, entry: str) -> list[affine.ForOp]:
    """The loops at the top level of function `entry`."""
    (fn,) = (f for f in module.ops if isinstance(f, func.FuncOp) and f.sym_name.data == entry)
    return [o for o in fn.body.block.ops if isinstance(o, affine.ForOp)]


INSIDE = """
func.func @f(%A: memref<32xf32>, %B: memref<32xf32>, %S: memref<4xf32>, %M: memref<4x8xf32>) {
  %c2 = arith.constant 2 : index
  %n = affine.apply affine_map<(d0) -> (d0 + 1)>(%c2)
  affine.for %t = 0 to 32 step 8 {
    affine.for %i = 0 to 8 {
      %a = affine.load %A[31 - %t - %i] : memref<32xf32>
      affine.store %a, %B[%t + %i] : memref<32xf32>
    }
  }
  affine.for %i = 0 to 8 {
    %a = affine.load %A[31 - %i - %n] : memref<32xf32>
    affine.store %a, %B[%i] : memref<32xf32>
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%M : memref<4x8xf32>) outs(%S : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %out, %in : f32
    linalg.yield %0 : f32
  }
  return
}
"""


def test_nests_in_loops_and_linalg_ops_are_outlined() -> None:
    """A nest in a tile loop takes the loop variable as its index operand, a
    nest using an `affine.apply` of constants that value; a linalg op whose
    operands are buffers of their own is decided without a view; the whole
    lowers as without the pass."""
    module = _outlined(INSIDE, "f")
    tiled, applied, generic = _kernels(module)
    assert isinstance(tiled.parent_op(), affine.ForOp)
    assert [v.name_hint for v in tiled.index_args] == ["t"]
    assert [v.name_hint for v in applied.index_args] == ["n"]
    assert tiled.why.data == applied.why.data == "a strided or skewed access"
    assert generic.what.data.startswith("linalg.generic at ")
    assert "a sum over whole axes" in generic.why.data
    assert _top_loops(module, "f") == [tiled.parent_op()]  # the tile loop stays
    assert _lower(INSIDE, "f", OutlineKernelsPass) == _lower(INSIDE, "f", None)


LEFT = """
func.func @f(%A: memref<32xf32>, %B: memref<32xf32>, %C: memref<17xf32>, %s: memref<1xf32>) {
  %c2 = arith.constant 2 : index
  %x = affine.load %s[0] : memref<1xf32>
  affine.for %t = 0 to 30 step 8 {
    affine.for %i = 0 to min affine_map<(d0) -> (8, 30 - d0)>(%t) {
      %a = affine.load %A[31 - %t - %i] : memref<32xf32>
      affine.store %a, %B[%t + %i] : memref<32xf32>
    }
  }
  affine.for %t = 0 to 24 step 8 {
    %o = arith.addi %t, %c2 : index
    affine.for %i = 0 to 8 {
      %a = affine.load %A[%o + %i] : memref<32xf32>
      affine.store %a, %B[%t + %i] : memref<32xf32>
    }
  }
  affine.for %i = 0 to 8 {
    %a = affine.load %A[31 - %i] : memref<32xf32>
    %b = arith.mulf %a, %x : f32
    affine.store %b, %B[%i] : memref<32xf32>
  }
  affine.for %i = 0 to 16 {
    %a = affine.load %C[%i] : memref<17xf32>
    %b = arith.mulf %a, %a : f32
    affine.store %b, %C[%i + 1] : memref<17xf32>
  }
  affine.for %i = 0 to 8 {
    %a = affine.load %A[31 - %i] : memref<32xf32>
    affine.store %a, %B[%i] : memref<32xf32>
  }
  return
}
"""


def test_what_the_conversion_decides_is_left_to_it() -> None:
    """A nest in a loop whose last tile is partial (decided per copy,
    D-LOW-PEEL), one taking an index value the pass does not evaluate
    (`arith.addi`: a copy the conversion raises), one using a value a load outside gives (its kernel
    loads it itself), one whose decision reads a view's box (D-LOW-ALIAS)
    stay loops; the last nest, which escapes on its own, is outlined, and
    the whole lowers as without the pass."""
    module = _outlined(LEFT, "f")
    (kernel,) = _kernels(module)
    assert kernel.why.data == "a strided or skewed access"
    assert kernel.ins[0].name_hint == "A" and kernel.outs[0].name_hint == "B"
    assert len(_top_loops(module, "f")) == 4
    assert _lower(LEFT, "f", OutlineKernelsPass) == _lower(LEFT, "f", None)


SCF_NEST = """
func.func @f(%A: memref<4x8xf32>, %B: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  affine.for %j = 0 to 8 {
    scf.for %i = %c0 to %c4 step %c1 {
      %a = affine.load %A[%i, 7 - %j] : memref<4x8xf32>
      affine.store %a, %B[%i, %j] : memref<4x8xf32>
    }
  }
  return
}
"""


def test_an_scf_nests_kernel_carries_no_lowering_mark() -> None:
    """An `scf.for` raised to `affine.for` carries `nem_lowering.replaces`
    for messages (D-LOW-SCF); when its nest escapes, the kernel the task
    holds is the user's loop, with no mark of the lowering's own in it."""
    nem, remarks = _lower(SCF_NEST, "f", OutlineKernelsPass)
    assert nem is not None, remarks
    assert 'op="mlir.kernel"' in nem
    assert "nem_lowering" not in nem
