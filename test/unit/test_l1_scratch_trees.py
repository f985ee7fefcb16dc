"""The L1 model's scratch of an elementwise tree against the lowering's
(`l1_scratch.temporaries` vs `compute._tree_steps`, D-LOW-TREE-INPLACE).

The two describe one tree in two IRs (upstream MLIR's ops for the tile
stage's plan, the lowering's `EltOp` nodes); the in-place rule is stated
once (`nest_analysis.in_place_operand`), the rest (which nodes a source op
becomes, which splats are made, the chain into the output) twice.  Each
body below is compiled (`nem-compile` on linalg): the scratch bytes the
lowered program declares in one engine's L1 (`L1_tmp*` buffers), in units
of the output tile, must equal the model's measure of the tile stage's op.
An `rsqrt` (a `div` of a splat 1 by a `sqrt`, `nest_analysis.RSQRT`) was
counted as one op with no splat: two of them, or one beside a constant,
took two tiles where the model counted one."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("mlir.ir")

from mlir import ir  # noqa: E402

from nem.compile import compile_mlir, l1_scratch  # noqa: E402

FUNCTION = """#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%x: memref<16x64xf32>, %x2: memref<16x64xf32>, %y: memref<16x64xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %x2 : memref<16x64xf32>, memref<16x64xf32>) outs(%y : memref<16x64xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    BODY
    linalg.yield %r : f32
  }
  return
}
"""

BODIES = {
    "chain": "%e = math.exp %in : f32\n %c = arith.constant 2.0 : f32\n"
    " %m = arith.mulf %e, %c : f32\n %r = arith.addf %m, %in : f32",
    "two_branches": "%e = math.exp %in : f32\n %n = arith.negf %in2 : f32\n"
    " %r = arith.mulf %e, %n : f32",
    "branches_below_root": "%e = math.exp %in : f32\n %n = arith.negf %in2 : f32\n"
    " %m = arith.mulf %e, %n : f32\n %s = arith.subf %in, %in2 : f32\n"
    " %r = arith.divf %m, %s : f32",
    "casts": "%h = arith.truncf %in : f32 to f16\n %e = arith.extf %h : f16 to f32\n"
    " %r = arith.addf %e, %in2 : f32",
    "rsqrt": "%r = math.rsqrt %in : f32",
    "rsqrt_inner": "%s = math.rsqrt %in : f32\n %r = arith.mulf %s, %in2 : f32",
    "two_rsqrts": "%a = math.rsqrt %in : f32\n %b = math.rsqrt %in2 : f32\n"
    " %r = arith.addf %a, %b : f32",
    "rsqrt_and_constant": "%a = math.rsqrt %in : f32\n %c = arith.constant 3.0 : f32\n"
    " %r = arith.mulf %a, %c : f32",
    "rsqrt_and_one": "%a = math.rsqrt %in : f32\n %c = arith.constant 1.0 : f32\n"
    " %r = arith.addf %a, %c : f32",
}


def _generics(module: ir.Module) -> list[ir.Operation]:
    """The tile stage's linalg.generic ops (one per engine's part)."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.generic":
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


@pytest.mark.parametrize("body", sorted(BODIES))
def test_the_model_counts_the_scratch_the_lowering_declares(body):
    result = compile_mlir(FUNCTION.replace("BODY", BODIES[body]), device="npm_pro_x1")
    tile = re.search(r"dst=region\(y, \d+, (\d+)\)", result.nem)
    assert tile is not None
    sizes = re.findall(r"buffer L1_tmp\w* : L1\[0\] \(size=(\d+)", result.nem)
    lowered = sum(map(int, sizes)) / int(tile.group(1))
    with ir.Context():
        module = ir.Module.parse(result.stage("tile").text)  # (held: its ops live in it)
        ops = _generics(module)
        # (at least one tile: the model's floor for a body of no scratch)
        assert ops and {l1_scratch.temporaries(op) for op in ops} == {max(1.0, lowered)}
