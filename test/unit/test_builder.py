"""The builder API (`nem.dialect.builder`): IR built from Python is the IR
the `.nem` parser builds from the equivalent text (differential tests on the
shipped examples), prints as canonical `.nem`, and is held to the same
rules (the verifier's diagnostics point at the Python line that built the
statement)."""

from __future__ import annotations

import inspect
import io
from pathlib import Path

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import FileLineColLoc, f32
from xdsl.printer import Printer

from nem.dialect.attributes import PerTensorQuantAttr
from nem.dialect.builder import BinExpr, Lit, NemBuilder, ProgramBuilder
from nem.dialect.diagnostics import NemDiagnosticError, SourceLoc
from nem.dialect.ops import LoopOp, ProgramOp, TransferOp, WaitOp
from nem.frontends.nem_text import parse_nem, print_nem

ROOT = Path(__file__).resolve().parents[2]


def generic(module) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue()


def build_gemm_bias_relu():
    """examples/gemm_bias_relu.nem, statement by statement."""
    b = ProgramBuilder("gemm_bias_relu", device_file="npm_lite.nem")
    TiM, K, N, T = b.const("TiM", 64), b.const("K", 256), b.const("N", 128), b.const("T", 4)
    eb = b.const("elem_bytes", 2)
    tA_b = b.const("tileA_bytes", TiM * K * eb)
    tB_b = b.const("tileB_bytes", K * N * eb)
    tY_b = b.const("tileY_bytes", TiM * N * eb)
    bias_b = b.const("bias_bytes", N * eb)
    A_L2 = b.buffer("A_L2", "L2", T * tA_b, align=64)
    B_L2 = b.buffer("B_L2", "L2", tB_b, align=64)
    C_L2 = b.buffer("C_L2", "L2", bias_b, align=64)
    Y_L2 = b.buffer("Y_L2", "L2", T * tY_b, align=64)
    A_L1 = b.buffer("A_L1", "L1", 2 * tA_b, align=64)
    B_L1 = b.buffer("B_L1", "L1", tB_b, align=64)
    Y_L1 = b.buffer("Y_L1", "L1", 2 * tY_b, align=64)
    B_l1 = b.region("B_l1", B_L1, 0, tB_b, elem="f16", shape=[K, N], layout="KN")
    C_l2 = b.region(
        "C_l2", C_L2, 0, bias_b, elem="f16", shape=[N], layout="N", decorators=["readonly"]
    )
    b.transfer(
        B_l1,
        b.region(None, B_L2, 0, tB_b, elem="f16", shape=[K, N], layout="KN"),
        name="tB",
        sync=True,
    )
    with b.loop("i", 0, T - 1, max_in_flight=2) as i:
        A_tile = b.region(
            "A_tile_i", A_L2, i * tA_b, tA_b, let=True, elem="f16", shape=[TiM, K], layout="MK"
        )
        Y_tile = b.region(
            "Y_tile_i",
            Y_L2,
            i * tY_b,
            tY_b,
            let=True,
            elem="f16",
            shape=[TiM, N],
            layout="MN",
            decorators=["materialized"],
        )
        A_pp = b.region(
            "A_pp_i", A_L1, (i % 2) * tA_b, tA_b, let=True, elem="f16", shape=[TiM, K], layout="MK"
        )
        Y_pp = b.region(
            "Y_pp_i",
            Y_L1,
            (i % 2) * tY_b,
            tY_b,
            let=True,
            elem="f16",
            shape=[TiM, N],
            layout="MN",
            decorators=["materialized"],
        )
        tA = b.transfer(A_pp, A_tile, name="tA")
        tG = b.compute(
            "gemm", ins=[A_pp, B_l1, C_l2], outs=[Y_pp], deps=[tA], name="tG", accum_type="f32"
        )
        tR = b.compute("relu", ins=[Y_pp], outs=[(Y_pp, ["materialized"])], deps=[tG], name="tR")
        tS = b.store(Y_tile, Y_pp, deps=[tR], name="tS")
        b.wait(tS)
    return b.finish()


def test_gemm_example_is_the_parsed_example():
    """Differential: the built program prints as the example's canonical text
    and is the same IR (generic form) as the parsed example."""
    built = build_gemm_bias_relu()
    parsed = parse_nem((ROOT / "examples/gemm_bias_relu.nem").read_text(), "gemm.nem")
    assert print_nem(built) == print_nem(parsed)
    assert generic(built) == generic(parsed)


