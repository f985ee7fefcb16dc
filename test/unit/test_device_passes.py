"""Device, placement, folding and pipeline passes (passes/nem/passes/device.py,
placement.py, fold.py, pipeline.py; nem_dialect/nem/analysis/capacity.py).

RULE: DEV-16, DEV-17, CONST-05, RES-04, BUF-05
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from nem_programs import program
from xdsl.dialects import arith
from xdsl.passes import ModulePass, PassPipeline

from nem.analysis.capacity import memory_maps
from nem.analysis.token_liveness import max_live_tokens
from nem.devices.device_lookup import find_device
from nem.dialect.builder import NemBuilder
from nem.dialect.diagnostics import Diagnostic, NemDiagnosticError, SourceLoc
from nem.dialect.expressions import SYMBOL_OF
from nem.dialect.ops import ProgramOp, RegionOp
from nem.dialect.verifier import ProgramVerifier, verify_program
from nem.frontends.nem_text.printer import print_nem
from nem.passes import PASSES
from nem.passes.device import device_diagnostics, eligible_units
from nem.passes.fold import fold_program
from nem.passes.pass_context import pass_context
from nem.passes.pipeline import VerifyPipelinePass

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.nem"))
sys.path.insert(0, str(ROOT / "bench"))


def region_ranges(prog: ProgramOp) -> list[list[tuple[int, int]]]:
    """Byte range (offset, extent) of every region, for every iteration binding."""
    v = ProgramVerifier(prog)
    out = []
    for op, loops in v.walk():
        if isinstance(op, RegionOp):
            out.append(
                [(v.ev.eval(op.offset, env), v.ev.eval(op.extent, env)) for env in v.envs(loops)]
            )
    return out


def headlines(diags: list[Diagnostic]) -> list[str]:
    return [d.headline() for d in diags]


# -- nem-fold-consts -------------------------------------------------------------
NEG = """\
const A = (0 - 7) / 2
const B = (0 - 7) mod 2
const C = 7 mod (0 - 2)
const D = A * B + C
buffer L : L1 (size=64 * (D + 4))
loop i in [0..D + 5] @max_in_flight(2):
  R = region(L, (i mod 2) * (8 * 4), 2 * 16)
  t = transfer.async(dst=R, src=region(L, 256 + (i mod 2) * 32, 32))
  wait(t)
