"""The hazard analysis jumps over the steady state of long loops
(D-HAZ-STEADY, issue 10 item 5): its diagnostics must be word for word those
of replaying every iteration (the oracle, `Replay`, kept for this test only).
RULE: HAZ-01 HAZ-03 LOOP-06
"""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from nem.analysis import steady_state
from nem.analysis.hazard_finder import HazardFinder, find_hazards
from nem.dialect.ops import ProgramOp
from nem.frontends.nem_text.parser import parse_nem


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


class Replay(HazardFinder):
    """The enumerating analysis: every iteration replayed, no steady state."""

    def _steady_run(self, *args):
        return None


class Counting(HazardFinder):
    """Counts the jumps over a steady state."""

    jumps = 0

    def _iterations(self, *args, **kw):
        jumped, replayed = super()._iterations(*args, **kw)
        Counting.jumps += jumped
        return jumped, replayed


def _program(src: str) -> ProgramOp:
    return next(o for o in parse_nem(src, "gen.nem").walk() if isinstance(o, ProgramOp))


def _diags(cls, src: str) -> list[tuple]:
    out = []
    for d in cls(_program(src)).run():
        notes = tuple((n.message, str(n.loc)) for n in d.notes or ())
        out.append((d.severity, d.rule, d.message, str(d.loc), d.fix, notes))
    return out


@st.composite
def offsets(draw, var: str, outer: str | None, slope: int, k: int) -> str:
    """Mostly `base + slope * var + periodic part` with one slope per buffer
    (what the jump needs); sometimes anything else."""
    c = draw(st.sampled_from([0, 8, 16, 64]))
    base = f"{c} + {var} * {slope}" if slope >= 0 else f"{c + 400} - {var} * {-slope}"
    kind = draw(st.sampled_from(["plain", "plain", "mod", "mod2", "div", "outer", "other",
                                 "square", "signed", "divdiv"]))
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
    return draw(st.sampled_from(["8", "16", "24", "16", "8", f"8 + ({var} mod 2) * 8",
                                 f"{var} + 1"]))


@st.composite
def programs(draw) -> str:
    """Tasks before a long loop (maybe inside a short outer loop), the loop's
    body (transfers, deps, waits, .sync, a loop-body buffer), tasks after."""
    lines = ["program p:", "buffer X : L2 (size=8192)", "buffer Y : L2 (size=8192)",
             "buffer Z : L2 (size=1024)"]
    count = [0]
    slopes = {b: draw(st.sampled_from([0, 0, 8, 16, -8])) for b in "XYZ"}
    k = draw(st.sampled_from([1, 2, 2, 3, 4]))

    def tasks(indent: str, var: str | None, outer: str | None, tokens: list[str],
              bufs: list[str], n: int) -> None:
        for _ in range(n):
            count[0] += 1
            name = f"t{count[0]}"

            def region() -> str:
                buf = draw(st.sampled_from(bufs))
                if var is None or buf.startswith("B"):
                    off, ext = str(draw(st.sampled_from([0, 8, 16, 32]))), "16"
                else:
                    off, ext = draw(offsets(var, outer, slopes[buf], k)), draw(extents(var))
                return f"region({buf}, {off}, {ext})"

            deps = [t for t in tokens if draw(st.integers(0, 2)) == 0]
            d = f", deps=[{', '.join(deps)}]" if deps else ""
            sync = draw(st.integers(0, 3)) == 0
            lines.append(f"{indent}{name} = transfer.{'sync' if sync else 'async'}"
                         f"(dst={region()}, src={region()}{d})")
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
    lines.append(f"{indent}loop i in [{draw(st.integers(0, 2))}..{draw(st.integers(3, 60))}]{deco}:")
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


@settings(max_examples=int(os.environ.get("NEM_STEADY", "400")), deadline=None)
@given(programs())
def test_same_diagnostics_as_replaying_every_iteration(src):
    """NEM_STEADY=N runs N programs (long mode; 3000 gave no difference)."""
    assert _diags(Counting, src) == _diags(Replay, src), src


def test_the_generator_reaches_the_jump():
    """The property above is about the jump: a good share of the generated
    programs take it (20 of these 100, fixed examples)."""
    before = Counting.jumps

    @settings(max_examples=100, deadline=None, database=None, derandomize=True)
    @given(programs())
    def run(src):
        _diags(Counting, src)

    run()
    assert Counting.jumps - before >= 12


def test_symbolic_proof_alone_matches_the_replay(monkeypatch):
    """With enumeration disabled (`MAX_REGULAR_TRIP = 0`) every jump rests on
    the symbolic proof on the tapes: same diagnostics as the replay on 150
    fixed random programs, and it proves enough of them to jump."""
    monkeypatch.setattr(steady_state, "MAX_REGULAR_TRIP", 0)
    before = Counting.jumps
    with_hazards = [0]

    @settings(max_examples=150, deadline=None, database=None, derandomize=True)
    @given(programs())
    def run(src):
        jumps = Counting.jumps
        got = _diags(Counting, src)
        assert got == _diags(Replay, src), src
        with_hazards[0] += bool(got) and Counting.jumps > jumps

    run()
    assert Counting.jumps - before >= 15
    # the comparison is not only of empty lists: programs that jump also race
    assert with_hazards[0] >= 5, with_hazards