def test_docstring_example_builds_verifies_and_round_trips():
    import nem.dialect.builder as mod

    lines = mod.__doc__.splitlines()[2:]
    end = next(k for k, line in enumerate(lines) if line and not line.startswith("    "))
    code = "\n".join(line[4:] for line in lines[:end])
    scope: dict = {}
    out = io.StringIO()
    exec(
        compile(
            code.replace("print(print_nem(module))", "out.write(print_nem(module))"),  # noqa: S102
            "doc",
            "exec",
        ),
        {"out": out},
        scope,
    )
    text = out.getvalue()
    assert "let slot_i = region(L, (i mod 2) * tile_bytes, tile_bytes) elem=f16" in text
    assert "loop i in [0..T - 1] @max_in_flight(2):" in text
    assert print_nem(parse_nem(text)) == text


def test_expressions_print_as_written_and_evaluate_like_nem():
    b = ProgramBuilder()
    n = b.const("n", 7)
    d = b.const("d", (0 - n) / 2)  # truncating: -3
    m = b.const("m", -n % 2)  # truncated remainder: -1 (Python's -7 % 2 is 1)
    assert (d.static(), m.static()) == (-3, -1)
    assert isinstance(n * 2 + 1, BinExpr) and (n * 2 + 1).static() == 15
    assert (3 - n).static() == -4 and (14 / n).static() == 2 and (n.mod(4)).static() == 3
    with pytest.raises(TypeError, match="floor division"):
        n // 2
    with pytest.raises(TypeError, match="bool"):
        b.const("t", True)
    text = print_nem(b.finish())
    assert "const d = (0 - n) / 2" in text and "const m = (0 - n) mod 2" in text
    assert repr(n * 2 + Lit(1)) == "((n * 2) + 1)"


def test_one_constant_per_literal_per_block():
    b = ProgramBuilder()
    b.buffer("A", "L2", 64)
    b.buffer("B", "L2", 64)
    with b.loop("i", 0, 3):
        b.buffer("C", "L1", 64)
        b.buffer("D", "L1", 32)
    consts = [op.value.value.data for op in b.program.walk() if isinstance(op, arith.ConstantOp)]
    assert sorted(consts) == [0, 3, 32, 64]  # 64 of the outer block reused inside the loop


def test_compute_attributes_by_registry_type():
    b = ProgramBuilder()
    n = b.const("lo", 3)
    buf = b.buffer("M", "L1", 4096)
    x = b.region("X", buf, 0, elem="f32", shape=[1, 8, 8, 4], layout="NHWC")
    w = b.region("W", buf, 1024, elem="f32", shape=[3, 3, 4, 4], layout="HWIO")
    y = b.region("Y", buf, 2048, elem="f32", shape=[1, 8, 8, 4], layout="NHWC")
    b.compute(
        "conv2d",
        ins=[x, w],
        outs=[y],
        name="tc",
        pads=[1, 1, 1, 1],
        strides=[1, 1],
        dilations=[1, 1],
        accum_type=f32,
    )
    b.compute("clamp", ins=[y], outs=[y], name="tk", min=-n, max=6, sync=True)
    b.compute("leaky_relu", ins=[y], outs=[y], name="tl", alpha=0.5, sync=True)
    b.compute("compute", ins=[y], outs=[y], name="te", sync=True, op="my.kernel", note="x")
    text = print_nem(b.finish(verify=False))
    assert "accum_type=f32 pads=[1, 1, 1, 1] strides=[1, 1] dilations=[1, 1]" in text
    assert "clamp.sync in Y out Y min=0 - lo max=6" in text
    assert "alpha=0.5" in text and 'op="my.kernel" note="x"' in text
    assert print_nem(parse_nem(text)) == text


