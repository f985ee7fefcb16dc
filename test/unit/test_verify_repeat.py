"""D-VERIFY-REPEAT: a loop-dependent region check that passed is not run
again for a region of the same loop body with identical expressions, buffer
size and element type, and nothing else is skipped: every region that
breaks a rule gets its own diagnostic."""

from __future__ import annotations

import pytest

from nem.dialect.verifier import verify_program
from nem.frontends.nem_text.parser import parse_nem

HEAD = "program p:\nbuffer A : L2 (size=4096)\nbuffer B : L2 (size=4096)\nbuffer S : L2 (size=64)\n"


def _errors(body: str) -> list[tuple[str | None, int | None, str]]:
    module = parse_nem(HEAD + body, "t.nem")
    return [
        (d.rule, d.loc.line if d.loc else None, d.message)
        for d in verify_program(module.ops.first)
        if d.severity == "error"
    ]


def test_repeated_expressions_pass():
    assert (
        _errors(
            "loop i in [0..3]:\n"
            "  let X = region(A, (i mod 2) * 64, 64) elem=f16, shape=[32], layout=K\n"
            "  let Y = region(B, (i mod 2) * 64, 64) elem=f16, shape=[32], layout=K\n"
            "endloop\n"
        )
        == []
    )


def _loop(x: str, y: str) -> str:
    return f"loop i in [0..3]:\n  let X = {x}\n  let Y = {y}\nendloop\n"


F16 = "elem=f16, shape=[32], layout=K"


@pytest.mark.parametrize(
    "x, y, expected",
    [
        # a smaller buffer than the region that passed (RULE: REG-02)
        ("region(A, (i mod 2) * 64, 64)", "region(S, (i mod 2) * 64, 64)", [("REG-02", 7)]),
        # another element type than the region that passed (RULE: EXT-01)
        (
            f"region(A, (i mod 2) * 64, 64) {F16}",
            "region(B, (i mod 2) * 64, 64) elem=f32, shape=[32], layout=K",
            [("EXT-01", 7)],
        ),
        # a check that failed is never taken as passed (RULE: REG-02)
        (
            "region(S, (i mod 2) * 64, 64)",
            "region(S, (i mod 2) * 64, 64)",
            [("REG-02", 6), ("REG-02", 7)],
        ),
    ],
    ids=["smaller-buffer", "other-element-type", "each-failure-reports"],
)
def test_what_differs_is_checked(x, y, expected):
    errs = _errors(_loop(x, y))
    assert [(r, line) for r, line, _ in errs] == expected, errs


# -- the same on IR loaded from bytecode, where equal types and attribute
# entries are shared objects and the reader seeds the keys (D-BC-SEED) --------


def _both(text: str) -> list[tuple[str | None, int | None]]:
    """The error (rule, line) pairs of `text` parsed and loaded from `.nemb`,
    asserted equal."""
    from nem.dialect.diagnostics import NemDiagnosticError
    from nem.frontends.bytecode.loader import load_nemb
    from nem.frontends.bytecode.writer import write_nemb

    parsed = [
        (d.rule, d.loc.line if d.loc else None)
        for d in verify_program(parse_nem(text, "t.nem").ops.first)
        if d.severity == "error"
    ]
    try:
        load_nemb(write_nemb(parse_nem(text, "t.nem")), "t.nemb")
        loaded: list[tuple[str | None, int | None]] = []
    except NemDiagnosticError as e:
        loaded = [
            (d.rule, d.loc.line if d.loc else None) for d in e.diagnostics if d.severity == "error"
        ]
    assert loaded == parsed
    return parsed


def test_repeated_moves_pass():
    assert (
        _both(
            HEAD + "loop i in [0..3]:\n"
            "  t1 = transfer.async(dst=region(A, (i mod 2) * 64, 64), src=region(B, 0, 64))\n"
            "  t2 = transfer.async(dst=region(A, (i mod 2) * 64, 64), src=region(B, 0, 64))\n"
            "endloop\n"
        )
        == []
    )


MOVE = "t1 = transfer.async(dst=region(A, (i mod 2) * 64, 64), src=region(B, 0, 64))"


@pytest.mark.parametrize(
    "first, second, expected",
    [
        # a smaller destination extent than the move that passed (RULE: TASK-07)
        (
            MOVE,
            "t2 = transfer.async(dst=region(A, (i mod 2) * 64, 32), src=region(B, 0, 64))",
            [("TASK-07", 7)],
        ),
        # a smaller source extent (RULE: TASK-07)
        (
            "t1 = transfer.async(dst=region(A, (i mod 2) * 64, 32), src=region(B, 0, 16))",
            "t2 = transfer.async(dst=region(A, (i mod 2) * 64, 32), src=region(B, 0, 64))",
            [("TASK-07", 7)],
        ),
        # another destination offset in one buffer (RULE: HAZ-02)
        (
            "t1 = transfer.async(dst=region(B, (i mod 2) * 64 + 64, 64), src=region(B, 0, 64))",
            "t2 = transfer.async(dst=region(B, (i mod 2) * 64, 64), src=region(B, 0, 64))",
            [("HAZ-02", 7)],
        ),
        # another source offset in one buffer (RULE: HAZ-02)
        (
            "t1 = transfer.async(dst=region(B, 0, 64), src=region(B, (i mod 2) * 64 + 64, 64))",
            "t2 = transfer.async(dst=region(B, 0, 64), src=region(B, (i mod 2) * 64, 64))",
            [("HAZ-02", 7)],
        ),
        # the same expressions, but source and destination in one buffer (RULE: HAZ-02)
        (
            MOVE,
            "t2 = transfer.async(dst=region(B, (i mod 2) * 64, 64), src=region(B, 0, 64))",
            [("HAZ-02", 7)],
        ),
    ],
    ids=["dst-extent", "src-extent", "dst-offset", "src-offset", "same-buffer"],
)
def test_what_differs_in_a_move_is_checked(first, second, expected):
    """D-VERIFY-REPEAT for transfers and stores: each key component of the
    move check (its four expressions, whether the buffers are one) is tested
    by a second move that differs from a passing one in it alone and fails."""
    text = HEAD + f"loop i in [0..3]:\n  {first}\n  {second}\nendloop\n"
    assert _both(text) == expected


