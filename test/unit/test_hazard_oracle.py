"""The hazard analysis over sets of instances (D-HAZ-SYMBOLIC) against the
enumerating replay it replaced (`hazard_replay.py`, kept as the oracle):
word for word the same diagnostics on generated programs with long loops,
and the same verdicts and races (by static task pair) on the differential
test's programs (nested, pipelined loops, mod slots, loop-body buffers);
its ordering sets against the `ordered` predicate they are the twin of.
`NEM_ORACLE=N` runs N programs per property (long mode; the short mode is
fixed-seed).
RULE: HAZ-01 HAZ-03 LOOP-06
"""

from __future__ import annotations

import os
import random

import hazard_replay
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from semantics_programs import programs as diff_programs

from nem.analysis.happens_before import (
    Structure,
    issued_before,
    issued_before_set,
    ordered,
    ordered_set,
    unordered_pieces,
)
from nem.analysis.hazard_finder import HazardFinder, find_hazards, find_races
from nem.analysis.presburger import Boxes, Nest, instance_space
from nem.dialect.expressions import Evaluator
from nem.dialect.ops import ProgramOp
from nem.frontends.nem_text.parser import parse_nem

N = int(os.environ.get("NEM_ORACLE", "0"))
"""Programs per property in long mode (0: the short fixed-seed defaults)."""


def pipelined(n: int, slot: int = 16, window: int = 1) -> str:
    """Two loads into ping-pong slots of L, two stores back, `n` iterations
    (`bench/bench_verify_scale.py` measures this program with slot 16)."""
    return f"""program p:
buffer A : L2 (size={16 * n})
buffer B : L2 (size={16 * n})
buffer L : L1[0] (size=256)
loop i in [0..{n - 1}] @max_in_flight({window}):
  a = transfer.async(dst=region(L, (i mod 2) * 64, 16), src=region(A, i * 16, 16))
  b = transfer.async(dst=region(L, (i mod 2) * 64 + {slot}, 16), src=region(B, i * 16, 16))
  c = transfer.sync(dst=region(A, i * 16, 16), src=region(L, (i mod 2) * 64 + {slot}, 16), deps=[a, b])
  d = transfer.sync(dst=region(B, i * 16, 16), src=region(L, (i mod 2) * 64, 16), deps=[c])
endloop
"""


def _program(src: str) -> ProgramOp:
    return next(o for o in parse_nem(src, "gen.nem").walk() if isinstance(o, ProgramOp))


def _diags(run, src: str) -> list[tuple]:
    out = []
    for d in run(_program(src)):
        notes = tuple((n.message, str(n.loc)) for n in d.notes or ())
        out.append((d.severity, d.rule, d.message, str(d.loc), d.fix, notes))
    return out


@st.composite
def offsets(draw, var: str, outer: str | None, slope: int, k: int) -> str:
    """Mostly `base + slope * var + periodic part` with one slope per buffer
    (what the jump needs); sometimes anything else."""
    c = draw(st.sampled_from([0, 8, 16, 64]))
    base = f"{c} + {var} * {slope}" if slope >= 0 else f"{c + 400} - {var} * {-slope}"
    kind = draw(
        st.sampled_from(
            ["plain", "plain", "mod", "mod2", "div", "outer", "other", "square", "signed", "divdiv"]
        )
    )
    if kind == "plain":
        return base
    if kind == "mod":
        return f"({var} mod {k}) * 16 + {base}"
    if kind == "mod2":
        return f"((2 * {var} + 1) mod {k}) * 8 + {base}"
    if kind == "div":
        return f"({var} / {k}) * {k * abs(slope)} + {c}"
    if kind == "outer":
        return f"{outer or 0} * 32 + {base}"
    if kind == "square":  # periodic, not quasi-affine: only enumeration proves it
        return f"(({var} * {var}) mod 2) * 16 + {base}"
    if kind == "signed":  # truncated division across 0: not periodic
        return f"(({var} - 20) / {k}) * 16 + {base} + 200"
    if kind == "divdiv":  # period 4k: longer than the lcm of the divisors
        return f"(({var} / 2) / {k}) * {2 * k * abs(slope)} + {c}"
    return f"{var} * {draw(st.sampled_from([0, 4, 8, 16]))} + {c}"


@st.composite
def extents(draw, var: str) -> str:
    return draw(
        st.sampled_from(["8", "16", "24", "16", "8", f"8 + ({var} mod 2) * 8", f"{var} + 1"])
    )