@pytest.mark.parametrize(
    "call, rule, words",
    [
        (lambda b, r: b.compute("gem", ins=[r], outs=[r]), "TASK-11", "did you mean gemm"),
        (
            lambda b, r: b.compute("gemm", ins=[r], outs=[r], accum_type=3),
            "TASK-13",
            "an element type",
        ),
        (
            lambda b, r: b.compute("gemm", ins=[r], outs=[r], accum_type="f64"),
            "TYPE-01",
            "unknown element type 'f64'",
        ),
        (lambda b, r: b.compute("conv2d", ins=[r], outs=[r], pads=[0.5]), "TASK-13", "integers"),
        (lambda b, r: b.region("Z", r, 0, 8), "NAME-01", "not a buffer"),
        (lambda b, r: b.buffer("C", "L3", 64), "GRAM-05", "'L3' is not a memory level"),
        (lambda b, r: b.buffer("C", "L2[1]", 64), "GRAM-05", "only L1 takes an engine index"),
        (
            lambda b, r: b.transfer(r, r, decorators=["fast"]),
            "DECO-01",
            "unknown decorator '@fast'",
        ),
        (
            lambda b, r: b.transfer(r, r, decorators=[("resource", "DMA")]),
            "DECO-03",
            '("resource", "CSTL", 0)',
        ),
    ],
)
def test_build_errors_name_the_python_line_and_rule(call, rule, words):
    """RULE: TASK-11 RULE: TASK-13 RULE: TYPE-01 RULE: DECO-01 RULE: DECO-03 RULE: GRAM-05"""
    b = ProgramBuilder()
    r = b.region("R", b.buffer("B", "L1", 64), 0, elem="f16", shape=[8], layout="C")
    with pytest.raises(NemDiagnosticError) as e:
        call(b, r)
    d = e.value.diagnostics[0]
    assert d.rule == rule and words in d.message + (d.fix or "")
    assert d.loc.file == __file__
    # the column of the builder call on that line (CPython's positions), not 1
    assert d.loc.line == call.__code__.co_firstlineno  # this row's lambda, not another's
    line = Path(__file__).read_text().splitlines()[d.loc.line - 1]
    assert line[d.loc.col - 1 :].startswith("b."), (d.loc, line)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda b, r, t: b.wait(r), "wait takes tokens, got the region 'R'"),
        (
            lambda b, r, t: b.transfer(r, r, deps=[r]),
            "transfer deps take tokens, got the region 'R'",
        ),
        (lambda b, r, t: b.store(t, r), "store dst= and src= take regions, got the token 't'"),
        (
            lambda b, r, t: b.compute("relu", ins=[r], outs=[r], deps=["t"]),
            "relu deps take tokens, got 't'",
        ),
        (
            lambda b, r, t: b.compute("relu", ins=[r.owner.operands[0]], outs=[r]),
            "relu ins and outs take regions, got the buffer 'B'",
        ),
    ],
)
def test_wrong_kind_of_operand_is_reported_at_the_call(call, words):
    """A region given for a token (or the reverse) is the user's error at
    their line, as the parser reports `wait(R)`, not a cut-off xDSL operand
    error at finish().  RULE: NAME-01"""
    b = ProgramBuilder()
    r = b.region("R", b.buffer("B", "L1", 64), 0, elem="f16", shape=[8], layout="C")
    t = b.transfer(r, r, name="t")
    with pytest.raises(NemDiagnosticError) as e:
        call(b, r, t)
    d = e.value.diagnostics[0]
    assert (d.rule, d.message, d.loc.file) == ("NAME-01", words, __file__)
    assert d.loc.line == call.__code__.co_firstlineno  # this row's lambda, not another's
    wanted = "b.region(...) returns" if "take regions" in words else "task tokens"
    assert d.fix is not None and wanted in d.fix, d.fix


def test_invalid_ir_is_reported_at_the_failing_op_with_the_whole_reason():
    """IR the builder's checks let through (an op inserted by hand) fails
    xDSL's verifier at finish(): reported at that op's line with all of the
    reason, not at the ProgramBuilder line with its first line only."""
    b = ProgramBuilder()
    r = b.region("R", b.buffer("B", "L1", 64), 0, elem="f16", shape=[8], layout="C")
    b._insert(WaitOp([r], []), b._location())
    line = _line() - 1
    with pytest.raises(NemDiagnosticError) as e:
        b.finish()
    d = e.value.diagnostics[0]
    assert d.loc.line == line and "should be of base attribute nem.token" in d.message


