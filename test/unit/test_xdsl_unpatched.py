"""Importing the `nem` package leaves xDSL as it is (issue 36, item 3): `xdsl-opt`
prints the same for upstream inputs (affine, linalg, memref, arith) whether
or not NEM's dialects, front ends and passes are loaded in the process.

Each input runs through `xdsl-opt` in a subprocess twice: plain, and after
importing every NEM module that registers xDSL dialects, parsers or passes
(`nem.frontends.upstream_dialects`, the `nem` universe, `nem.passes.driver`).
An input whose output differs names an xDSL class the package changed.
NEM reads upstream's forms that xDSL 0.74 gets wrong (affine accesses,
named contractions with mixed types) with its own parser and op subclasses
(D-XDSL-AFFINE-SSA, D-LOW-LINALG-NAMED), never by changing xDSL's."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("xdsl")

INPUTS = {
    "arith": """
func.func @f(%a: i32, %b: i32) -> i32 {
  %c = arith.addi %a, %b : i32
  %d = arith.muli %c, %a : i32
  %e = arith.constant 3.5 : f32
  %s = arith.cmpi slt, %d, %b : i32
  %r = arith.select %s, %a, %d : i32
  func.return %r : i32
}
""",
    "memref": """
func.func @f(%m: memref<4x8xf32>, %i: index) -> f32 {
  %a = memref.alloc() : memref<4x8xf32>
  "memref.copy"(%m, %a) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
  %v = memref.load %a[%i, %i] : memref<4x8xf32>
  %sv = memref.subview %m[0, 0] [2, 4] [1, 1] : memref<4x8xf32> to memref<2x4xf32, strided<[8, 1]>>
  memref.dealloc %a : memref<4x8xf32>
  func.return %v : f32
}
""",
    "affine_loops": """
func.func @f(%m: memref<16xf32>, %n: index) {
  affine.for %i = 0 to 16 step 2 {
    affine.for %j = 0 to min affine_map<(d0) -> (d0 + 2, 16)>(%i) {
      %c = arith.constant 1.0 : f32
    }
  }
  func.return
}
""",
    "linalg_generic": """
func.func @f(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                   affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%b : memref<4x8xf32>) {
  ^bb0(%x: f32, %y: f32):
    %z = arith.addf %x, %y : f32
    linalg.yield %z : f32
  }
  func.return
}
""",
    "strings": """
func.func @f() attributes {note = "a \\"quoted\\" string\\n"} {
  func.return
}
""",
    # the accesses of affine.load/store (D-XDSL-AFFINE-SSA)
    "affine_access": """
func.func @f(%m: memref<16x16xf32>, %n: index) {
  affine.for %i = 0 to 16 {
    %v = affine.load %m[%i, %n + 1] : memref<16x16xf32>
    affine.store %v, %m[%i, %i] : memref<16x16xf32>
  }
  func.return
}
""",
    # a named op with mixed element types (D-LOW-LINALG-NAMED): refused by
    # plain xDSL 0.74 (its body typed from the first input), with or without
    # NEM (whose contexts parse it with their own subclasses, not xDSL's)
    "linalg_named": """
func.func @f(%a: memref<4x8xi8>, %b: memref<8x2xi8>, %c: memref<4x2xi32>) {
  linalg.matmul ins(%a, %b : memref<4x8xi8>, memref<8x2xi8>) outs(%c : memref<4x2xi32>)
  func.return
}
""",
}

# inputs xDSL 0.74 itself refuses (the upstream report): with NEM imported
# it must refuse them the same way
REFUSED = {"linalg_named": "report 6 (named linalg contractions with mixed types)"}

_XDSL_OPT = """
import sys
if sys.argv[1] == "nem":
    import nem.frontends.upstream_dialects  # noqa: F401  (D-XDSL-*: what it changes)
    import nem.frontends.universe  # noqa: F401
    import nem.passes.driver  # noqa: F401
from xdsl.tools.xdsl_opt import main
sys.argv = ["xdsl-opt", *sys.argv[2:]]
main()
"""


def _xdsl_opt(text: str, with_nem: bool, *flags: str) -> str:
    got = subprocess.run(
        [sys.executable, "-c", _XDSL_OPT, "nem" if with_nem else "plain", *flags],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return f"rc={got.returncode}\n{got.stdout}\n{got.stderr[-2000:]}"


@pytest.mark.parametrize(("name", "form"), [(n, f) for n in INPUTS for f in ("custom", "generic")])
def test_xdsl_opt_prints_the_same_with_nem_imported(name: str, form: str) -> None:
    flags = ("--print-op-generic",) if form == "generic" else ()
    plain = _xdsl_opt(INPUTS[name], False, *flags)
    # valid for xDSL itself, or refused as the upstream report says
    assert plain.startswith("rc=1" if name in REFUSED else "rc=0"), plain
    assert _xdsl_opt(INPUTS[name], True, *flags) == plain
