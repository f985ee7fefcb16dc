"""What the lowering and the analyses skip to scale to real CNNs (issue 30),
each giving what the work it skips would: the op lists `nem.analysis.ir_walk`
reads from xDSL's links (the order of `block.ops` and `op.walk()`), and a
typed broadcast concat the target has no variant for, never built (its
legality asked on element types, D-LOW-BCAST-CONCAT, D-LOW-OUTLINE)."""

from __future__ import annotations

from pathlib import Path

import pytest
from source_files import sources

from nem.analysis.ir_walk import block_ops, ops_by_base, ops_of, walk_ops
from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.ops import BufferOp, ComputeOp, LoopOp, ProgramOp, TaskOp
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem
from nem.frontends.upstream_dialects import lowering_context, parse_mlir
from nem.passes.driver import run_pipeline

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.parametrize("name", ["conv2d_maxpool", "gemm_bias_relu"])
def test_the_op_lists_are_xdsls_walk_and_block_order(name):
    """Nested loops, waits, lets: every op and block of the program, and of
    the MLIR it is lowered from, in xDSL's order."""
    path = EXAMPLES / f"{name}.nem"
    module = parse_nem(path.read_text(), str(path))
    mlir = parse_mlir(lowering_context(), TWO_BIASES, "two.mlir")
    loops = [op for op in module.walk() if isinstance(op, LoopOp)]
    assert loops
    for root in (module, mlir, *loops, *(op for op in module.walk() if isinstance(op, ProgramOp))):
        assert walk_ops(root) == list(root.walk())
        for op in walk_ops(root):
            for region in op.regions:
                for block in region.blocks:
                    assert block_ops(block) == list(block.ops)


def test_one_walk_split_by_base_is_each_bases_walk():
    """`ops_by_base` (the device checks' one walk): for every repository
    program, each base's ops in walk order, an op under every base it
    derives from (a compute op is a task too)."""
    bases = (TaskOp, ComputeOp, BufferOp, LoopOp)
    seen = 0
    for path in sources("*.nem", "."):
        try:
            module = parse_nem(path.read_text(), str(path))
        except (NemDiagnosticError, UnicodeDecodeError):  # programs rejected by design
            continue
        assert ops_by_base(module, bases) == [ops_of(module, b) for b in bases]
        seen += len(ops_of(module, ComputeOp))
    assert seen >= 50  # a clean checkout's programs hold 100 compute ops (lit's Output/ adds more)


TWO_BIASES = """\
func.func @two(%x: memref<4x8xf32>, %b: memref<8xf32>, %c: memref<8xf32>,
               %y: memref<4x8xf32>, %w: memref<4x8xf32>) {
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %e = affine.load %b[%j] : memref<8xf32>
      %s = arith.addf %v, %e : f32
      affine.store %s, %y[%i, %j] : memref<4x8xf32>
    }
  }
  affine.for %i = 0 to 4 {
    affine.for %j = 0 to 8 {
      %v = affine.load %x[%i, %j] : memref<4x8xf32>
      %e = affine.load %c[%j] : memref<8xf32>
      %s = arith.addf %v, %e : f32
      affine.store %s, %w[%i, %j] : memref<4x8xf32>
    }
  }
  return
}
"""


def _lower(monkeypatch) -> tuple[str, list[str]]:
    """The program and the element types of each concat candidate built."""
    from nem.dialect.builder import NemBuilder

    built: list[str] = []
    compute = NemBuilder.compute

    def counted(self, opcode, ins, outs, **kw):
        tok = compute(self, opcode, ins, outs, **kw)
        if opcode == "concat":
            built.append(str(tok.owner.ins[0].type.elem_name))
        return tok

    monkeypatch.setattr(NemBuilder, "compute", counted)
    ctx = lowering_context()
    module = parse_mlir(ctx, TWO_BIASES, "two.mlir")
    run_pipeline(
        module,
        "lower-to-nem{device=npm_pro_x1 entry=two memory-spaces=0:DDR,1:L2,2:L1[0]}",
        ctx=ctx,
    )
    return print_nem(module), built


def test_an_illegal_typed_concat_is_never_built(monkeypatch):
    """npm_pro_x1 has no f32 concat: asked on the element types
    (`TaskLegality`, D-LOW-OUTLINE), no f32 candidate is built; each bias
    gets its i8 concat."""
    text, built = _lower(monkeypatch)
    assert built == ["i8", "i8"]
    assert text.count("concat.async") == 2


def test_lower_to_nem_prepares_its_input_once():
    """`lower-to-nem` runs the preparation passes as steps of their own and
    then the conversion without them (each walk of the input once, D-LOW-SCF);
    `convert-affine-to-nem` alone prepares its input itself."""
    from nem.passes.lowering.passes import ConvertAffineToNemPass, LowerToNemPass

    steps = LowerToNemPass(entry="f").pipeline()
    assert [p.name for p in steps[:18]] == [
        "nem-raise-scf-for",
        "nem-drop-dead-arith",
        "nem-check-input-ranges",
        "nem-reroll-pipelines",
        "nem-raise-memref-dmas",
        "nem-outline-kernels",
        "nem-drop-memref-hints",
        "nem-drop-async-groups",
        "nem-drop-token-awaits",
        "nem-rewrite-views",
        "nem-declare-buffers",
        "nem-declare-allocations",
        "nem-mark-tile-loops",
        "nem-fold-index-arith",
        "nem-inline-async-executes",
        "nem-raise-scalar-copies",
        "nem-check-task-control-flow",
        "convert-affine-to-nem",
    ]
    # the module-wide scf raise has no entry; every other step gets the pipeline's
    assert [getattr(p, "entry", None) for p in steps[:18]] == [None] + ["f"] * 17
    assert not [p for p in steps if isinstance(p, ConvertAffineToNemPass) and p.prepare]
    assert ConvertAffineToNemPass().prepare