def test_names_used_outside_their_loop_are_named():
    """IR built outside the parser can use a loop body's value after the
    loop; the verifier names it (D-NAME-SCOPE).  RULE: NAME-01 RULE: TASK-03"""
    b = ProgramBuilder()
    buf = b.buffer("B", "L1", 64)
    with b.loop("i", 0, 3) as i:
        r = b.region("R", buf, 0, 8, elem="f16", shape=[4], layout="C")
        t = b.transfer(r, r, name="t")
    b.region("S", buf, i * 2, 2)
    b.wait(t)
    with pytest.raises(NemDiagnosticError) as e:
        b.finish()
    messages = [(d.rule, d.message) for d in e.value.diagnostics]
    assert ("NAME-01", "loop variable 'i' is used outside its loop (D-NAME-SCOPE)") in messages
    assert (
        "TASK-03",
        "token 't' is defined in the body of loop 'i' and used outside it (D-NAME-SCOPE)",
    ) in messages


def test_verifier_diagnostics_point_at_the_building_line():
    """RULE: EXT-01"""
    b = ProgramBuilder()
    buf = b.buffer("B", "L1", 64)
    b.region("R", buf, 0, 8, elem="f16", shape=[8], layout="C")
    line = _line() - 1
    with pytest.raises(NemDiagnosticError) as e:
        b.finish()
    d = e.value.diagnostics[0]
    assert (d.rule, d.loc.file, d.loc.line) == ("EXT-01", __file__, line)


def _line() -> int:
    import sys

    return sys._getframe(1).f_lineno


def test_regions_default_extent_strides_quant_and_untyped():
    b = ProgramBuilder()
    buf = b.buffer("B", "L2", 256)
    b.region("S", buf, 0, elem="i8", shape=[2, 3], strides=[8, 1])
    b.region("Q", buf, 64, elem="i8", shape=[4], layout="C", quant=PerTensorQuantAttr(0.5, 0))
    b.region("R", buf, 128, 16)
    b.region("H", buf, 192, elem="i4", shape=[3], layout="C")
    text = print_nem(b.finish())
    assert "S = region(B, 0, 11) elem=i8, shape=[2, 3], strides=[8, 1]" in text
    assert "quant=per_tensor(scale=0.5, zero_point=0)" in text
    assert "R = region(B, 128, 16)\n" in text
    assert "H = region(B, 192, 2) elem=i4" in text  # ceil(3 * 4 / 8)
    with pytest.raises(NemDiagnosticError, match="give extent="), b.loop("i", 0, 1) as i:
        b.region("D", buf, 0, elem="i8", shape=[i + 1], layout="C")
    with pytest.raises(NemDiagnosticError, match="exactly one of layout= or strides="):
        b.region("E", buf, 0, elem="i8", shape=[4])


def test_lets_decorators_sync_and_waits():
    b = ProgramBuilder("p", device="npm_lite", includes=["npm_lite.nem"])
    k = b.let("k", 2)
    b.let("pads", [1, 1, 1, 1])
    buf = b.buffer("B", "L1", 64 * k, decorators=[("debug", "weights")])
    r = b.region("R", buf, 0, elem="f16", shape=[8], layout="C")
    s = b.region("S", buf, 16, elem="f16", shape=[8], layout="C")
    t1 = b.transfer(s, r, name="t1", decorators=[("resource", "DMA", 0)])
    t2 = b.compute(
        "relu", ins=[s], outs=[s], name="t2", deps=[t1], decorators=[("debug", "two words")]
    )
    b.wait(t1, t2)
    with b.loop("j", 0, 3, decorators=["deterministic", ("max_in_flight", 1)]):
        b.compute("relu", ins=[r], outs=[r], sync=True, name="tj")
    text = print_nem(b.finish())
    assert text.startswith('include "npm_lite.nem"\ndevice npm_lite\n\nprogram p:\n')
    assert "let k = 2\nlet pads = [1, 1, 1, 1]\nbuffer B : L1 (size=64 * k) @debug(weights)" in text
    assert "@resource(DMA[0])" in text and '@debug("two words")' in text
    assert "wait(t1, t2)" in text
    assert "loop j in [0..3] @deterministic @max_in_flight(1):" in text
    assert print_nem(parse_nem(text)) == text


