"""`nem-outline-kernels` (D-LOW-OUTLINE): the nests it outlines as
`nem_lowering.kernel` lower to the very tasks the conversion's escape hatch
emits, so `lower-to-nem` prints the same `.nem` and the same remarks with
the pass and without it, on every lowering input; and it outlines only
what the conversion would escape on every target."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import affine, func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import ParseError

from nem.compile.lower import xdsl_context
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError
from nem.dialect.kernel_op import KernelOp
from nem.frontends.nem_text.printer import print_nem
from nem.frontends.upstream_dialects import parse_mlir
from nem.passes.driver import run_pipeline
from nem.passes.lowering.outline_kernels import OutlineKernelsPass
from nem.passes.lowering.passes import LowerToNemPass

INPUTS = Path(__file__).resolve().parents[1] / "lit" / "lowering" / "Inputs"


def _entries(path: Path) -> list[str]:
    """The public functions of `path` (each an entry `lower-to-nem` may take)."""
    try:
        module = parse_mlir(xdsl_context(), path.read_text())
    except ParseError:
        pytest.skip("a transform script or its payload: lit runs it")
    return [
        f.sym_name.data
        for f in module.ops
        if isinstance(f, func.FuncOp)
        and f.body.blocks
        and (f.sym_visibility is None or f.sym_visibility.data == "public")
    ]


def _lower(
    text: str, entry: str, keep: type[ModulePass] | None
) -> tuple[str | None, list[tuple[str, str, str, str | None]]]:
    """`lower-to-nem{device=npm_pro_x1 remarks=true}` of `entry`, without
    `nem-outline-kernels` when `keep` is None: the `.nem` (None on an
    error) and the diagnostics (remarks, or the errors)."""
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    passes = LowerToNemPass(device="npm_pro_x1", entry=entry, remarks=True).pipeline()
    if keep is None:
        passes = tuple(p for p in passes if not isinstance(p, OutlineKernelsPass))
    try:
        diags = run_pipeline(module, PassPipeline(passes), ctx=ctx)
    except NemDiagnosticError as e:
        return None, [_text(d) for d in e.diagnostics]
    return print_nem(module), [_text(d) for d in diags]


def _text(d: Diagnostic) -> tuple[str, str, str, str | None]:
    return d.severity, d.message, str(d.loc), d.fix


def _outlined(text: str, entry: str) -> ModuleOp:
    ctx = xdsl_context()
    module = parse_mlir(ctx, text)
    OutlineKernelsPass(entry).apply(ctx, module)
    return module


def _kernels(module: ModuleOp) -> list[KernelOp]:
    return [o for o in module.walk() if isinstance(o, KernelOp)]


@pytest.mark.parametrize(
    "path", sorted(INPUTS.rglob("*.mlir")), ids=lambda p: str(p.relative_to(INPUTS))
)
def test_the_pass_changes_no_output(path: Path) -> None:
    """With and without the pass: the same `.nem`, remarks and errors."""
    text = path.read_text()
    for entry in _entries(path):
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


LEFT = """
func.func @f(%A: memref<32xf32>, %B: memref<32xf32>, %C: memref<17xf32>, %s: memref<1xf32>) {
  %c2 = arith.constant 2 : index
  %n = affine.apply affine_map<(d0) -> (d0 + 1)>(%c2)
  %x = affine.load %s[0] : memref<1xf32>
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
    """A nest in a loop (the loop variables are the conversion's), one
    taking an index value that is not a constant, one using a value a load
    outside gives (its kernel loads it itself), one whose decision reads a
    view's box (D-LOW-ALIAS) stay loops; the last nest, which escapes on
    its own, is outlined, and the whole lowers as without the pass."""
    module = _outlined(LEFT, "f")
    (kernel,) = _kernels(module)
    assert kernel.why.data == "a strided or skewed access"
    assert kernel.ins[0].name_hint == "A" and kernel.outs[0].name_hint == "B"
    assert len(_top_loops(module, "f")) == 4
    assert _lower(LEFT, "f", OutlineKernelsPass) == _lower(LEFT, "f", None)