CHEAD = """program p:
buffer A : L1[0] (size=8192)
let X = region(A, 0, 64) elem=f16, shape=[32], layout=K
let Y = region(A, 64, 64) elem=f16, shape=[32], layout=K
let Xi = region(A, 128, 32) elem=i8, shape=[32], layout=K
let Yb = region(A, 192, 32) elem=f16, shape=[16], layout=K
let P = region(A, 1024, 2048) elem=f16, shape=[32, 32], layout=MK
let Q = region(A, 3072, 1024) elem=f16, shape=[32, 16], layout=KN
let R = region(A, 4096, 1024) elem=f16, shape=[32, 16], layout=MN
let S = region(A, 5120, 1024) elem=f16, shape=[32, 16], layout=MK
let T = region(A, 6144, 512) elem=f16, shape=[16, 16], layout=MN
"""


@pytest.mark.parametrize(
    "first, second, expected",
    [
        # another opcode, the same (empty) attribute entry (RULE: QUANT-10)
        ("relu.async in X out Y", "quantize.async in X out Y", [("QUANT-10", 13)]),
        # another input type (RULE: FAM-13)
        ("relu.async in X out Y", "relu.async in Xi out Y", [("FAM-13", 13)]),
        # another output type (RULE: FAM-13)
        ("relu.async in X out Y", "relu.async in X out Yb", [("FAM-13", 13)]),
        # another attribute entry (RULE: FAM-12)
        (
            "gemm.async in P, Q out R accum_type=f32",
            "gemm.async in P, Q out R accum_type=i32",
            [("FAM-12", 13)],
        ),
        # the same attribute entry, another argument value (RULE: FAM-25)
        (
            "gemm.async in S, Q out T trans_a=1",
            "gemm.async in S, Q out T trans_a=0",
            [("FAM-25", 13)],
        ),
    ],
    ids=["opcode", "input-type", "output-type", "attributes", "argument"],
)
def test_what_differs_in_a_compute_task_is_checked(first, second, expected):
    """The compute rules run once per signature (D-VERIFY-REPEAT): each
    component of the key is tested by a second task that differs from a
    passing one in it alone and fails.  On loaded IR the two tasks share
    their types and attribute entry, so a key without the component would
    take the second task as passed."""
    assert _both(CHEAD + f"t1 = {first}\nt2 = {second}\n") == expected
    assert _both(CHEAD + f"t1 = {first}\nt2 = {first}\n") == []


THEAD = """program p:
buffer A : L1[0] (size=4096)
buffer C : L1[1] (size=4096)
buffer B : L2 (size=4096)
R = region(A, 0, 64)
Rro = region(A, 0, 64) @readonly
S = region(B, 0, 64)
U = region(C, 0, 64)
X = region(A, 64, 64) elem=f16, shape=[32], layout=K
Y = region(A, 128, 64) elem=f16, shape=[32], layout=K
Z = region(A, 192, 64) elem=f16, shape=[32], layout=K @readonly
"""


@pytest.mark.parametrize(
    "first, second, expected",
    [
        # another operand type: L1[1] beside L1[0] (RULE: PLACE-02)
        ("transfer.async(dst=R, src=S)", "transfer.async(dst=R, src=U)", [("PLACE-02", 13)]),
        # another region decorator list: the destination is @readonly (RULE: DECO-07)
        ("transfer.async(dst=R, src=S)", "transfer.async(dst=Rro, src=S)", [("DECO-07", 13)]),
        # the task's decorators (RULE: PLACE-04)
        (
            "transfer.async(dst=R, src=S)",
            "transfer.async(dst=R, src=S) @seq_engine(1)",
            [("PLACE-04", 13)],
        ),
        # operand decorators (RULE: DECO-07)
        (
            "transfer.async(dst=R, src=S)",
            "transfer.async(dst=R @readonly, src=S)",
            [("DECO-07", 13)],
        ),
        # the operand segments: Z read, then written (RULE: DECO-07)
        (
            'compute.async in X, Z out Y op="k"',
            'compute.async in X out Z, Y op="k"',
            [("DECO-07", 13)],
        ),
    ],
    ids=["operand-type", "region-decorators", "task-decorators", "operand-decorators", "segments"],
)
def test_what_differs_in_a_task_signature_is_checked(first, second, expected):
    """Placement and access intent run once per task signature
    (D-VERIFY-REPEAT): each component is tested by a second task that
    differs from a passing one in it alone and fails."""
    assert _both(THEAD + f"t1 = {first}\nt2 = {second}\n") == expected
    assert _both(THEAD + f"t1 = {first}\nt2 = {first}\n") == []
