"""Unit tests of the MLIR -> NEM lowering (passes/nem/passes/lowering/) and of
the MLIR input ops of nem.frontends.upstream_dialects.  The lit tests in test/lit/lowering check
the emitted .nem text; these check the pieces and the Python API."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from xdsl.dialects import func
from xdsl.printer import Printer

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.ops import ComputeOp, LoopOp, ProgramOp, TransferOp
from nem.dialect.verifier import verify_program
from nem.frontends.nem_text.parser import parse_nem
from nem.frontends.nem_text.printer import print_nem
from nem.frontends.upstream_dialects import lowering_context, parse_mlir
from nem.passes.lowering.affine_algebra import Aff, Var
from nem.passes.lowering.context import Options
from nem.passes.lowering.driver import Lowerer
from nem.passes.lowering.handlers import HANDLERS
from nem.passes.lowering.passes import LowerToNemPass, parse_spaces
from nem.passes.pass_context import pass_context

INPUTS = Path(__file__).resolve().parents[1] / "lit" / "lowering" / "Inputs"


def lower(path: Path, device: str | None = "npm_pro_x1"):
    c = pass_context(lowering_context())
    m = parse_mlir(c, path.read_text(), str(path))
    LowerToNemPass(device=device, remarks=True).apply(c, m)
    return m, c.diagnostics


def test_aff_mod_floordiv_simplify():
    v = Var(None, "v", 8)
    x = Aff.atom(v).scale(64)
    assert x.floordiv(64) == Aff.atom(v)
    assert (x + Aff.c(64)).floordiv(64).mod(2) == (Aff.atom(v) + Aff.c(1)).mod(2)
    assert Aff.atom(v).scale(2).mod(2) == Aff.c(0)
    assert (x - Aff.c(64) + Aff.c(64)) == x


def test_locations_on_every_op():
    m = parse_mlir(lowering_context(), (INPUTS / "matmul_tiled.mlir").read_text(), "f.mlir")
    for op in m.walk():
        if op is not m and op.name != "affine.yield":  # implicit terminators
            assert op.location is not None and op.location.line.data > 0


def test_dma_custom_syntax_roundtrip():
    text = (INPUTS / "async_pipeline.mlir").read_text()
    m = parse_mlir(lowering_context(), text, "a.mlir")
    out = StringIO()
    Printer(stream=out).print_op(m)
    again = parse_mlir(lowering_context(), out.getvalue(), "b.mlir")
    out2 = StringIO()
    Printer(stream=out2).print_op(again)
    assert out.getvalue() == out2.getvalue()
    assert "async.execute [%t0, %t1] {" in out.getvalue()


@pytest.mark.parametrize(
    "name",
    [
        "matmul_tiled",
        "matmul_tiled_pipelined",
        "eltwise_tiled",
        "eltwise_tiled_pipelined",
        "async_pipeline",
    ],
)
def test_fixtures_lower_verify_and_roundtrip(name):
    m, diags = lower(INPUTS / f"{name}.mlir")
    progs = [p for p in m.walk() if isinstance(p, ProgramOp)]
    assert len(progs) == 1
    assert not [d for d in verify_program(progs[0]) if d.severity == "error"]
    text = print_nem(m)
    assert print_nem(parse_nem(text, "x.nem")) == text
    assert any(d.severity == "remark" for d in diags)
    # DDR buffers carry the argument names (nem-run --input arg0=...)
    assert "buffer arg0 : DDR" in text or "buffer X : DDR" in text


def test_pipelined_eltwise_has_max_in_flight():
    # contiguous tiles: consecutive iterations touch disjoint bytes (D-LOW-PIPE)
    m, _ = lower(INPUTS / "eltwise_1d_pipelined.mlir")
    loops = [op for op in m.walk() if isinstance(op, LoopOp)]
    assert [d.n.data for lp in loops for d in lp.decorator_list()] == [2]


def test_pipelined_interleaved_tiles_run_two_at_a_time():
    # RULE: HAZ-03
    # 64x64 tiles of a 1024x512 array: the strided write-back regions of
    # consecutive iterations overlap in byte span but not in elements, so the
    # tile loop keeps two iterations in flight (D-HAZ-ELEMENTS, D-LOW-PIPE;
    # before D-HAZ-ELEMENTS it ran one at a time)
    m, diags = lower(INPUTS / "eltwise_tiled_pipelined.mlir")
    loops = [op for op in m.walk() if isinstance(op, LoopOp)]
    assert [d.n.data for lp in loops for d in lp.decorator_list()] == [2]
    assert not any(
        "accessed at overlapping bytes by consecutive iterations" in d.message for d in diags
    )


def test_ops_point_back_at_mlir_lines():
    m, _ = lower(INPUTS / "matmul_tiled.mlir")
    src = (INPUTS / "matmul_tiled.mlir").read_text().splitlines()
    for op in m.walk():
        if isinstance(op, TransferOp):
            assert "dma_start" in src[op.location.line.data - 1]
        if isinstance(op, ComputeOp):
            assert "affine.for" in src[op.location.line.data - 1]


def test_rejection_is_a_diagnostic_not_a_traceback():
    text = "func.func @f(%a: memref<?xf32>) {\n  return\n}\n"
    m = parse_mlir(lowering_context(), text, "d.mlir")
    with pytest.raises(NemDiagnosticError) as e:
        Lowerer(Options(parse_spaces("0:DDR,1:L2,2:L1")), HANDLERS).run(m)
    d = e.value.diagnostics[0]
    assert "dynamic shape" in d.message and d.loc.line == 1


def test_memory_spaces_option_forms():
    assert parse_spaces("0:DDR,1:L2,2:L1") == {0: "DDR", 1: "L2", 2: "L1"}
    assert parse_spaces(("0-DDR", "1-L2", "2-L1")) == {0: "DDR", 1: "L2", 2: "L1"}
    with pytest.raises(NemDiagnosticError):
        parse_spaces("0:HBM")


def test_escape_hatch_kernel_parses_back():
    """The compute task's kernel text is MLIR that xDSL parses (the runtime
    contract of lowering/escape.py)."""
    path = INPUTS.parent / "fallback_and_linalg.mlir"
    m, _ = lower(path)
    ks = [op for op in m.walk() if isinstance(op, ComputeOp) and op.opcode == "compute"]
    assert ks
    kernel = ks[0].attrs.data["kernel"].data
    km = parse_mlir(lowering_context(), kernel, "kernel.mlir")
    fns = [o for o in km.walk() if isinstance(o, func.FuncOp)]
    assert fns and fns[0].sym_name.data == "kernel"


def test_summary_remark_names_three_fallbacks_and_counts_the_rest(tmp_path):
    """Issue 12: one readable line per nest.  The summary names the first
    three escape-hatch fallbacks and counts the others; each fallback still
    has its own remark at its nest."""
    nests = "\n".join(
        f"""
  linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel"]}}
      ins(%x : memref<8xf32>) outs(%y{k} : memref<8xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %h = arith.constant 0.5 : f32
    %e = arith.maxnumf %a, %h : f32
    linalg.yield %e : f32
  }}"""
        for k in range(5)
    )
    args = ", ".join(f"%y{k}: memref<8xf32>" for k in range(5))
    path = tmp_path / "erfs.mlir"
    path.write_text(
        f"#id = affine_map<(d0) -> (d0)>\n"
        f"func.func @erfs(%x: memref<8xf32>, {args}) {{{nests}\n  return\n}}\n"
    )
    _, diags = lower(path)
    summary = next(d.message for d in diags if d.message.startswith("lowered @erfs"))
    assert summary.count("linalg.generic at ") == 3
    assert "and 2 more (a remark each)" in summary
    assert sum("not raised, runs as an escape-hatch task" in d.message for d in diags) == 5


def test_summary_remark_counts_notes_past_the_first_few():
    """One note per pipelined tile loop: a CNN has dozens, and the summary remark
    was one line of 6,600 characters (outside user, session 5).  The first
    NOTES_LISTED are named, the rest counted."""
    from types import SimpleNamespace

    from nem.passes.lowering.context import Summary
    from nem.passes.lowering.driver import NOTES_LISTED, summary_remarks

    notes = [f"tile loop at m.mlir:{k}:5 -> its L1 buffers in two slots" for k in range(40)]
    ctx = SimpleNamespace(summary=Summary(notes=notes + notes[:2]))
    fn = func.FuncOp("main", ((), ()))
    (remark,) = summary_remarks(ctx, fn)
    shown = [n for n in notes if n in remark.message]
    assert shown == notes[:NOTES_LISTED]
    assert remark.message.endswith(f"; and {40 - NOTES_LISTED} more such notes")


def test_a_subclass_of_a_handled_op_is_lowered_by_its_handler():
    """The driver finds an op's handler by the op's MRO (`Lowerer.handler_of`),
    so the table lists xDSL's classes only: NEM's contexts parse affine
    accesses and upstream's named contractions as subclasses of xDSL's
    (`affine_ssa_maps`, `linalg_named.UPSTREAM_CONTRACTIONS`), and those are
    lowered as their bases."""
    from xdsl.dialects import affine, linalg

    from nem.frontends.upstream_dialects import affine_ssa_maps
    from nem.frontends.upstream_dialects.linalg_named import UPSTREAM_CONTRACTIONS

    for sub, base in [
        (affine_ssa_maps.LoadOp, affine.LoadOp),
        (affine_ssa_maps.StoreOp, affine.StoreOp),
        *((c, c.__mro__[1]) for c in UPSTREAM_CONTRACTIONS),
    ]:
        assert issubclass(sub, base) and sub not in HANDLERS and base in HANDLERS
    lw = Lowerer(Options(parse_spaces("0:DDR")), HANDLERS)
    assert lw.handler_of(affine_ssa_maps.LoadOp) is HANDLERS[affine.LoadOp]
    assert lw.handler_of(UPSTREAM_CONTRACTIONS[0]) is HANDLERS[UPSTREAM_CONTRACTIONS[0].__mro__[1]]
    assert lw.handler_of(ProgramOp) is None

    # end to end: a matmul and a point nest as NEM's context parses them
    text = """
func.func @f(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  affine.for %i = 0 to 4 {
    %x = affine.load %a[%i, 0] : memref<4x4xf32>
    affine.store %x, %c[%i, 1] : memref<4x4xf32>
  }
  return
}
"""
    c = pass_context(lowering_context())
    m = parse_mlir(c, text, "sub.mlir")
    kinds = {type(op) for op in m.walk()}
    assert affine_ssa_maps.LoadOp in kinds and linalg.MatmulOp not in kinds
    assert any(issubclass(k, linalg.MatmulOp) for k in kinds)
    LowerToNemPass(device="npm_pro_x1").apply(c, m)
    assert "matmul" in print_nem(m)
