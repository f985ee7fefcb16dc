"""Property tests of `nem-check-hazards` (issue 3; HAZ-01/03, LOOP-06).

hypothesis builds random race-free tiled programs: an optional weight loaded
before the loops, then one to three loops `@max_in_flight(N)` that stream
tiles through K ping-pong L1 slots indexed `(i mod K)` with N <= K (transfer
in -> relu/add -> store out, with the dependencies that order them, and
optionally a trailing `wait` on the store).  The checker must accept every
such program, and reject it once a single dependency is removed or once N
exceeds K.  Programs are built with the builder API (`nem.dialect.builder`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from nem.analysis.hazard_finder import find_hazards
from nem.analysis.token_liveness import max_live_tokens
from nem.dialect.builder import ProgramBuilder
from nem.dialect.ops import ProgramOp
from nem.frontends.nem_text import parse_nem, print_nem

TILE = 64  # f16 [32]
TYPED = {"elem": "f16", "shape": [32], "layout": "C"}


@dataclass
class LoopSpec:
    k: int  # slots
    n: int  # max_in_flight
    lo: int
    trip: int
    binary: bool  # add (reads X and the weight) instead of relu
    trailing_wait: bool
    own_buffers: bool


def build_program(
    weight: bool,
    loops: list[LoopSpec],
    drop: tuple[int, str] | None = None,
    n_override: tuple[int, int] | None = None,
) -> ProgramOp:
    """`drop = (loop index, dep)` removes one dependency: 'x' (compute on the
    transfer in), 'c' (store on the compute), 'w' (compute on the weight)."""
    total = sum(lp.trip for lp in loops)
    kmax = max(lp.k for lp in loops)
    b = ProgramBuilder()

    def typed(buf, offset, name=None, let=False):
        return b.region(name, buf, offset, TILE, let=let, **TYPED)

    X_DDR = b.buffer("X_DDR", "DDR", total * TILE)
    Y_DDR = b.buffer("Y_DDR", "DDR", total * TILE)
    W_DDR = b.buffer("W_DDR", "DDR", TILE)
    W_L1 = b.buffer("W_L1", "L1[0]", TILE)
    slots = {}
    for j, lp in enumerate(loops):
        if j == 0 or lp.own_buffers:
            slots[j] = (
                b.buffer(f"X_L1_{j}", "L1[0]", kmax * TILE),
                b.buffer(f"Y_L1_{j}", "L1[0]", kmax * TILE),
            )
    if weight:
        Wt = typed(W_L1, 0, "Wt")
        tW = b.transfer(Wt, typed(W_DDR, 0), name="tW")
    base = 0
    owner = 0
    for j, lp in enumerate(loops):
        if lp.own_buffers or j == 0:
            owner = j
        n = lp.n if n_override is None or n_override[0] != j else n_override[1]
        with b.loop(f"i{j}", lp.lo, lp.lo + lp.trip - 1, max_in_flight=n) as i:
            slot = (i % lp.k) * TILE
            tile = (i - lp.lo + base) * TILE
            X = typed(slots[owner][0], slot, f"X_{j}", let=True)
            Y = typed(slots[owner][1], slot, f"Y_{j}", let=True)
            tX = b.transfer(X, typed(X_DDR, tile), name=f"tX_{j}")
            deps_c = [] if drop == (j, "x") else [tX]
            binary = weight and lp.binary
            if binary and drop != (j, "w"):
                deps_c.append(tW)
            tC = b.compute(
                "add" if binary else "relu",
                ins=[X, Wt] if binary else [X],
                outs=[Y],
                deps=deps_c,
                name=f"tC_{j}",
            )
            tS = b.store(
                typed(Y_DDR, tile), Y, deps=[] if drop == (j, "c") else [tC], name=f"tS_{j}"
            )
            if lp.trailing_wait:
                b.wait(tS)
        base += lp.trip
    b.finish()
    return b.program


@st.composite
def programs(draw):
    weight = draw(st.booleans())
    loops = []
    for j in range(draw(st.integers(1, 3))):
        k = draw(st.integers(1, 4))
        # a loop that shares the previous loop's slots needs that loop to have
        # waited for its stores (D-HAZ-ENDLOOP); otherwise give it its own
        own = j == 0 or not loops[-1].trailing_wait or draw(st.booleans())
        loops.append(
            LoopSpec(
                k=k,
                n=draw(st.integers(1, k)),
                lo=draw(st.integers(0, 3)),
                trip=draw(st.integers(k + 1, k + 5)),
                binary=draw(st.booleans()),
                trailing_wait=draw(st.booleans()),
                own_buffers=own,
            )
        )
    return weight, loops


def _hazards(prog: ProgramOp) -> tuple[list, str]:
    """The hazard errors of a program (verified by `finish()`) and its text."""
    return [d for d in find_hazards(prog) if d.severity == "error"], print_nem(prog)


@settings(max_examples=40, deadline=None)
@given(programs(), st.data())
def test_race_free_accepted_and_mutants_rejected(prog, data):
    weight, loops = prog
    found, text = _hazards(build_program(weight, loops))
    assert not found, text + "\n".join(d.render() for d in found)

    # one dependency removed -> rejected
    j = data.draw(st.integers(0, len(loops) - 1))
    # the weight dep can only be dropped in the first loop that reads the
    # weight: a later loop is ordered after tW by the earlier loop's
    # dependency on it (the checker rightly accepts that)
    first_w = next((m for m, lp in enumerate(loops) if lp.binary), None)
    choices = ["x", "c"] + (["w"] if weight and j == first_w else [])
    dep = data.draw(st.sampled_from(choices))
    found, mutant = _hazards(build_program(weight, loops, drop=(j, dep)))
    assert found, mutant
    assert all(d.rule in ("HAZ-01", "HAZ-03") for d in found)

    # N > K -> iterations i and i+K share a slot while in flight
    j = data.draw(st.integers(0, len(loops) - 1))
    k = loops[j].k
    found, mutant = _hazards(build_program(weight, loops, n_override=(j, k + 1)))
    assert any(d.rule == "HAZ-03" and f"loop 'i{j}'" in d.message for d in found), mutant


def test_max_live_tokens():
    text = (
        "\n".join(
            [
                "buffer D : L2 (size=4096)",
                "buffer L : L1[0] (size=4096)",
                "t0 = transfer.async(dst=region(L, 0, 64), src=region(D, 0, 64))",
                "t1 = transfer.async(dst=region(L, 64, 64), src=region(D, 64, 64))",
                "t2 = transfer.sync(dst=region(L, 128, 64), src=region(D, 128, 64))",
                "wait(t0, t1)",
                "loop i in [0..7] @max_in_flight(3):",
                "  a = transfer.async(dst=region(L, 256 + i * 64, 64), src=region(D, 256 + i * 64, 64))",
                "  b = store.async(dst=region(D, 1024 + i * 64, 64), src=region(L, 256 + i * 64, 64), deps=[a])",
                "  wait(b)",
                "endloop",
            ]
        )
        + "\n"
    )
    prog = next(op for op in parse_nem(text, "live.nem").walk() if isinstance(op, ProgramOp))
    # before the wait: t0, t1 and the .sync t2 -> 3; in the loop: a and b live
    # together (2) times 3 iterations in flight -> 6
    assert max_live_tokens(prog) == 6