endloop
buffer M : L1 (size=64)
X = region(M, 0, 16) elem=bf16, shape=[2 * 4], layout=C
Y = region(M, 16, 16) elem=bf16, shape=[8], layout=C
t = clamp.sync in X out Y min=0 - 3 max=2 * 3
"""


def _bench_program() -> str:
    from bench_roundtrip import generate

    return generate(300)


@pytest.mark.parametrize("source", [*EXAMPLES, "NEG", "BENCH"], ids=str)
def test_fold_keeps_meaning(source):
    """RULE: CONST-05 -- fold, print, re-parse: same verifier result, same region bytes."""
    text = (
        NEG
        if source == "NEG"
        else _bench_program()
        if source == "BENCH"
        else Path(source).read_text()
    )
    file = str(source) if isinstance(source, Path) else "t.nem"
    _, before = program(text, file)
    ranges, diags = region_ranges(before), headlines(verify_program(before))
    module, prog = program(text, file)
    assert fold_program(prog) == []
    printed = print_nem(module)
    _, after = program(printed, file)
    assert headlines(verify_program(after)) == diags
    assert region_ranges(after) == ranges
    # nothing foldable is left in the folded IR: every arith binop depends on a
    # loop variable (re-parsing writes negative literals back as `0 - x`)
    for op in prog.walk():
        if type(op) in SYMBOL_OF:
            from nem.dialect.expressions import Evaluator

            assert Evaluator().static(op.results[0]) is None, print_nem(module)


def test_fold_semantics_and_names():
    module, prog = program(NEG)
    fold_program(prog)
    text = print_nem(module)
    assert "const A = (0 - 3)" in text  # truncating division
    assert "const B = (0 - 1)" in text  # truncated remainder (D-EXPR-MOD)
    assert "const C = 1" in text
    assert "const D = 4" in text
    assert "buffer L : L1 (size=512)" in text
    assert "loop i in [0..9]" in text
    assert "region(L, (i mod 2) * 32, 32)" in text
    assert "min=(0 - 3) max=6" in text


def test_fold_division_by_zero_is_const05():
    """RULE: CONST-05 -- a `/ 0` reaching the pass (e.g. from MLIR input) is reported."""
    module, prog = program(
        "buffer M : L1 (size=64)\n"
        "X = region(M, 0, 16) elem=bf16, shape=[8], layout=C\n"
        "t = clamp.sync in X out X min=0 max=6 / 3\n"
    )
    div = next(op for op in prog.walk() if isinstance(op, arith.DivSIOp))
    div.operands = [div.operands[0], NemBuilder.before(div).index(0)]
    before = print_nem(module)
    diags = fold_program(prog)
    assert [(d.rule, d.loc.line) for d in diags] == [("CONST-05", 3)]
    assert "division by zero" in diags[0].message and "clamp" in diags[0].message
    assert print_nem(module) == before  # nothing changed


# -- device checks ---------------------------------------------------------------
def test_memory_map_padding_and_loop_copies():
    _, prog = program(
        "buffer A : L2 (size=3)\nbuffer B : L2 (size=8, align=64)\n"
        "buffer C : L1 (size=10)\nbuffer E : L1[0] (size=6, align=4)\n"
        "loop i in [0..9] @max_in_flight(3):\n  buffer T : L1 (size=5)\nendloop\n"
    )
    maps = memory_maps(prog)
    # decreasing align, declaration order among equals (D-SEM-LAYOUT); one T per
    # iteration in flight (D-SEM-INSTANCES)
    assert [(p.name, p.offset, p.end) for p in maps["L2"]] == [("B", 0, 8), ("A", 8, 11)]
    assert [(p.name, p.offset, p.end) for p in maps["L1[0]"]] == [
        ("E", 0, 6),
        ("C", 6, 16),
        ("T", 16, 21),
        ("T", 21, 26),
        ("T", 26, 31),
    ]


def test_device_diagnostics_npm_lite():
    _, prog = program(
        "buffer A : L1 (size=600000)\nbuffer B : L1[1] (size=64)\n"
        "X = region(B, 0, 16) elem=bf16, shape=[8], layout=C\n"
        "Y = region(B, 16, 16) elem=bf16, shape=[8], layout=C\n"
        "t = relu.async in X out Y @resource(CSTL[5])\nwait(t)\n"
    )
    diags = device_diagnostics(prog, find_device("npm_lite"))
    got = sorted((d.severity, d.rule, d.loc.line) for d in diags)
    assert got == [("error", "BUF-05", 2), ("error", "DEV-16", 1), ("remark", "RES-04", 5)]
    remark = next(d for d in diags if d.rule == "RES-04")
    assert "remapped to CSTL[1]" in remark.message
    cap = next(d for d in diags if d.rule == "DEV-16")
    assert cap.fix and "'A' at [0, 600000) size 600000 align 1 (line 1)" in cap.notes[0].message


def test_eligible_units():
    _, prog = program(
        "buffer B : L1 (size=4096)\n"
        "A = region(B, 0, 512) elem=f16, shape=[16, 16], layout=MK\n"
        "W = region(B, 512, 512) elem=f16, shape=[16, 16], layout=KN\n"
        "Y = region(B, 1024, 512) elem=f16, shape=[16, 16], layout=MN\n"
        "t = gemm.async in A, W out Y\n"
        "u = transpose.async in A out W deps=[t] perm=[1, 0]\n"
        "s = store.async(dst=region(B, 2048, 512), src=Y, deps=[u])\n"
        "wait(s)\n"
    )
    tasks = [op for op in prog.walk() if op.name in ("nem.gemm", "nem.transpose", "nem.store")]
    assert [eligible_units(t) for t in tasks] == [("NMU", "VPU"), ("CSTL", "DMA", "VPU"), ("CSTL",)]


@pytest.mark.parametrize(
    "body, expected",
    [
        ("t = transfer.async(dst=R0, src=R1)\n", 1),  # unconsumed: live to the end
        ("t = transfer.sync(dst=R0, src=R1)\n", 1),
        (
            "a = transfer.async(dst=R0, src=R1)\nb = transfer.async(dst=R1, src=R0, deps=[a])\n"
            "wait(b)\n",
            2,
        ),
        (
            "a = transfer.async(dst=R0, src=R1)\nwait(a)\nb = transfer.async(dst=R1, src=R0)\n"
            "wait(b)\n",
            1,
        ),
        (
            "loop i in [0..9] @max_in_flight(4):\n  a = transfer.async(dst=R0, src=R1)\n"
            "  b = transfer.async(dst=R1, src=R0, deps=[a])\n  wait(b)\nendloop\n",
            8,
        ),
        (
            "loop i in [0..1] @max_in_flight(4):\n  a = transfer.async(dst=R0, src=R1)\n"
            "  wait(a)\nendloop\n",
            2,
        ),  # min(N, trip count)
        (
            "x = transfer.async(dst=R0, src=R1)\nloop i in [0..1]:\n  a = transfer.async(dst=R0, src=R1)\n"
            "  wait(a, x)\nendloop\n",
            2,
        ),  # outer token live across the loop
    ],
)
def test_max_live_tokens(body, expected):
    """RULE: DEV-17"""
    _, prog = program(
        "buffer B : L1 (size=64)\nR0 = region(B, 0, 8)\nR1 = region(B, 8, 8)\n" + body
    )
    assert max_live_tokens(prog) == expected


# -- pipeline ------------------------------------------------------------------
def test_pass_options_parse():
    passes = {name: (lambda c=cls: c) for name, cls in PASSES.items()}
    pipe = PassPipeline.parse_spec(
        passes,
        "nem-verify-device{device=npm_lite reject-future=true},"
        "nem-check-placement{remarks=true},nem-fold-consts,nem-verify{device=npm_pro}",
    )
    dev, place, _, verify = pipe.passes
    assert (dev.device, dev.reject_future, place.remarks, verify.device) == (
        "npm_lite",
        True,
        True,
        "npm_pro",
    )


def test_pipeline_runs_stages_in_order(monkeypatch):
    """The stages run in order and the first failing one ends the run, with
    the earlier stages' diagnostics (placement's RES-04) before its own."""
    from nem.passes import pipeline

    ran: list[str] = []

    def fake(name: str, fail: bool):
        @dataclass(frozen=True)
        class Fake(ModulePass):
            def apply(self, ctx, op):
                ran.append(name)
                if fail:
                    raise NemDiagnosticError(
                        [Diagnostic("error", f"{name} failed", None, "HAZ-01")]
                    )

        Fake.name = name
        return Fake

    monkeypatch.setattr(
        pipeline,
        "STAGES",
        (*pipeline.STAGES[:3], fake("nem-check-tokens", True), fake("nem-check-hazards", False)),
    )
    module, _ = program(
        'device "npm_lite.nem"\nbuffer B : L1 (size=64)\n'
        "R0 = region(B, 0, 8)\nR1 = region(B, 8, 8)\n"
        "t = transfer.async(dst=R0, src=R1) @resource(DMA[3])\nwait(t)\n",
        str(ROOT / "t.nem"),
    )
    ctx = pass_context()
    with pytest.raises(NemDiagnosticError) as e:
        VerifyPipelinePass().apply(ctx, module)
    assert ran == ["nem-check-tokens"]  # stopped at the first failing stage
    assert [d.rule for d in e.value.diagnostics] == ["RES-04", "HAZ-01"]
    assert ctx.diagnostics == []


def test_pipeline_without_device_remarks_and_continues():
    module, _ = program("buffer B : L1 (size=64)\n")
    ctx = pass_context()
    VerifyPipelinePass().apply(ctx, module)
    assert [(d.severity, d.rule) for d in ctx.diagnostics] == [("remark", "DEV-20")]
    assert ctx.diagnostics[0].loc == SourceLoc("t.nem", 1, 1)


def test_pipeline_stages_are_registered_passes():
    """nem-verify's stages are, in order, the registered passes of the names
    its documentation lists, each also runnable alone (`nem-opt -p NAME`)."""
    from nem.passes.pipeline import STAGES

    names = [cls.name for cls in STAGES]
    assert names == [
        "nem-verify-static",
        "nem-verify-device",
        "nem-check-placement",
        "nem-check-tokens",
        "nem-check-hazards",
    ]
    assert all(PASSES[n] is cls for n, cls in zip(names, STAGES, strict=True))
