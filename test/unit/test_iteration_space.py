"""Loop-dependent checks over whole iteration spaces (issue 10 item 5,
D-VERIFY-ENUM, D-VERIFY-BUDGET).

The verifier proves region bounds, extents and transfer overlap from value
intervals over the box of loop bounds and enumerates the rest vectorized;
the oracle here is the point-by-point enumeration it replaced (the same
per-point check at every iteration, in program order, no proofs): on random
small programs both must report the same diagnostics, word for word.
RULE: REG-01 REG-02 EXT-01 EXT-02 TASK-07 HAZ-02
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from nem.dialect.diagnostics import NemDiagnosticError
from nem.dialect.expressions import ExprError
from nem.dialect.iteration_space import (
    Inexact,
    IterationSpace,
    forms,
    vector_eval,
    witness,
)
from nem.dialect.ops import LoopOp, ProgramOp, RegionOp
from nem.dialect.verifier import ProgramVerifier
from nem.frontends.nem_text.parser import parse_nem


class PointByPoint(ProgramVerifier):
    """The old verifier: every check at every iteration point, one by one."""

    def each_point(self, op, loops, check, suspects, what, rule):
        for env in self.envs(loops):
            if not check(env):
                return

    def _region_proven(self, *args) -> bool:
        return False

    def _move_proven(self, *args) -> bool:
        return False


def _program(src: str) -> ProgramOp:
    try:
        module = parse_nem(src, "gen.nem")
    except NemDiagnosticError:  # a constant divided by zero: the parser's error
        assume(False)
    return next(o for o in module.walk() if isinstance(o, ProgramOp))


def _diags(cls, src: str) -> list[tuple]:
    return [(d.severity, d.rule, d.message, str(d.loc)) for d in cls(_program(src)).run()]


VARS = ("i", "j")


def lit(n: int) -> str:
    """An integer as NEM writes it (no unary minus, LEX-06)."""
    return str(n) if n >= 0 else f"(0 - {-n})"


@st.composite
def expressions(draw, names: tuple[str, ...], depth: int = 2) -> str:
    """Integer expressions over loop variables: affine parts, `mod`, `/`."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        if names and draw(st.booleans()):
            return draw(st.sampled_from(names))
        return lit(draw(st.integers(-4, 40)))
    a = draw(expressions(names, depth - 1))
    b = draw(expressions(names, depth - 1))
    op = draw(st.sampled_from(["+", "-", "*", "mod", "/", "+", "*"]))
    if op in ("mod", "/"):
        b = lit(draw(st.sampled_from([1, 2, 3, 4, 7, -3, 0]))) if draw(st.integers(0, 9)) else b
    return f"({a} {op} {b})"


@st.composite
def programs(draw) -> str:
    lines = [
        "program p:",
        f"buffer A : L2 (size={draw(st.integers(16, 160))})",
        f"buffer B : L2 (size={draw(st.integers(16, 160))})",
    ]
    names: tuple[str, ...] = ()
    for d in range(draw(st.integers(1, 2))):
        lo = draw(st.integers(-2, 3))
        hi = draw(st.integers(-1, 12))
        hi_text = f"{VARS[0]} + {hi % 4}" if d == 1 and draw(st.booleans()) else lit(hi)
        lines.append("  " * d + f"loop {VARS[d]} in [{lit(lo)}..{hi_text}]:")
        names += (VARS[d],)
    ind = "  " * len(names)
    for k in range(draw(st.integers(1, 3))):
        off = [draw(expressions(names)) for _ in range(2)]
        ext = [
            draw(st.sampled_from(["8", "16", "4", draw(expressions(names, 1))])) for _ in range(2)
        ]
        bufs = draw(st.sampled_from([("A", "B"), ("A", "A"), ("B", "B")]))
        typed = draw(st.integers(0, 3)) == 0
        if typed:
            lines.append(
                ind + f"let R{k} = region({bufs[1]}, {off[1]}, {ext[1]}) elem=i8, "
                f"shape=[{draw(st.integers(1, 12))}], layout=N"
            )
            src = f"R{k}"
        else:
            src = f"region({bufs[1]}, {off[1]}, {ext[1]})"
        lines.append(
            ind + f"t{k} = transfer.sync(dst=region({bufs[0]}, {off[0]}, {ext[0]}), src={src})"
        )
    for d in reversed(range(len(names))):
        lines.append("  " * d + "endloop")
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(programs())
@pytest.mark.slow  # 10 s
def test_same_diagnostics_as_point_by_point(src):
    assert _diags(ProgramVerifier, src) == _diags(PointByPoint, src), src


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_forms_bound_every_value_and_affine_ones_exactly(data):
    src = data.draw(programs())
    prog = _program(src)
    v = ProgramVerifier(prog)
    for rop in (o for o in prog.walk() if isinstance(o, RegionOp)):
        loops = tuple(lp for lp in _enclosing(rop))
        box = IterationSpace(v.ev, loops).box()
        if box is None:
            continue
        try:
            (f,) = forms(v.ev, [rop.offset], box)
        except ExprError:
            continue
        seen = []
        for env in v.envs(loops):
            try:
                x = v.ev.eval(rop.offset, env)
            except ExprError:
                continue
            seen.append(x)
            if f is not None and f.interval is not None:
                assert f.interval[0] <= x <= f.interval[1], src
        if f is not None and f.affine is not None and f.fits and seen:
            assert (min(seen), max(seen)) == f.interval, src
            lo_env = witness(f, box, minimize=True)
            assert v.ev.eval(rop.offset, lo_env) == f.interval[0]