def test_building_into_existing_ir_at_an_insertion_point_with_a_location():
    """What a lowering or rewrite does: build before an op of parsed IR, with
    the source op's location."""
    module = parse_nem(
        "buffer A : L2 (size=64)\nbuffer B : L2 (size=64)\n"
        "X = region(A, 0, 64)\nY = region(B, 0, 64)\n"
        "t = transfer.sync(dst=Y, src=X)\n",
        "in.nem",
    )
    prog = next(op for op in module.walk() if isinstance(op, ProgramOp))
    move = next(op for op in prog.walk() if isinstance(op, TransferOp))
    b = NemBuilder.before(move, loc=SourceLoc("in.nem", 5, 1))
    t0 = b.transfer(move.src, move.dst, name="t0")
    b.wait(t0)
    assert isinstance(t0.owner.location, FileLineColLoc) and t0.owner.location.line.data == 5
    with b.at(b.insertion_point), b.located(SourceLoc("x.nem", 9, 2)):
        k = b.const("k", 1)
    assert SourceLoc.of(k.value.owner) == SourceLoc("x.nem", 9, 2)
    text = print_nem(module)
    assert (
        "t0 = transfer.async(dst=X, src=Y)\nwait(t0)\nconst k = 1\n"
        "t = transfer.sync(dst=Y, src=X)" in text
    )
    with NemBuilder.at_end(prog.block).loop("i", 0, 1) as i:
        pass
    loop = i.value.owner.parent_op()
    assert isinstance(loop, LoopOp) and prog.block.last_op is loop  # appended at the end


def test_device_name_includes_the_shipped_file(tmp_path):
    """D-BUILD-DEVICE: `device="npm_lite"` (docs/builder.md) prints a program
    that resolves its device with no --device (DEV-20)."""
    from nem.devices.program_device import program_device

    b = ProgramBuilder("x", device="npm_lite")
    b.buffer("B", "L2", size=64)
    text = print_nem(b.finish())
    assert text.startswith('include "npm_lite.nem"\ndevice npm_lite\n')
    path = tmp_path / "x.nem"
    path.write_text(text)
    prog = next(op for op in parse_nem(text, str(path)).walk() if isinstance(op, ProgramOp))
    device = program_device(prog, str(path))
    assert device is not None and device.name == "npm_lite"


@pytest.mark.parametrize(
    "device, message, fix",
    [
        (
            "npm_lite.nem",
            "is a file name, not a device name",
            'device="npm_lite" for a shipped device, or device_file="npm_lite.nem"',
        ),
        (
            "npm_huge",
            "is not a shipped device (npm_lite, npm_mid, npm_pro, npm_pro_x1)",
            'device_file="FILE.nem", or device="npm_huge", includes=["FILE.nem"]',
        ),
    ],
)
def test_device_name_that_is_no_shipped_device(device, message, fix):
    """D-BUILD-DEVICE: a file name or an unknown name given as device= is a
    DEV-20 diagnostic at the caller's line naming the keyword to use."""
    # RULE: DEV-20
    frame = inspect.currentframe()
    assert frame is not None
    with pytest.raises(NemDiagnosticError) as e:
        line = frame.f_lineno + 1  # the call's own line, the next one
        ProgramBuilder("x", device=device)
    d = e.value.diagnostics[0]
    assert d.rule == "DEV-20" and message in d.message and fix in d.fix
    assert d.loc is not None and (d.loc.file, d.loc.line) == (__file__, line)


def test_default_extent_is_written_with_the_shapes_names():
    """A dense region whose shape names consts gets its extent written with
    them (`TM * TK * 2`), as the issue-34 user expected, not folded to 4096;
    a literal shape, a strided region and a sub-byte element stay numbers."""
    from nem.frontends.nem_text import print_nem

    b = ProgramBuilder("g", device="npm_lite")
    TM, TK = b.const("TM", 32), b.const("TK", 64)
    A = b.buffer("A_L1", "L1", size=2 * TM * TK * 2)
    with b.loop("i", 0, 3) as i:
        a = b.region(
            "a", A, (i % 2) * (TM * TK * 2), elem="f16", shape=[TM, TK], layout="MK", let=True
        )
        b.region("c", A, 0, elem="i8", shape=[TM], layout="C", let=True)
        b.region("d", A, 0, elem="f16", shape=[4, 8], layout="MK", let=True)
        b.region("s", A, 0, elem="f16", shape=[TM, 2], strides=[2, 1], let=True)
        b.wait(b.compute("relu", ins=[a], outs=[a], name="t"))
    text = print_nem(b.finish())
    assert "let a = region(A_L1, (i mod 2) * (TM * TK * 2), TM * TK * 2) elem=f16" in text
    assert "let c = region(A_L1, 0, TM) elem=i8" in text
    assert "let d = region(A_L1, 0, 64) elem=f16" in text
    assert "let s = region(A_L1, 0, 128) elem=f16" in text