STRIDED = [
    "",
    "",
    "",
    " elem=i8, shape=[2, 4], strides=[8, 1]",  # bytes 0-3 and 8-11 of the extent
    " elem=f16, shape=[2, 2], strides=[4, 1]",  # bytes 0-3 and 8-11 too
    " elem=i4, shape=[4, 2], strides=[4, 1]",  # bytes 0, 2, 4 and 6 (nibbles 0-1, 4-5, ...)
]
"""Untyped regions, and strided typed ones whose elements leave gaps in their
extent (D-HAZ-ELEMENTS: they touch those bytes only)."""


@st.composite
def programs(draw) -> str:
    """Tasks before a long loop (maybe inside a short outer loop), the loop's
    body (transfers, deps, waits, .sync, a loop-body buffer), tasks after."""
    lines = [
        "program p:",
        "buffer X : L2 (size=8192)",
        "buffer Y : L2 (size=8192)",
        "buffer Z : L2 (size=1024)",
    ]
    count = [0]
    slopes = {b: draw(st.sampled_from([0, 0, 8, 16, -8])) for b in "XYZ"}
    k = draw(st.sampled_from([1, 2, 2, 3, 4]))

    def tasks(
        indent: str, var: str | None, outer: str | None, tokens: list[str], bufs: list[str], n: int
    ) -> None:
        for _ in range(n):
            count[0] += 1
            name = f"t{count[0]}"

            def region() -> str:
                buf = draw(st.sampled_from(bufs))
                if var is None or buf.startswith("B"):
                    off, ext = str(draw(st.sampled_from([0, 8, 16, 32]))), "16"
                else:
                    off, ext = draw(offsets(var, outer, slopes[buf], k)), draw(extents(var))
                return f"region({buf}, {off}, {ext}){draw(st.sampled_from(STRIDED))}"

            deps = [t for t in tokens if draw(st.integers(0, 2)) == 0]
            d = f", deps=[{', '.join(deps)}]" if deps else ""
            sync = draw(st.integers(0, 3)) == 0
            lines.append(
                f"{indent}{name} = transfer.{'sync' if sync else 'async'}"
                f"(dst={region()}, src={region()}{d})"
            )
            if not sync:
                tokens.append(name)
                if draw(st.integers(0, 3)) == 0:
                    lines.append(f"{indent}wait({name})")

    top: list[str] = []
    tasks("", None, None, top, ["X", "Y", "Z"], draw(st.sampled_from([0, 0, 1, 2])))
    indent, outer = "", None
    if draw(st.booleans()):
        n_out = draw(st.sampled_from(["", "", " @max_in_flight(2)"]))
        lines.append(f"loop j in [0..{draw(st.integers(0, 2))}]{n_out}:")
        indent, outer = "  ", "j"
    n = draw(st.integers(1, 3))
    deco = f" @max_in_flight({n})" if n > 1 else ""
    lines.append(
        f"{indent}loop i in [{draw(st.integers(0, 2))}..{draw(st.integers(3, 60))}]{deco}:"
    )
    body = indent + "  "
    bufs = ["X", "Y", "Z"]
    if draw(st.integers(0, 3)) == 0:
        lines.append(f"{body}buffer B : L2 (size=64)")
        bufs.append("B")
    tasks(body, "i", outer, list(top) if outer is None else [], bufs, draw(st.integers(1, 4)))
    lines.append(f"{indent}endloop")
    if outer is not None:
        tasks(indent, None, None, [], ["X", "Y", "Z"], draw(st.integers(0, 1)))
        lines.append("endloop")
    tasks("", None, None, top, ["X", "Y", "Z"], draw(st.integers(0, 2)))
    return "\n".join(lines) + "\n"