@settings(max_examples=200, deadline=None)
@given(programs())
def test_vector_eval_matches_scalar(src):
    prog = _program(src)
    v = ProgramVerifier(prog)
    for rop in (o for o in prog.walk() if isinstance(o, RegionOp)):
        loops = tuple(_enclosing(rop))
        try:
            chunks = list(IterationSpace(v.ev, loops).chunks())
        except Inexact:
            continue
        envs = list(v.envs(loops))
        assert sum(n for _, n in chunks) == len(envs)
        for chunk, n in chunks:
            try:
                got = vector_eval(v.ev, rop.offset, chunk, n)
            except Inexact:
                continue
            want = [
                v.ev.eval(rop.offset, {x: int(a[k]) for x, a in chunk.items()}) for k in range(n)
            ]
            assert list(got) == want, src


def _enclosing(op) -> list[LoopOp]:
    out = []
    p = op.parent_op()
    while p is not None:
        if isinstance(p, LoopOp):
            out.append(p)
        p = p.parent_op()
    return out[::-1]


# ---------------------------------------------------------------------------
# beyond enumeration: exact for affine expressions, a warning otherwise
# ---------------------------------------------------------------------------

BIG = """\
program p:
buffer A : L2 (size={size})
loop i in [0..{hi}]:
  R = region(A, {off}, 8)
endloop
"""


@pytest.mark.parametrize(
    "size, off, rule, where",
    [
        (640000000000, "i * 8", "REG-02", "i=80000000000"),  # the last iteration only
        (640000000008, "i * 8", None, None),  # every iteration fits
        (64, "56 - i * 8", "REG-01", "i=80000000000"),  # REG-01 from i=8 on
        (64, "(i mod 8) * 8", None, None),  # proven by intervals
        (64, "(i mod 2) * 64", "REG-02", "i=1"),  # found by enumeration
    ],
)
def test_huge_loops_checked_without_enumeration(size, off, rule, where):
    diags = ProgramVerifier(_program(BIG.format(size=size, hi=80000000000, off=off))).run()
    errors = [d for d in diags if d.severity == "error"]
    assert [d.rule for d in errors] == ([rule] if rule else [])
    if where:
        assert where in errors[0].message


def test_unprovable_huge_loop_warns_what_was_not_checked(monkeypatch):
    from nem.dialect import point_checks, region_rules, task_rules

    for module in (point_checks, region_rules, task_rules):
        monkeypatch.setattr(module, "MAX_POINTS", 1 << 12)
    src = BIG.format(size=64, hi=1 << 40, off="(i mod 7) * 9 - (i mod 7) * 8")
    diags = ProgramVerifier(_program(src)).run()
    assert [(d.severity, d.rule) for d in diags] == [("warning", "REG-02")]
    assert "first 4096 iteration points only (up to i=4095)" in diags[0].message
    assert "D-VERIFY-BUDGET" in diags[0].fix


def test_vector_eval_refuses_what_int64_cannot_hold():
    src = BIG.format(size=64, hi=10, off="i * 4611686018427387904")
    prog = _program(src)
    v = ProgramVerifier(prog)
    rop = next(o for o in prog.walk() if isinstance(o, RegionOp))
    ((chunk, n),) = IterationSpace(v.ev, tuple(_enclosing(rop))).chunks()
    with pytest.raises(Inexact):
        vector_eval(v.ev, rop.offset, chunk, n)
    assert np.array_equal(chunk[next(iter(chunk))], np.arange(11))