class _Probed(Exception):
    pass


def _regularity(src: str) -> tuple[int, list[int]] | None:
    """(period, sorted shifts) of `regular_body` for the (only) loop of
    `src`, as the finder asks for it (then stops: no replay)."""

    class Probe(HazardFinder):
        def _steady_run(self, *args):
            run = super()._steady_run(*args)
            raise _Probed(run and (run.reg.period, sorted(run.reg.shift.values())))

    try:
        Probe(_program(src)).run()
    except _Probed as p:
        return p.args[0]
    raise AssertionError("the loop was not reached")


def _loop(offset: str, extent: str = "16", n: int = 4294967296) -> str:
    return f"""program p:
buffer A : L2 (size=1099511627776)
buffer L : L1 (size=1024)
loop i in [0..{n - 1}] @max_in_flight(2):
  t = transfer.async(dst=region(L, 0, 16), src=region(A, {offset}, {extent}))
  wait(t)
endloop
"""


def test_symbolic_periods_and_shifts():
    """The period is raised until every division is exact (`(i / 2) / 2`:
    lcm 2 leaves `i / 2` moving by 1, not a multiple of 2, so 4; `(i / 2) / 3`
    needs 6), and the shift per period is the
    offset's slope times the period (buffer L does not move: shift 0)."""
    assert _regularity(_loop("(i mod 4) * 16 + i * 64")) == (4, [0, 256])
    assert _regularity(_loop("((i / 2) / 3) * 16")) == (6, [0, 16])
    assert _regularity(_loop("((i / 2) / 2) * 16")) == (4, [0, 16])
    assert _regularity(_loop("((3 * i + 1) mod 4) * 16")) == (4, [0, 0])
    assert _regularity(_loop("i * 16", "8 + (i mod 2) * 8")) == (2, [0, 32])


def test_symbolic_refusals():
    """What the tapes cannot prove on a 2^32-iteration loop (too long to
    enumerate) is not proven: a product of two loop-dependent factors,
    truncated division of an offset crossing 0, an extent that grows, a
    period beyond MAX_PERIOD, a value that may leave int64."""
    assert _regularity(_loop("((i * i) mod 2) * 16")) is None
    assert _regularity(_loop("((i - 5) / 2) * 16 + 64")) is None
    assert _regularity(_loop("0", "(i mod 3) + i")) is None
    assert _regularity(_loop("(i mod 8192) * 16")) is None
    assert _regularity(_loop("i * 4294967296 * 4")) is None
    # a short loop still gets enumeration for what is periodic but not quasi-affine
    assert _regularity(_loop("((i * i) mod 2) * 16", n=100)) == (2, [0, 0])


def test_pipelined_race_found_at_scale_with_the_replayed_witness():
    """A 5000-iteration loop racing across iterations: the same HAZ-03 (same
    iterations, bytes and fix) as the replay, from a few replayed iterations."""
    src = pipelined(5000, slot=8, window=3)
    before = Counting.jumps
    got = _diags(Counting, src)
    assert Counting.jumps - before == 1   # the steady state was jumped, not replayed whole
    assert got == _diags(Replay, src)
    assert any(d[1] == "HAZ-03" for d in got), got


def test_million_iterations_analyzed_whole_by_jumping():
    """Issue 10 item 5: the 10^6 x 4-task loop is analyzed to its end (no
    D-HAZ-WINDOW warning) -- the replay stops at 2^20 instances with one --
    by one jump over its steady state (the time is bench_verify_scale's)."""
    before = Counting.jumps
    assert find_hazards(_program(pipelined(10**6))) == []
    assert _diags(Counting, pipelined(10**6)) == []
    assert Counting.jumps - before == 1


def test_four_billion_iteration_pingpong_covered_whole():
    """The fuzz campaign's "hang" (issue 10/11): a 2^32-iteration loop, far
    beyond enumeration, is proven periodic on its tapes and analyzed to its
    end: no D-HAZ-WINDOW warning, a handful of iterations replayed (the
    replay used to stop at 2^20 instances after ~13 s with a warning)."""
    src = """program safe_pingpong:
const T = 4294967296
const tile = 256
buffer X_L2 : L2 (size=T * tile, align=64)
buffer Y_L2 : L2 (size=T * tile, align=64)
buffer X_L1 : L1 (size=2 * tile, align=64)
loop i in [0..T-1] @max_in_flight(2):
  tX = transfer.async(dst=region(X_L1, (i mod 2) * tile, tile), src=region(X_L2, i * tile, tile))
  tS = store.async(dst=region(Y_L2, i * tile, tile), src=region(X_L1, (i mod 2) * tile, tile), deps=[tX])
  wait(tS)
endloop
"""
    replayed = []

    class Tally(HazardFinder):
        def _iterations(self, *args, **kw):
            out = super()._iterations(*args, **kw)
            replayed.append(out)
            return out

    assert _diags(Tally, src) == []
    assert len(replayed) == 1, replayed            # one loop, analyzed once
    jumped, iterations = replayed[0]
    assert jumped and iterations < 64, replayed     # by a jump, after a few iterations