@seed(20261128)
@settings(
    max_examples=N or 150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(programs())
def test_same_diagnostics_as_the_replay(src):
    """Long loops (up to 60 iterations, in a short outer loop), offsets with
    mod, /, products of loop variables (enumerated), loop-body buffers,
    strided typed regions (`STRIDED`)."""
    assert _diags(find_hazards, src) == _diags(hazard_replay.find_hazards, src), src


def _race_pairs(races) -> set[tuple]:
    return {
        (
            a.inst.task.op.token_name() or a.inst.task.pos,
            b.inst.task.op.token_name() or b.inst.task.pos,
            a.write,
            b.write,
        )
        for a, b, _ in races
    }


@seed(20261129)
@settings(
    max_examples=N or 120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(diff_programs())
def test_same_verdicts_and_races_on_nested_pipelined_programs(src):
    """The differential test's generator: nested and pipelined loops, mod
    slots, loop-body buffers, deps and waits omitted at random."""
    new = find_races(_program(src))
    old = hazard_replay.find_races(_program(src))
    assert bool(new.races) == bool(old), src
    assert _race_pairs([(r.earlier, r.later, r.order) for r in new.races]) == _race_pairs(old), src


@seed(20261130)
@settings(
    max_examples=N or 60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(diff_programs(), st.randoms(use_true_random=False))
def test_ordering_sets_are_the_twins_of_ordered(src, rnd: random.Random):
    """`issued_before_set` / `ordered_set` contain exactly the instance pairs
    where `issued_before` / `ordered` hold (random instance pairs of random
    task pairs of each program), and `unordered_pieces` is their difference."""
    prog = _program(src)
    s = Structure(prog)
    ev = Evaluator()
    boxes = Boxes(ev)
    for op in prog.walk():
        if hasattr(op, "iv_name"):
            boxes.add(op)
    tasks = list(s.tasks.values())
    for _ in range(20):
        a, b = rnd.choice(tasks), rnd.choice(tasks)
        sp = instance_space((len(a.loops), len(b.loops)))
        na, nb = Nest(ev, boxes, a.loops, sp, 0), Nest(ev, boxes, b.loops, sp, 1)
        before = issued_before_set(s, a, na.ords, b, nb.ords, sp)
        ords = ordered_set(s, a, na.ords, na.trips, b, nb.ords, sp)
        pieces = unordered_pieces(s, a, na.ords, na.trips, b, nb.ords, sp)
        union = sp.empty
        for piece in pieces:
            union = union | piece
        points = na.domain & nb.domain
        assert (union & points).is_equal(before.subtract(ords) & points), src
        if points.is_empty():
            continue
        finder = HazardFinder(prog)
        for _ in range(5):
            p = _random_point(points, rnd)
            ia, ib = (
                finder.instance(a, tuple(p[: len(a.loops)])),
                finder.instance(b, tuple(p[len(a.loops) :])),
            )
            inside = _contains(before, p)
            assert inside == issued_before(s, ia, ib), (src, p)
            if inside:
                assert _contains(ords, p) == ordered(s, ia, ib).ordered, (src, p)


def _random_point(points, rnd: random.Random) -> list[int]:
    import islpy as isl

    s = points
    out = []
    for d in range(s.dim(isl.dim_type.set)):
        lo = s.dim_min_val(d).to_python() if d == d else 0
        hi = s.dim_max_val(d).to_python()
        v = rnd.randint(lo, hi)
        fixed = s.fix_val(isl.dim_type.set, d, v)
        if fixed.is_empty():
            v = s.dim_min_val(d).to_python()
            fixed = s.fix_val(isl.dim_type.set, d, v)
        s = fixed
        out.append(v)
    return out


def _contains(s, p: list[int]) -> bool:
    import islpy as isl

    for d, v in enumerate(p):
        s = s.fix_val(isl.dim_type.set, d, v)
    return not s.is_empty()


def test_pipelined_race_found_at_scale_with_the_replayed_witness():
    """A 5000-iteration loop racing across iterations: the same HAZ-03 (same
    iterations, bytes and fix) as the replay."""
    src = pipelined(5000, slot=8, window=3)
    got = _diags(find_hazards, src)
    assert got == _diags(hazard_replay.find_hazards, src)
    assert any(d[1] == "HAZ-03" for d in got), got


def test_million_iterations_analyzed_whole():
    """Issue 10 item 5: the 10^6 x 4-task loop is analyzed to its end (no
    D-HAZ-WINDOW warning; the replay stops at 2^20 instances with one)."""
    assert find_hazards(_program(pipelined(10**6))) == []


def test_four_billion_iteration_pingpong_covered_whole():
    """The fuzz campaign's "hang" (issue 10/11): a 2^32-iteration loop, far
    beyond enumeration, safe, and its racy variant (three iterations in
    flight for two slots) rejected for the iterations the replay names."""
    src = """program safe_pingpong:
const T = 4294967296
const tile = 256
buffer X_L2 : L2 (size=T * tile, align=64)
buffer Y_L2 : L2 (size=T * tile, align=64)
buffer X_L1 : L1 (size=2 * tile, align=64)
loop i in [0..T-1] @max_in_flight(N):
  tX = transfer.async(dst=region(X_L1, (i mod 2) * tile, tile), src=region(X_L2, i * tile, tile))
  tS = store.async(dst=region(Y_L2, i * tile, tile), src=region(X_L1, (i mod 2) * tile, tile), deps=[tX])
  wait(tS)
endloop
"""
    assert find_hazards(_program(src.replace("(N)", "(2)"))) == []
    racy = find_hazards(_program(src.replace("(N)", "(3)")))
    assert [d.rule for d in racy] and all(d.rule == "HAZ-03" for d in racy), racy
    assert "iterations i=0 and i=2 (distance 2)" in racy[0].notes[0].message
